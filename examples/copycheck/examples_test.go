package copycheck_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// examplePrograms are the example commands, relative to the examples
// module: each is one main.go meant to be copied alone.
var examplePrograms = []string{"chi", "gin", "echo", "echov5", "fiber", "grpc/server", "grpc/client", "connect/server", "connect/client", "cmd/demo"}

// TestExamplesStandAlone copies each example's main.go alone into a new
// module and builds it there: an example that needs another file of its
// directory or a package of the examples module fails.
func TestExamplesStandAlone(t *testing.T) {
	sets := map[string]map[string][]byte{}
	for i, ex := range examplePrograms {
		dir := filepath.Join("..", filepath.FromSlash(ex))
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.Name() != "main.go" && !strings.HasSuffix(e.Name(), "_test.go") {
				t.Errorf("examples/%s holds %s besides main.go: the example must be main.go alone", ex, e.Name())
			}
		}
		src, err := os.ReadFile(filepath.Join(dir, "main.go"))
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(token.NewFileSet(), "main.go", src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if path, _ := strconv.Unquote(imp.Path.Value); strings.HasPrefix(path, "github.com/slidelog/slidelog/examples") {
				t.Errorf("examples/%s/main.go imports %s, which a copy cannot", ex, path)
			}
		}
		sets["e"+strconv.Itoa(i)] = map[string][]byte{"main.go": src}
	}
	// One build for all: each example alone in a package of its own.
	outs, err := buildAll(t, sets)
	if err != nil {
		t.Fatal(err)
	}
	for i, ex := range examplePrograms {
		if out := outs["e"+strconv.Itoa(i)]; out != "" {
			t.Errorf("examples/%s/main.go copied alone into a new module does not build:\n%s", ex, out)
		}
	}
}
