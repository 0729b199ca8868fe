package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// When slidebench writes a page, it keeps the results it rendered the
// page from in a directory of recorded results (bench/recorded, tracked),
// so that the page can be rendered again from them without measuring:
//
//	cd bench && go run ./cmd/slidebench report -in recorded/benchmarks.json -gotest recorded/gotest.txt -scaling-doc ../docs/scaling.md
//	cd bench && go run ./cmd/slidebench scaling -in recorded/scaling.json -doc ../docs/scaling.md
type recordedFile struct{ src, name string }

// record copies each file's src to dir/name. A src that does not exist
// (the go test output is optional) or that is dir/name itself is skipped.
func record(dir string, files ...recordedFile) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		dst := filepath.Join(dir, f.name)
		if same(f.src, dst) {
			continue
		}
		b, err := os.ReadFile(f.src)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			return err
		}
		fmt.Printf("recorded %s as %s\n", f.src, dst)
	}
	return nil
}

func same(a, b string) bool {
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}
