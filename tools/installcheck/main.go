package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/mod/semver"
)

// repoModulePrefix is the module path every slidelog module starts with.
const repoModulePrefix = "github.com/slidelog/slidelog/"

func main() {
	root := flag.String("root", ".", "repository root (the directory holding go.work)")
	version := flag.String("version", "v0.0.0-installcheck", "version to publish the modules at in the file proxy")
	timeout := flag.Duration("timeout", 20*time.Minute, "bound for the whole check")
	keep := flag.Bool("keep", false, "keep the temporary directory (proxy, module cache, consumer modules)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	if err := run(ctx, *root, *version, *keep); err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("%w (the check is bounded by -timeout=%s)", err, *timeout)
		}
		fmt.Fprintf(os.Stderr, "installcheck: FAILED: %v\n", err)
		os.Exit(1)
	}
}

// run is the whole check: publish every module into a file proxy under a
// temporary directory, then install and build every adapter's quick start.
func run(ctx context.Context, root, version string, keep bool) error {
	if !semver.IsValid(version) || semver.Canonical(version) != version {
		return fmt.Errorf("-version %q is not a canonical semantic version such as v0.0.0-installcheck", version)
	}
	root, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	start := time.Now()

	tmp, err := os.MkdirTemp("", "slidelog-installcheck-")
	if err != nil {
		return err
	}
	if keep {
		fmt.Printf("installcheck: keeping %s\n", tmp)
	} else {
		defer func() {
			if err := os.RemoveAll(tmp); err != nil {
				fmt.Fprintf(os.Stderr, "installcheck: WARNING: removing %s: %v\n", tmp, err)
			}
		}()
	}

	modules, err := workModules(root)
	if err != nil {
		return err
	}
	proxyDir := filepath.Join(tmp, "proxy")
	for _, m := range modules {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := publish(root, m, modules, version, proxyDir, filepath.Join(tmp, "src")); err != nil {
			return fmt.Errorf("%s: publish to the file proxy: %w", m.Dir, err)
		}
		fmt.Printf("installcheck: published %s@%s\n", m.Path, version)
	}

	adapters, err := adapterModules(root, modules)
	if err != nil {
		return err
	}
	if len(adapters) == 0 {
		return errors.New("no adapter modules under adapters/")
	}
	env, err := goEnv(ctx, proxyDir, filepath.Join(tmp, "modcache"))
	if err != nil {
		return err
	}
	for _, a := range adapters {
		if err := checkAdapter(ctx, root, a, version, env, filepath.Join(tmp, "consumers")); err != nil {
			return err
		}
	}
	fmt.Printf("installcheck: ok: %d modules published at %s, %d adapters installed and their quick starts built (%s)\n",
		len(modules), version, len(adapters), time.Since(start).Round(time.Second))
	return nil
}
