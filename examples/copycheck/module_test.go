package copycheck_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
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

// buildAll builds many programs and fragments with one go build: it
// writes each set of files into a directory of its own (its key) of one
// new module in a directory of its own (buildDir), outside the workspace, and runs go
// build -json ./... there, so that the module is loaded and each
// dependency checked once, not once per set. A program (package main) is
// built as a package of another name, which type-checks it as fully but
// links no binary. It returns, per set, the build's output for its
// package; a set that built has none. An error means the build could not
// run (not that a set failed).
func buildAll(t *testing.T, sets map[string]map[string][]byte) (map[string]string, error) {
	t.Helper()
	m, err := goMod()
	if err != nil {
		return nil, fmt.Errorf("module template: %w", err)
	}
	dir := buildDir(t)
	for name, data := range map[string][]byte{"go.mod": m.mod, "go.sum": m.sum} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return nil, err
		}
	}
	for set, files := range sets {
		if err := os.MkdirAll(filepath.Join(dir, set), 0o755); err != nil {
			return nil, err
		}
		for name, data := range files {
			data = mainClause.ReplaceAll(data, []byte("package copycheckmain"))
			if err := os.WriteFile(filepath.Join(dir, set, name), data, 0o644); err != nil {
				return nil, err
			}
		}
	}
	cmd := exec.CommandContext(t.Context(), "go", "build", "-json", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	out := map[string]string{}
	dec := json.NewDecoder(bytes.NewReader(stdout))
	for {
		var ev struct{ ImportPath, Action, Output string }
		if derr := dec.Decode(&ev); derr != nil {
			break
		}
		set := strings.TrimPrefix(strings.TrimPrefix(ev.ImportPath, "example.com/copycheck"), "/")
		// Errors of a package that failed to load carry the set's path in
		// their text, not in ImportPath.
		if set == "" || strings.Contains(set, " ") {
			for s := range sets {
				if strings.Contains(ev.Output, s+"/") || strings.Contains(ev.Output, "example.com/copycheck/"+s) {
					set = s
				}
			}
		}
		if ev.Output != "" {
			out[set] += ev.Output
		}
		if ev.Action == "build-fail" && out[set] == "" {
			out[set] = "build failed"
		}
	}
	if stderr.Len() > 0 {
		// Loading errors (a missing module, an import cycle) that go
		// build prints outside its JSON: attribute them by path.
		for line := range strings.SplitSeq(stderr.String(), "\n") {
			for s := range sets {
				if strings.Contains(line, s+"/") || strings.Contains(line, "example.com/copycheck/"+s) {
					out[s] += line + "\n"
				}
			}
		}
	}
	if err != nil {
		// A failed build must fail some set: an error no set's output
		// explains (a broken go.mod, a missing module) fails the test.
		explained := false
		for s := range sets {
			explained = explained || out[s] != ""
		}
		if !explained {
			return nil, fmt.Errorf("go build ./...: %v\n%s%s", err, stdout, stderr.Bytes())
		}
	}
	delete(out, "")
	return out, nil
}

// buildDir returns an empty directory for buildAll's module: the same one
// on every run of the test in this checkout, under the user's cache
// directory, so that go build finds the blocks that did not change in its
// cache (its keys include a package's directory); a temporary directory
// when that one is in use by another run, or there is no cache directory.
func buildDir(t *testing.T) string {
	t.Helper()
	cache, err := os.UserCacheDir()
	root, rerr := filepath.Abs(repoRoot)
	if err != nil || rerr != nil {
		return t.TempDir()
	}
	sum := sha256.Sum256([]byte(root))
	dir := filepath.Join(cache, "slidelog-copycheck", hex.EncodeToString(sum[:6]), t.Name())
	lock := dir + ".lock"
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return t.TempDir()
	}
	if fi, err := os.Stat(lock); err == nil && time.Since(fi.ModTime()) > time.Hour {
		_ = os.Remove(lock) // left by a run that was killed
	}
	if err := os.Mkdir(lock, 0o755); err != nil {
		return t.TempDir() // another run builds there now
	}
	t.Cleanup(func() { _ = os.Remove(lock) })
	if err := os.RemoveAll(dir); err != nil {
		return t.TempDir()
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return t.TempDir()
	}
	return dir
}

// mainClause is a program's package clause, renamed by buildAll.
var mainClause = regexp.MustCompile(`(?m)^package main\b`)

// numbered returns src with line numbers, to show next to a build error.
func numbered(src []byte) string {
	var b bytes.Buffer
	for i, line := range strings.Split(strings.TrimRight(string(src), "\n"), "\n") {
		fmt.Fprintf(&b, "%4d  %s\n", i+1, line)
	}
	return b.String()
}
