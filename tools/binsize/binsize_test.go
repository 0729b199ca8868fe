package binsize

import (
	"debug/buildinfo"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// heavy are the modules a program that does not use them must not link.
var heavy = []string{"github.com/redis/go-redis/v9", "github.com/prometheus/client_golang"}

func TestWhatEachProgramLinks(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name   string
		forbid []string // modules the program must not link
		need   []string // modules it must link
	}{
		{"memory", heavy, nil},
		{"chimemory", heavy, []string{"github.com/go-chi/chi/v5"}},
		{"redis", heavy[1:], heavy[:1]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := filepath.Join(dir, tc.name)
			cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./"+tc.name)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("go build ./%s: %v\n%s", tc.name, err, out)
			}
			info, err := buildinfo.ReadFile(bin)
			if err != nil {
				t.Fatal(err)
			}
			var mods []string
			for _, d := range info.Deps {
				mods = append(mods, d.Path)
			}
			st, err := os.Stat(bin)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %.1f MB, %d modules: %s", tc.name, float64(st.Size())/1e6, len(mods), strings.Join(mods, " "))
			for _, m := range tc.forbid {
				if slices.Contains(mods, m) {
					t.Errorf("%s links %s", tc.name, m)
				}
			}
			for _, m := range tc.need {
				if !slices.Contains(mods, m) {
					t.Errorf("%s does not link %s", tc.name, m)
				}
			}
		})
	}
}
