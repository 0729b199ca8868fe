package slidelog

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
)

// programPath names this program for the default namespace of a limiter on
// a shared store: the import path of its main package (such as
// "example.com/shop/cmd/api"), which every build of the program shares
// and other programs do not; the main module's path for a program built
// from files ("go run main.go"); the executable's base name when the
// binary carries no build information.
var programPath = sync.OnceValue(func() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Path != "" && bi.Path != "command-line-arguments" {
			return bi.Path
		}
		if bi.Main.Path != "" {
			return bi.Main.Path
		}
	}
	if len(os.Args) > 0 && os.Args[0] != "" {
		return filepath.Base(os.Args[0])
	}
	return "unknown"
})

// defaultNamespace is the namespace of the logs of a limiter without
// WithName: its name for a Local store, which no other program sees, and
// otherwise the program's path and its name, so that two programs on one
// Redis that name no limiter (both "per-minute") never share a budget,
// while the instances of one program do.
func defaultNamespace(name string, local bool) string {
	if local {
		return name
	}
	return programPath() + ":" + name
}
