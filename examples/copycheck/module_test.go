package copycheck_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// repoRoot is the repository root, seen from this package's directory.
const repoRoot = "../.."

// moduleFiles is the go.mod and go.sum of a test module.
type moduleFiles struct{ mod, sum []byte }

// goMod is the go.mod and go.sum every test module starts from; see
// template.
var goMod = sync.OnceValues(template)

// template returns the go.mod and go.sum of a new module,
// example.com/copycheck, that requires what the examples module and every
// adapter module require, with each slidelog module replaced by its
// directory in this checkout.
func template() (moduleFiles, error) {
	var none moduleFiles
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		return none, err
	}
	examples := filepath.Join(root, "examples")
	gomod, err := os.ReadFile(filepath.Join(examples, "go.mod"))
	if err != nil {
		return none, err
	}
	gosum, err := os.ReadFile(filepath.Join(examples, "go.sum"))
	if err != nil {
		return none, err
	}
	dir, err := os.MkdirTemp("", "slidelog-copycheck-")
	if err != nil {
		return none, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	tmpMod := filepath.Join(dir, "go.mod")
	if err := os.WriteFile(tmpMod, gomod, 0o644); err != nil {
		return none, err
	}

	mod, err := readModFile(filepath.Join(examples, "go.mod"))
	if err != nil {
		return none, err
	}
	edits := []string{"-module=example.com/copycheck"}
	required := map[string]bool{}
	for _, r := range mod.Require {
		required[r.Path] = true
	}
	for _, r := range mod.Replace {
		if filepath.IsLocal(filepath.FromSlash(r.New.Path)) || strings.HasPrefix(r.New.Path, "../") {
			edits = append(edits, "-replace="+r.Old.Path+"="+filepath.Join(examples, filepath.FromSlash(r.New.Path)))
		}
	}
	adapters, err := filepath.Glob(filepath.Join(root, "adapters", "*", "go.mod"))
	if err != nil {
		return none, err
	}
	for _, path := range adapters {
		m, err := readModFile(path)
		if err != nil {
			return none, err
		}
		for _, r := range m.Require {
			if !required[r.Path] {
				required[r.Path] = true
				edits = append(edits, "-require="+r.Path+"@"+r.Version)
			}
		}
		sum, err := os.ReadFile(filepath.Join(filepath.Dir(path), "go.sum"))
		if err != nil {
			return none, err
		}
		gosum = append(gosum, sum...)
	}
	if out, err := exec.Command("go", append(append([]string{"mod", "edit"}, edits...), tmpMod)...).CombinedOutput(); err != nil {
		return none, fmt.Errorf("go mod edit: %v\n%s", err, out)
	}
	gomod, err = os.ReadFile(tmpMod)
	return moduleFiles{gomod, gosum}, err
}

// modFile is the part of `go mod edit -json` the template reads.
type modFile struct {
	Require []struct{ Path, Version string }
	Replace []struct {
		Old, New struct{ Path, Version string }
	}
}

func readModFile(path string) (*modFile, error) {
	out, err := exec.Command("go", "mod", "edit", "-json", path).Output()
	if err != nil {
		return nil, fmt.Errorf("go mod edit -json %s: %w", path, err)
	}
	var m modFile
	if err := json.Unmarshal(out, &m); err != nil {
		return nil, fmt.Errorf("go mod edit -json %s: %w", path, err)
	}
	return &m, nil
}

// build writes files into a new module in a temporary directory and runs
// go build there, outside the workspace. It returns the command's output
// and an error when the build fails.
func build(t *testing.T, files map[string][]byte) ([]byte, error) {
	t.Helper()
	m, err := goMod()
	if err != nil {
		t.Fatalf("module template: %v", err)
	}
	dir := t.TempDir()
	files["go.mod"], files["go.sum"] = m.mod, m.sum
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", os.DevNull, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
	out, err := cmd.CombinedOutput()
	return out, err
}

// numbered returns src with line numbers, to show next to a build error.
func numbered(src []byte) string {
	var b bytes.Buffer
	for i, line := range strings.Split(strings.TrimRight(string(src), "\n"), "\n") {
		fmt.Fprintf(&b, "%4d  %s\n", i+1, line)
	}
	return b.String()
}
