package main

import (
	"archive/zip"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

const ginPath = "github.com/slidelog/slidelog/adapters/gin"

func TestReleaseGoModRequiresSiblingsAtVersionWithoutReplace(t *testing.T) {
	give := `module github.com/slidelog/slidelog/adapters/gin

go 1.26.0

replace github.com/slidelog/slidelog/core => ../../core

replace github.com/example/forked => ../forked

require (
	github.com/gin-gonic/gin v1.12.0
	github.com/slidelog/slidelog/core v0.0.0-00010101000000-000000000000
)

require github.com/beorn7/perks v1.0.1 // indirect
`
	siblings := []workModule{
		{Dir: "core", Path: "github.com/slidelog/slidelog/core"},
		{Dir: "adapters/gin", Path: ginPath},
	}
	got, err := releaseGoMod([]byte(give), siblings, "v1.2.3")
	require.NoError(t, err)

	f, err := modfile.Parse("go.mod", got, nil)
	require.NoError(t, err)
	versions := map[string]string{}
	for _, r := range f.Require {
		versions[r.Mod.Path] = r.Mod.Version
	}
	want := map[string]string{
		"github.com/slidelog/slidelog/core": "v1.2.3",
		"github.com/gin-gonic/gin":          "v1.12.0",
		"github.com/beorn7/perks":           "v1.0.1",
	}
	assert.Equal(t, want, versions)
	assert.Empty(t, f.Replace, "got replace directives in %s", got)
	assert.NotContains(t, string(got), "replace")
	assert.Equal(t, ginPath, f.Module.Mod.Path)
}

func TestQuickStart(t *testing.T) {
	program := "import (\n\tslidegin \"" + ginPath + "\"\n)\n\nfunc main() {\n\tslidegin.Middleware(nil)\n}\n"
	tests := []struct {
		name string
		give string
		want string
	}{
		{
			name: "package clause added",
			give: "# gin\n\n```sh\ngo get " + ginPath + "\n```\n\n## Quick start\n\n```go\n" + program + "```\n",
			want: "package main\n\n" + program,
		},
		{
			name: "package clause kept",
			give: "```go\npackage main\n\n" + program + "```\n",
			want: "package main\n\n" + program,
		},
		{
			name: "first block with main importing the adapter",
			give: "```go\nr.Use(slidegin.Middleware(l))\n```\n\n" +
				"```go\nimport \"fmt\"\n\nfunc main() { fmt.Println() }\n```\n\n" +
				"```text\n```go\nfunc main() {} // \"" + ginPath + "\" inside a text fence\n```\n\n" +
				"```go\n" + program + "```\n\n" +
				"```go\npackage main\n\n// second program\n" + program + "```\n",
			want: "package main\n\n" + program,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := quickStart([]byte(tt.give), ginPath)
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(got))
		})
	}
}

func TestQuickStartWithoutProgramFails(t *testing.T) {
	page := "## Quick start\n\n```go\nr.Use(slidegin.Middleware(l))\n```\n\n```go\nimport \"fmt\"\n\nfunc main() { fmt.Println() }\n```\n"
	_, err := quickStart([]byte(page), ginPath)
	require.Error(t, err)
	assert.Contains(t, err.Error(), ginPath)
}

func TestAdapterPage(t *testing.T) {
	root := t.TempDir()
	docs := filepath.Join(root, "docs")
	require.NoError(t, os.MkdirAll(docs, 0o755))
	write := func(name, text string) {
		t.Helper()
		require.NoError(t, os.WriteFile(filepath.Join(docs, name), []byte(text), 0o644))
	}
	write("gin.md", "# gin\n")
	write("echo-v5.md", "```sh\ngo get github.com/slidelog/slidelog/adapters/echov5@latest\n```\n")
	write("notes.md", "go get github.com/slidelog/slidelog/adapters/twice\n")
	write("notes2.md", "go get github.com/slidelog/slidelog/adapters/twice\n")

	got, err := adapterPage(root, "adapters/gin", ginPath)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(docs, "gin.md"), got)

	got, err = adapterPage(root, "adapters/echov5", "github.com/slidelog/slidelog/adapters/echov5")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(docs, "echo-v5.md"), got)

	_, err = adapterPage(root, "adapters/none", "github.com/slidelog/slidelog/adapters/none")
	require.ErrorContains(t, err, "no docs page")

	_, err = adapterPage(root, "adapters/twice", "github.com/slidelog/slidelog/adapters/twice")
	require.ErrorContains(t, err, "several docs pages")
}

