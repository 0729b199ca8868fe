package copycheck_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The test of this file checks that the documentation names what exists:
// a doc comment or a page that names an identifier of ours
// (`slidelog.WithMetrics`, `LocalStore`, `BreakerStates`) after a rename
// or a removal sends its reader looking for nothing.

// apiNames is what the workspace's non-test Go files declare: per package
// name, its exported top-level names and, for each type, "Type.Member"
// for its exported fields and methods; and all names, unqualified, in
// any. Test files are left out: a test hook is no name a user can call.
type apiNames struct {
	pkg map[string]map[string]bool
	any map[string]bool
}

// ourPackages are the package names a qualified reference is checked
// against.
var ourPackages = []string{
	"slidelog", "httplimit", "memstore", "redisstore", "prommetrics", "otelmetrics", "readiness",
	"slidelogtest", "redistest", "slidechi", "slidegin", "slideecho", "slideechov5", "slidefiber",
	"slidegrpc", "slideconnect",
}

// goSources returns the non-test Go files of core, adapters and examples,
// outside testdata.
func goSources(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, dir := range []string{"core", "adapters", "examples"} {
		err := filepath.WalkDir(filepath.Join(repoRoot, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			if !d.IsDir() && strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
				out = append(out, p)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func collectNames(t *testing.T, files []string) (apiNames, map[string]*ast.File, *token.FileSet) {
	t.Helper()
	names := apiNames{pkg: map[string]map[string]bool{}, any: map[string]bool{}}
	parsed := map[string]*ast.File{}
	fset := token.NewFileSet()
	add := func(pkg, name string) {
		if names.pkg[pkg] == nil {
			names.pkg[pkg] = map[string]bool{}
		}
		names.pkg[pkg][name] = true
		if i := strings.LastIndexByte(name, '.'); i >= 0 {
			name = name[i+1:]
		}
		names.any[name] = true
	}
	for _, p := range files {
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		parsed[p] = f
		pkg := f.Name.Name
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil {
					add(pkg, d.Name.Name)
					continue
				}
				typ := d.Recv.List[0].Type
				if s, ok := typ.(*ast.StarExpr); ok {
					typ = s.X
				}
				if ix, ok := typ.(*ast.IndexExpr); ok {
					typ = ix.X
				}
				if ix, ok := typ.(*ast.IndexListExpr); ok {
					typ = ix.X
				}
				if id, ok := typ.(*ast.Ident); ok {
					add(pkg, id.Name+"."+d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						add(pkg, s.Name.Name)
						var fields *ast.FieldList
						switch tt := s.Type.(type) {
						case *ast.StructType:
							fields = tt.Fields
						case *ast.InterfaceType:
							fields = tt.Methods
						}
						if fields == nil {
							continue
						}
						for _, fl := range fields.List {
							for _, n := range fl.Names {
								if n.IsExported() {
									add(pkg, s.Name.Name+"."+n.Name)
								}
							}
							if len(fl.Names) == 0 { // embedded: its members are promoted
								var id *ast.Ident
								switch e := fl.Type.(type) {
								case *ast.Ident:
									id = e
								case *ast.SelectorExpr:
									id = e.Sel
								case *ast.StarExpr:
									id, _ = e.X.(*ast.Ident)
								}
								if id != nil {
									add(pkg, s.Name.Name+"."+id.Name)
								}
							}
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								add(pkg, n.Name)
							}
						}
					}
				}
			}
		}
	}
	return names, parsed, fset
}

var (
	// qualified is a reference such as slidelog.WithName or
	// httplimit.ClientIP.Header.
	qualified = regexp.MustCompile(`\b(` + strings.Join(ourPackages, "|") + `)\.([A-Z][A-Za-z0-9_]*)(?:\.([A-Z][A-Za-z0-9_]*))?`)
	// optionLike is an unqualified name the way options, errors and
	// constructors are named: WithMetrics, ErrUnavailable, NewResult.
	optionLike = regexp.MustCompile(`\b(?:With|Err|New|Must)[A-Z][A-Za-z0-9]*\b`)
	// camel is a back-quoted name of two words or more on a page, such
	// as `LocalStore`.
	camel = regexp.MustCompile("`([A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+)(?:\\(|`)")
	// camelGo is an unqualified name of two words or more in a doc
	// comment, such as BreakerStates.
	camelGo = regexp.MustCompile(`(?:^|[^.\w])([A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+)\b`)
)

// foreign are names the pages and comments mention unqualified that are
// not Go identifiers of ours: other modules' settings and codes, header
// fields, alert names, subtests, a former design.
var foreign = []string{
	"RateLimit",                                                         // the IETF header field
	"RetryInfo", "QuotaFailure", "ResourceExhausted", "InvalidArgument", // gRPC
	"DataLoss", "SetServingStatus", "DeadlineExceeded",
	"MaxRedirects", "ContextTimeoutEnabled", "ReadTimeout", "PoolSize", "MasterForKey", "FailoverClient", "DialTimeout", "OnNewNode", // go-redis
	"TrustedPlatform", "SetTrustedProxies", // gin
	"RoutePath", "RouteMethod", "RoutePatterns", "RealIP", // chi
	"ProxyHeader", "EnableTrustedProxyCheck", "EnableIPValidation", "DisableHeaderNormalizing", // fiber
	"ContextTimeout",            // echo's middleware
	"OnLimit", "NewRateLimiter", // peers in the benchmarks
	"TakeInto",                                                 // benchmarks.md: an earlier attempt, named as such
	"FailoverReplicaAck",                                       // a subtest of the fault suite
	"UnixSocket",                                               // a subtest of the proxy suite
	"ContextEndsTake", "ContextEndsRefund", "ContextEndsReset", // subtests of the store suite (slidelogtest.WithStall)
	"PlainOptionsLongStallTimeout",         // a subtest of redisstore's TestStoreConformanceStoppedServer
	"ContextEndsPeek", "ContextEndsRecord", // the same, on a Peeker and a Recorder
	"CodeInternal", "CodeInvalidArgument", "CodeUnavailable", // connect
	"FullPath", "GetPath", "UnescapePath", "PeekAll", "MaxRetries", "MaxInt64", // frameworks, go-redis, math
	"OpenTelemetry", "MeterProvider", "MiB", "KiB",
	"PerMonth",         // policy.go: "so no PerMonth exists"
	"LimiterObservers", // the plural of LimiterObserver
}

// testNames are the tests, fuzz targets, benchmarks and examples of the
// repository's test files, which pages cite; not their other functions,
// such as test hooks.
func testNames(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != repoRoot && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv != nil {
				continue
			}
			for _, kind := range []string{"Test", "Fuzz", "Benchmark", "Example"} {
				if strings.HasPrefix(fd.Name.Name, kind) { // not a test hook such as BreakerStates
					out[fd.Name.Name] = true
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// check returns the problems of one reference in text of package pkg
// ("" for a page).
func (n apiNames) check(text string) []string {
	var out []string
	for _, m := range qualified.FindAllStringSubmatch(text, -1) {
		p, name, member := m[1], m[2], m[3]
		names := n.pkg[p]
		if names == nil {
			continue // a package of ours that this test does not parse
		}
		if !names[name] {
			out = append(out, p+"."+name)
			continue
		}
		if member != "" && !names[name+"."+member] && isType(names, name) {
			out = append(out, p+"."+name+"."+member)
		}
	}
	stripped := qualified.ReplaceAllString(text, "")
	for _, name := range optionLike.FindAllString(stripped, -1) {
		if !n.any[name] && !slices.Contains(foreign, name) && !strings.Contains(stripped, "."+name) {
			out = append(out, name)
		}
	}
	return out
}

// isType reports whether name is a type, judged by its having members.
func isType(names map[string]bool, name string) bool {
	for k := range names {
		if strings.HasPrefix(k, name+".") {
			return true
		}
	}
	return false
}

// TestDocsNameWhatExists: every identifier of ours that a doc comment of
// the workspace's Go code, README.md or a docs page names exists: a
// qualified name (slidelog.WithName, httplimit.ClientIP.Header) in its
// package, an unqualified option, error or constructor name (WithName,
// ErrUnavailable) somewhere in the workspace, and on the pages a
// back-quoted CamelCase name (`LocalStore`) likewise, unless the page
// qualifies it with another package (gin's `SetTrustedProxies`).
func TestDocsNameWhatExists(t *testing.T) {
	files := goSources(t)
	names, parsed, fset := collectNames(t, files)
	tests := testNames(t)
	for name := range tests {
		if strings.HasPrefix(name, "Example") {
			names.any[name] = true
			for _, p := range ourPackages { // httplimit.ExampleWriteDenied
				if names.pkg[p] != nil {
					names.pkg[p][name] = true
				}
			}
		}
	}
	for _, p := range files {
		f := parsed[p]
		for _, cg := range f.Comments {
			text := cg.Text()
			if strings.HasPrefix(strings.TrimSpace(text), "go:") {
				continue
			}
			for _, bad := range names.check(text) {
				t.Errorf("%s: names %s, which does not exist", fset.Position(cg.Pos()), bad)
			}
			for _, m := range camelGo.FindAllStringSubmatch(text, -1) {
				if !names.any[m[1]] && !tests[m[1]] && !slices.Contains(foreign, m[1]) {
					t.Errorf("%s: names %s, which does not exist", fset.Position(cg.Pos()), m[1])
				}
			}
		}
	}
	for _, page := range snippetPages(t) {
		b, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(page)))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, bad := range names.check(line) {
				t.Errorf("%s line %d: names %s, which does not exist", page, i+1, bad)
			}
			for _, m := range camel.FindAllStringSubmatch(line, -1) {
				if !names.any[m[1]] && !tests[m[1]] && !strings.Contains(line, "."+m[1]) && !slices.Contains(foreign, m[1]) && !strings.HasPrefix(m[1], "Slidelog") { // Slidelog*: the alerts in deploy/
					t.Errorf("%s line %d: names `%s`, which does not exist", page, i+1, m[1])
				}
			}
		}
	}
}

// TestDocsNameWhatExistsCatches: the check finds the names the review
// found stale, and passes what exists.
func TestDocsNameWhatExistsCatches(t *testing.T) {
	names, _, _ := collectNames(t, goSources(t))
	for _, give := range []string{
		"(WithMetrics builds one for Prometheus)",
		"as slidelog.BreakerStates does",
		"httplimit.WithTrustedProxy and httplimit.WithClientHeader",
		"httplimit.ClientIP.TrustedProxy",
		"WithIPv6Grouping(48, 64)",
	} {
		if len(names.check(give)) == 0 {
			t.Errorf("%q: got no problem, want one", give)
		}
	}
	for _, give := range []string{
		"slidelog.WithName and WithObserver",
		"httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: ...})",
		"httplimit.ClientIP.UnixSocketProxy, redisstore.WithStallTimeout, slidelog.ErrUnavailable",
	} {
		if got := names.check(give); len(got) != 0 {
			t.Errorf("%q: got %v, want none", give, got)
		}
	}
}
