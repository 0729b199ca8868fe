package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRecord checks that the results a page is rendered from are kept,
// that an absent optional file is skipped, and that recording the
// recorded file again leaves it as it is.
func TestRecord(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "latest.json")
	if err := os.WriteFile(src, []byte(`{"cells":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	kept := filepath.Join(dir, "recorded")
	files := []recordedFile{{src, "benchmarks.json"}, {filepath.Join(dir, "absent.txt"), "gotest.txt"}}
	if err := record(kept, files...); err != nil {
		t.Fatal(err)
	}
	if err := record(kept, recordedFile{filepath.Join(kept, "benchmarks.json"), "benchmarks.json"}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(kept, "benchmarks.json")); err != nil || string(b) != `{"cells":[]}` {
		t.Errorf("recorded results = %q (%v), want %q", b, err, `{"cells":[]}`)
	}
	if _, err := os.Stat(filepath.Join(kept, "gotest.txt")); !os.IsNotExist(err) {
		t.Errorf("an absent go test output was recorded (%v)", err)
	}
}

// TestReportRendersFromRecorded runs slidebench report on a run's results,
// then again on the results it recorded: the page keeps its hand-written
// analysis and comes out the same.
func TestReportRendersFromRecorded(t *testing.T) {
	dir := t.TempDir()
	in, page, kept := filepath.Join(dir, "latest.json"), filepath.Join(dir, "benchmarks.md"), filepath.Join(dir, "recorded")
	// No cells, so no charts to draw (slow under -race): the tables of
	// the memory figures and the targets are enough to compare.
	r := fullResults()
	r.Cells, r.Accuracy, r.Overload = nil, nil, nil
	if err := writeResults(in, r); err != nil {
		t.Fatal(err)
	}
	const analysis = "Written by hand.\n"
	if err := os.WriteFile(page, []byte("# Benchmarks\n\n"+analysisBegin+"\n"+analysis+analysisEnd+"\n\nold tables\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	render := func(in string) string {
		t.Helper()
		args := []string{"-in", in, "-gotest", filepath.Join(dir, "absent.txt"), "-out", page, "-img", filepath.Join(dir, "img"), "-record", kept}
		if err := reportMain(args); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	first := render(in)
	if got := keptAnalysis(first); got != analysis {
		t.Errorf("analysis = %q, want %q", got, analysis)
	}
	if again := render(filepath.Join(kept, "benchmarks.json")); again != first {
		t.Errorf("the page rendered from the recorded results differs from the first")
	}
}
