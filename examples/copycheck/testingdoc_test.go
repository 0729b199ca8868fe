package copycheck_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// testingDocMarker opens the code of an adapter's test that docs/testing.md
// shows; "// --- docs/testing.md: NAME ends ---" closes it.
var testingDocMarker = regexp.MustCompile(`// --- docs/testing\.md: (\w+) begins ---\n`)

// TestTestingDocShowsAdapterTests checks that docs/testing.md shows, to
// the letter, the code between each pair of markers in an adapter's tests,
// which compile and pass in make test, and that the adapters it shows
// still carry their markers.
func TestTestingDocShowsAdapterTests(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "testing.md"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(repoRoot, "adapters", "*", "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	var shown []string
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(repoRoot, f)
		for _, m := range testingDocMarker.FindAllStringSubmatchIndex(string(src), -1) {
			name := string(src[m[2]:m[3]])
			code, _, found := strings.Cut(string(src[m[1]:]), "// --- docs/testing.md: "+name+" ends ---")
			if !found {
				t.Errorf("%s: the %s marker is not closed", rel, name)
				continue
			}
			shown = append(shown, name)
			if !strings.Contains(string(doc), strings.TrimSpace(code)) {
				t.Errorf("docs/testing.md does not show the %s test of %s verbatim; copy it there", name, filepath.ToSlash(rel))
			}
		}
	}
	slices.Sort(shown)
	if want := []string{"chi", "connect", "fiber", "gin", "grpc"}; !slices.Equal(shown, want) {
		t.Errorf("adapter tests shown in docs/testing.md: got %v, want %v", shown, want)
	}
}