func TestWorkModulesAndAdapterModules(t *testing.T) {
	root := t.TempDir()
	writeModule := func(dir, path string) {
		t.Helper()
		require.NoError(t, os.MkdirAll(filepath.Join(root, dir), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, dir, "go.mod"), []byte("module "+path+"\n\ngo 1.26.0\n"), 0o644))
	}
	writeModule("core", "github.com/slidelog/slidelog/core")
	writeModule("adapters/gin", ginPath)
	writeModule("adapters/chi", "github.com/slidelog/slidelog/adapters/chi")
	require.NoError(t, os.MkdirAll(filepath.Join(root, "adapters", "notamodule"), 0o755))
	work := "go 1.26.0\n\nuse (\n\t./adapters/gin\n\t./adapters/chi\n\t./core\n)\n"
	require.NoError(t, os.WriteFile(filepath.Join(root, "go.work"), []byte(work), 0o644))

	modules, err := workModules(root)
	require.NoError(t, err)
	assert.Equal(t, []workModule{
		{Dir: "adapters/gin", Path: ginPath},
		{Dir: "adapters/chi", Path: "github.com/slidelog/slidelog/adapters/chi"},
		{Dir: "core", Path: "github.com/slidelog/slidelog/core"},
	}, modules)

	adapters, err := adapterModules(root, modules)
	require.NoError(t, err)
	assert.Equal(t, []workModule{
		{Dir: "adapters/chi", Path: "github.com/slidelog/slidelog/adapters/chi"},
		{Dir: "adapters/gin", Path: ginPath},
	}, adapters)

	// An adapter with a go.mod that go.work leaves out would escape the check.
	writeModule("adapters/grpc", "github.com/slidelog/slidelog/adapters/grpc")
	_, err = adapterModules(root, modules)
	require.ErrorContains(t, err, "adapters/grpc has a go.mod but go.work does not use it")
}

func TestWriteProxyVersionWritesTheProxyLayout(t *testing.T) {
	dir := t.TempDir()
	goMod := []byte("module " + ginPath + "\n\ngo 1.26.0\n")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), goMod, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gin.go"), []byte("package slidegin\n"), 0o644))
	proxy := t.TempDir()

	require.NoError(t, writeProxyVersion(proxy, ginPath, "v0.0.0-installcheck", dir, goMod))

	vdir := filepath.Join(proxy, filepath.FromSlash(ginPath), "@v")
	list, err := os.ReadFile(filepath.Join(vdir, "list"))
	require.NoError(t, err)
	assert.Equal(t, "v0.0.0-installcheck\n", string(list))

	mod, err := os.ReadFile(filepath.Join(vdir, "v0.0.0-installcheck.mod"))
	require.NoError(t, err)
	assert.Equal(t, string(goMod), string(mod))

	var info struct{ Version string }
	data, err := os.ReadFile(filepath.Join(vdir, "v0.0.0-installcheck.info"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &info))
	assert.Equal(t, "v0.0.0-installcheck", info.Version)

	zipFile := filepath.Join(vdir, "v0.0.0-installcheck.zip")
	zr, err := zip.OpenReader(zipFile)
	require.NoError(t, err)
	defer zr.Close()
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	prefix := ginPath + "@v0.0.0-installcheck/"
	assert.ElementsMatch(t, []string{prefix + "go.mod", prefix + "gin.go"}, names)
	_, err = modzip.CheckZip(module.Version{Path: ginPath, Version: "v0.0.0-installcheck"}, zipFile)
	assert.NoError(t, err)
}

func TestRunRejectsANonCanonicalVersion(t *testing.T) {
	for _, v := range []string{"1.2.3", "v1.2", "v1.2.3+meta", "latest"} {
		err := run(t.Context(), t.TempDir(), v, false)
		require.Error(t, err, "version %q", v)
		assert.True(t, strings.Contains(err.Error(), "not a canonical semantic version"), "got %v, want a version error for %q", err, v)
	}
}
