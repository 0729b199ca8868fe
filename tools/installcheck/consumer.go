package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// goEnv returns the environment for the go commands run in consumer
// modules: the process environment with no workspace, a fresh module cache
// at modCache, and GOPROXY trying the file proxy at proxyDir first, then the
// local module cache's downloads, then the environment's GOPROXY.
func goEnv(ctx context.Context, proxyDir, modCache string) ([]string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOPROXY", "GOMODCACHE", "GOFLAGS").Output()
	if err != nil {
		return nil, fmt.Errorf("go env: %w", err)
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	for len(lines) < 3 {
		lines = append(lines, "")
	}
	realProxy, userCache, flags := lines[0], lines[1], lines[2]

	proxies := []string{fileURL(proxyDir)}
	if userCache != "" {
		if _, err := os.Stat(filepath.Join(userCache, "cache", "download")); err == nil {
			proxies = append(proxies, fileURL(filepath.Join(userCache, "cache", "download")))
		}
	}
	if realProxy != "" {
		proxies = append(proxies, realProxy)
	}
	env := append(os.Environ(),
		"GOWORK=off",
		"GOTOOLCHAIN=local",
		"GOMODCACHE="+modCache,
		"GOPROXY="+strings.Join(proxies, ","),
		"GONOSUMDB="+strings.TrimSuffix(repoModulePrefix, "/"),
		"GONOPROXY=",
		"GOPRIVATE=",
		"GOFLAGS="+strings.TrimSpace(flags+" -mod=mod -modcacherw"),
	)
	return env, nil
}

// fileURL returns the file:// URL of the absolute directory dir.
func fileURL(dir string) string {
	return "file://" + filepath.ToSlash(dir)
}

// checkAdapter installs adapter a at version in a fresh module under
// consumersDir and builds its docs page's quick start there.
func checkAdapter(ctx context.Context, root string, a workModule, version string, env []string, consumersDir string) error {
	start := time.Now()
	fail := func(step string, err error) error {
		return fmt.Errorf("%s: %s: %w", a.Dir, step, err)
	}
	page, err := adapterPage(root, a.Dir, a.Path)
	if err != nil {
		return fail("find the docs page", err)
	}
	text, err := os.ReadFile(page)
	if err != nil {
		return fail("read the docs page", err)
	}
	rel, _ := filepath.Rel(root, page)
	program, err := quickStart(text, a.Path)
	if err != nil {
		return fail("extract the quick start from "+rel, err)
	}

	dir := filepath.Join(consumersDir, filepath.Base(a.Dir))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fail("create the consumer module", err)
	}
	goMod := "module example.com/installcheck/" + filepath.Base(a.Dir) + "\n\ngo " + goVersion() + "\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(goMod), 0o644); err != nil {
		return fail("create the consumer module", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), program, 0o644); err != nil {
		return fail("write main.go", err)
	}

	steps := []struct {
		name string
		args []string
	}{
		{"go get", []string{"get", a.Path + "@" + version}},
		{"go mod tidy", []string{"mod", "tidy"}},
		{"go build (quick start of " + rel + ")", []string{"build", "-trimpath", "-o", filepath.Join(dir, "quickstart"), "."}},
	}
	for _, s := range steps {
		if err := goCmd(ctx, dir, env, s.args...); err != nil {
			return fail(s.name, err)
		}
	}

	// The adapter and core resolved by version, from the file proxy: no
	// replace, no workspace.
	for _, path := range []string{a.Path, repoModulePrefix + "core"} {
		out, err := goOutput(ctx, dir, env, "list", "-m", "-f", "{{.Version}} {{if .Replace}}replaced{{end}}", path)
		if err != nil {
			return fail("go list -m "+path, err)
		}
		if got := strings.TrimSpace(out); got != version {
			return fail("go list -m "+path, fmt.Errorf("got %q, want %s", got, version))
		}
	}
	fmt.Printf("installcheck: %s: go get %s@%s, go mod tidy, go build of the quick start in %s: ok (%s)\n",
		a.Dir, a.Path, version, rel, time.Since(start).Round(time.Second))
	return nil
}

// goVersion returns the go line for the consumer module: the language
// version of the toolchain running this program, as go mod init would write.
func goVersion() string {
	out, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		return "1.26"
	}
	v := strings.TrimPrefix(strings.TrimSpace(string(out)), "go")
	if i := strings.IndexAny(v, " -"); i >= 0 {
		v = v[:i]
	}
	return v
}

// goCmd runs the go command with args in dir and env; on failure the error
// carries the command's output.
func goCmd(ctx context.Context, dir string, env []string, args ...string) error {
	_, err := goOutput(ctx, dir, env, args...)
	return err
}

// goOutput runs the go command with args in dir and env and returns its
// standard output; on failure the error carries its standard error.
func goOutput(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second // after a timeout, don't wait on output pipes a killed command's children still hold
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return "", fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}
