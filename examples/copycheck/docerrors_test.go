package copycheck_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The tests of this file check the documentation for kinds of errors found
// in it before, each a claim or a program that reads right and is wrong.

// pageBlocks returns each page of snippetPages with its text and ```go
// blocks.
func pageBlocks(t *testing.T) map[string]struct {
	text   string
	blocks []block
} {
	t.Helper()
	out := map[string]struct {
		text   string
		blocks []block
	}{}
	for _, page := range snippetPages(t) {
		b, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(page)))
		if err != nil {
			t.Fatal(err)
		}
		out[page] = struct {
			text   string
			blocks []block
		}{string(b), goBlocks(string(b))}
	}
	return out
}

// TestRedisProgramsNameTheirLimiters: a complete program on Redis names
// every limiter it creates. Two services that copied one quick start
// without a name would otherwise share budgets (both "per-minute").
func TestRedisProgramsNameTheirLimiters(t *testing.T) {
	for page, p := range pageBlocks(t) {
		for _, b := range p.blocks {
			if !hasPackageClause(b.code) || !strings.Contains(b.code, "redisstore.") {
				continue
			}
			if n, named := strings.Count(b.code, "slidelog.New("), strings.Count(b.code, "slidelog.WithName("); n > named {
				t.Errorf("%s line %d: a program on Redis creates %d limiters and names %d: give each slidelog.WithName", page, b.line, n, named)
			}
		}
	}
}

// TestSkippedPathsAreServed: every path a complete program skips with
// SkipPaths is a route the program serves (a skip of a path nobody serves
// tells the reader the program has it).
func TestSkippedPathsAreServed(t *testing.T) {
	skip := regexp.MustCompile(`SkipPaths\(([^)]*)\)`)
	for page, p := range pageBlocks(t) {
		for _, b := range p.blocks {
			if !hasPackageClause(b.code) {
				continue
			}
			for _, m := range skip.FindAllStringSubmatch(b.code, -1) {
				for arg := range strings.SplitSeq(m[1], ",") {
					path, err := strconv.Unquote(strings.TrimSpace(arg))
					if err != nil || strings.Contains(path, ".") { // a gRPC method, not a route
						continue
					}
					if strings.Count(b.code, strconv.Quote(path)) < 2 {
						t.Errorf("%s line %d: skips %s, which the program does not serve", page, b.line, path)
					}
				}
			}
		}
	}
}

// TestNamesInProseAreInTheCode: a sentence that says which names the
// block above uses ("here `api` and `search`") names strings of that
// block.
func TestNamesInProseAreInTheCode(t *testing.T) {
	here := regexp.MustCompile("here `([^`]+)` and `([^`]+)`")
	for page, p := range pageBlocks(t) {
		lines := strings.Split(p.text, "\n")
		for i, line := range lines {
			for _, m := range here.FindAllStringSubmatch(line, -1) {
				var above *block
				for j := range p.blocks {
					if p.blocks[j].line <= i+1 {
						above = &p.blocks[j]
					}
				}
				if above == nil {
					t.Errorf("%s line %d: names %s and %s with no Go block above", page, i+1, m[1], m[2])
					continue
				}
				for _, name := range m[1:] {
					if !strings.Contains(above.code, strconv.Quote(name)) {
						t.Errorf("%s line %d: says the block above uses %q; the block (line %d) has no such string", page, i+1, name, above.line)
					}
				}
			}
		}
	}
}

// TestFragmentProseAddresses: an address or network a fragment's header
// names ("from proxies in 10.0.0.0/8") is the one its code uses.
func TestFragmentProseAddresses(t *testing.T) {
	addr := regexp.MustCompile(`\b\d{1,3}(\.\d{1,3}){3}(/\d{1,2})?\b`)
	for page, p := range pageBlocks(t) {
		for _, b := range p.blocks {
			if !strings.HasPrefix(b.code, fragmentMark) {
				continue
			}
			header, _, _ := strings.Cut(b.code, "\n")
			for _, a := range addr.FindAllString(header, -1) {
				if !strings.Contains(b.code[len(header):], a) {
					t.Errorf("%s line %d: the fragment says %s; its code does not use it", page, b.line, a)
				}
			}
		}
	}
}

