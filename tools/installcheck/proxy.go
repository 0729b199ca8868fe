package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

// workModule is one module of the repository: its directory relative to the
// repository root (slash-separated, e.g. "adapters/gin") and its module path.
type workModule struct {
	Dir  string
	Path string
}

// workModules returns the modules named by the use directives of root's
// go.work, with the module path each one's go.mod declares.
func workModules(root string) ([]workModule, error) {
	data, err := os.ReadFile(filepath.Join(root, "go.work"))
	if err != nil {
		return nil, err
	}
	work, err := modfile.ParseWork("go.work", data, nil)
	if err != nil {
		return nil, err
	}
	var modules []workModule
	for _, u := range work.Use {
		dir := filepath.ToSlash(filepath.Clean(u.Path))
		path, err := modulePath(filepath.Join(root, filepath.FromSlash(dir)))
		if err != nil {
			return nil, fmt.Errorf("go.work uses %s: %w", u.Path, err)
		}
		modules = append(modules, workModule{Dir: dir, Path: path})
	}
	if len(modules) == 0 {
		return nil, errors.New("go.work uses no modules")
	}
	return modules, nil
}

// modulePath reads the module path from dir's go.mod.
func modulePath(dir string) (string, error) {
	data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return "", err
	}
	path := modfile.ModulePath(data)
	if path == "" {
		return "", fmt.Errorf("%s/go.mod has no module line", dir)
	}
	return path, nil
}

// adapterModules returns the modules whose directory is directly under
// adapters/, sorted by directory. Every such directory with a go.mod must
// be listed in go.work, or the adapter would be missing from the check.
func adapterModules(root string, modules []workModule) ([]workModule, error) {
	entries, err := os.ReadDir(filepath.Join(root, "adapters"))
	if err != nil {
		return nil, err
	}
	byDir := make(map[string]workModule, len(modules))
	for _, m := range modules {
		byDir[m.Dir] = m
	}
	var adapters []workModule
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := "adapters/" + e.Name()
		if _, err := os.Stat(filepath.Join(root, dir, "go.mod")); err != nil {
			continue
		}
		m, ok := byDir[dir]
		if !ok {
			return nil, fmt.Errorf("%s has a go.mod but go.work does not use it", dir)
		}
		adapters = append(adapters, m)
	}
	sort.Slice(adapters, func(i, j int) bool { return adapters[i].Dir < adapters[j].Dir })
	return adapters, nil
}

// releaseGoMod returns data (a go.mod) as a released module would carry it:
// every requirement on a sibling (a module in siblings) at version, and no
// replace directives, so that the module resolves its siblings by version.
func releaseGoMod(data []byte, siblings []workModule, version string) ([]byte, error) {
	f, err := modfile.Parse("go.mod", data, nil)
	if err != nil {
		return nil, err
	}
	isSibling := make(map[string]bool, len(siblings))
	for _, s := range siblings {
		isSibling[s.Path] = true
	}
	for _, r := range f.Require {
		if isSibling[r.Mod.Path] {
			if err := f.AddRequire(r.Mod.Path, version); err != nil {
				return nil, err
			}
		}
	}
	for _, r := range append([]*modfile.Replace(nil), f.Replace...) {
		if err := f.DropReplace(r.Old.Path, r.Old.Version); err != nil {
			return nil, err
		}
	}
	f.Cleanup()
	return f.Format()
}

// moduleFiles lists the files of the module in dir as a clone of the
// repository would have them: those git tracks or would track (untracked
// files not ignored), that exist in the working tree, relative to dir.
// Build output, fuzz caches and other ignored files stay out of the zip.
func moduleFiles(dir string) ([]string, error) {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", ".")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files in %s: %w: %s", dir, err, strings.TrimSpace(stderr.String()))
	}
	var files []string
	for name := range strings.SplitSeq(string(out), "\x00") {
		if name == "" {
			continue
		}
		info, err := os.Lstat(filepath.Join(dir, name))
		if err != nil || !info.Mode().IsRegular() {
			continue // deleted in the working tree, or a symlink (not allowed in module zips)
		}
		files = append(files, name)
	}
	return files, nil
}

// publish copies module m from the working tree under srcRoot, with its
// go.mod made a release go.mod (releaseGoMod), and writes it into the file
// proxy at proxyDir at version: @v/list, @v/<version>.info, .mod and .zip.
func publish(root string, m workModule, siblings []workModule, version, proxyDir, srcRoot string) error {
	src := filepath.Join(root, filepath.FromSlash(m.Dir))
	files, err := moduleFiles(src)
	if err != nil {
		return err
	}
	dst := filepath.Join(srcRoot, filepath.FromSlash(m.Dir))
	for _, name := range files {
		if err := copyFile(filepath.Join(src, name), filepath.Join(dst, name)); err != nil {
			return err
		}
	}
	goMod, err := os.ReadFile(filepath.Join(src, "go.mod"))
	if err != nil {
		return err
	}
	goMod, err = releaseGoMod(goMod, siblings, version)
	if err != nil {
		return fmt.Errorf("rewrite go.mod: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dst, "go.mod"), goMod, 0o644); err != nil {
		return err
	}
	return writeProxyVersion(proxyDir, m.Path, version, dst, goMod)
}

// writeProxyVersion writes module path at version, whose files are in dir
// and whose go.mod is goMod, into the file proxy at proxyDir.
func writeProxyVersion(proxyDir, path, version, dir string, goMod []byte) error {
	escPath, err := module.EscapePath(path)
	if err != nil {
		return err
	}
	escVersion, err := module.EscapeVersion(version)
	if err != nil {
		return err
	}
	vdir := filepath.Join(proxyDir, filepath.FromSlash(escPath), "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return err
	}
	zf, err := os.Create(filepath.Join(vdir, escVersion+".zip"))
	if err != nil {
		return err
	}
	if err := zip.CreateFromDir(zf, module.Version{Path: path, Version: version}, dir); err != nil {
		zf.Close()
		return fmt.Errorf("zip: %w", err)
	}
	if err := zf.Close(); err != nil {
		return err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Now().UTC().Truncate(time.Second)})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(vdir, escVersion+".info"), info, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(vdir, escVersion+".mod"), goMod, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(vdir, "list"), []byte(version+"\n"), 0o644)
}

// copyFile copies the regular file src to dst, creating dst's directory.
func copyFile(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