// TestNoLogSharedByPolicies: logs are keyed by a limiter's name, never by
// its policies; no page or doc comment may say otherwise.
func TestNoLogSharedByPolicies(t *testing.T) {
	wrong := regexp.MustCompile(`(?i)(identical policies|same policies) (do )?share|different policies on one store never share`)
	files := []string{}
	for _, page := range snippetPages(t) {
		files = append(files, filepath.Join(repoRoot, filepath.FromSlash(page)))
	}
	err := filepath.WalkDir(filepath.Join(repoRoot, "core"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.Join(strings.Fields(strings.ReplaceAll(string(b), "//", "")), " ")
		if m := wrong.FindString(text); m != "" {
			t.Errorf("%s: says %q: a limiter's logs are keyed by its name (WithName), not its policies", f, m)
		}
	}
}

// TestFrameworkPagesLinkEveryFramework: README's list of framework pages,
// and the list in each page's introduction, name every framework page.
func TestFrameworkPagesLinkEveryFramework(t *testing.T) {
	pages := []string{"gin.md", "echo.md", "echov5.md", "chi.md", "fiber.md", "grpc.md", "connect.md"}
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for line := range strings.SplitSeq(string(readme), "\n") {
		if strings.HasPrefix(line, "- Framework pages:") {
			found = true
			for _, p := range pages {
				if !strings.Contains(line, "(docs/"+p+")") {
					t.Errorf("README.md: %q does not link docs/%s", line, p)
				}
			}
		}
	}
	if !found {
		t.Error("README.md: no line starts with \"- Framework pages:\"")
	}
	list := regexp.MustCompile(`\(\[gin\]\(gin\.md\)[^)]*(\)[^)(]*\([a-z0-9]+\.md)*\)\)`)
	for _, page := range pages {
		b, err := os.ReadFile(filepath.Join(repoRoot, "docs", page))
		if err != nil {
			t.Fatal(err)
		}
		intro := strings.Join(strings.Split(string(b), "\n")[:8], "\n")
		m := list.FindString(intro)
		if m == "" {
			t.Errorf("docs/%s: the introduction lists no framework pages", page)
			continue
		}
		for _, p := range pages {
			if !strings.Contains(m, "("+p+")") {
				t.Errorf("docs/%s: the introduction's list %s does not link %s", page, m, p)
			}
		}
	}
}

// TestEchoV5StartChecked: echo v5's Start returns nil after a graceful
// shutdown (SIGINT, SIGTERM), so log.Fatal(e.Start(...)) prints <nil> and
// exits 1 on a normal stop.
func TestEchoV5StartChecked(t *testing.T) {
	for _, f := range []string{"docs/echov5.md", "examples/echov5/main.go"} {
		b, err := os.ReadFile(filepath.Join(repoRoot, f))
		if err != nil {
			t.Fatal(err)
		}
		if regexp.MustCompile(`log\.Fatal\(e\.Start\(`).Match(b) {
			t.Errorf("%s: log.Fatal(e.Start(...)) exits 1 after a graceful shutdown; check the error first", f)
		}
	}
}

// TestHeaderKeysCarryTheCaveat: a page that keys by a header tells the
// reader to key only by a value their own proxy or auth set, never one the
// client picks freely.
func TestHeaderKeysCarryTheCaveat(t *testing.T) {
	for page, p := range pageBlocks(t) {
		if !strings.Contains(p.text, "ByHeader(") {
			continue
		}
		if !strings.Contains(p.text, "picks freely") && !strings.Contains(p.text, "unverified header") {
			t.Errorf("%s: keys by a header without saying never to key by a value the client picks freely", page)
		}
		if strings.Contains(p.text, `ByHeader("X-Api-Key")`) {
			t.Errorf("%s: recommends ByHeader(\"X-Api-Key\"), an identity nobody has checked", page)
		}
	}
}

// TestKeysAreNeverEmptyParts: no block passes Allow, AllowN or Peek a key
// built by concatenating a call's result ("acct:"+account(c)), which is
// the bare prefix, one identity for every request without an account,
// when the call returns "".
func TestKeysAreNeverEmptyParts(t *testing.T) {
	for page, p := range pageBlocks(t) {
		for _, b := range p.blocks {
			src := b.code
			if !hasPackageClause(src) {
				src = "package fragment\nfunc _() {\n" + src + "\n}\n"
			}
			f, err := parser.ParseFile(token.NewFileSet(), "block.go", src, 0)
			if err != nil {
				continue // declarations; TestDocSnippets builds them
			}
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || len(call.Args) < 2 {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || (sel.Sel.Name != "Allow" && sel.Sel.Name != "AllowN" && sel.Sel.Name != "Peek") {
					return true
				}
				if bin, ok := call.Args[1].(*ast.BinaryExpr); ok && bin.Op == token.ADD {
					_, l := bin.X.(*ast.CallExpr)
					_, r := bin.Y.(*ast.CallExpr)
					if l || r {
						t.Errorf("%s block at line %d: %s's key joins a call's result, which may be empty: check it first", page, b.line, sel.Sel.Name)
					}
				}
				return true
			})
		}
	}
}

// TestDemoScripts: make demo with an unknown framework fails, naming the
// frameworks; both demo scripts give Redis keys a secret.
func TestDemoScripts(t *testing.T) {
	cmd := exec.CommandContext(t.Context(), "make", "-s", "demo", "FRAMEWORK=typo")
	cmd.Dir = repoRoot
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "unknown framework") || !strings.Contains(string(out), "connect") {
		t.Errorf("make demo FRAMEWORK=typo: got error %v and %q, want a failure naming the frameworks", err, out)
	}
	for _, s := range []string{"scripts/demo.sh", "scripts/demo-rpc.sh"} {
		b, err := os.ReadFile(filepath.Join(repoRoot, s))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "export SLIDELOG_KEY_SECRET=") {
			t.Errorf("%s: runs the example on Redis without a key secret", s)
		}
	}
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(readme)), " ")
	if i := strings.Index(text, "how many decisions Redis made"); i >= 0 && !strings.Contains(text[max(0, i-200):i], "not `grpc` and `connect`") {
		t.Errorf("README.md: says every demo on Redis prints Redis's decisions; the grpc and connect demos do not")
	}
}
