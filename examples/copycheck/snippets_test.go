package copycheck_test

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Markers of a fragment's first comment lines (see TestDocSnippets).
const (
	fragmentMark = "// Fragment:"
	importsMark  = "// Imports:"
	needsMark    = "// Needs:"
)

// snippetPages returns the pages whose ```go blocks TestDocSnippets
// builds, relative to the repository root: README.md and every docs page.
func snippetPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"README.md"}
	for _, p := range pages {
		rel, err := filepath.Rel(repoRoot, p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, filepath.ToSlash(rel))
	}
	return out
}

// TestDocSnippets builds every ```go block of README.md and docs/*.md,
// each in a package of its own of one new module outside the workspace
// (see buildAll), exactly as the page gives it, and fails naming the page,
// the block's number and its line.
//
// A block whose first line is a package clause is a complete program and
// is built as it stands. Any other block must be a fragment that says what
// it needs, in its first comment lines:
//
//	// Fragment: what it is and where it goes (prose).
//	// Imports: "net/http" "github.com/slidelog/slidelog/core/httplimit"
//	// Needs: l *slidelog.Limiter; ctx context.Context
//
// Imports is the fragment's complete import list (it may be omitted when
// the fragment uses no package) and Needs the names it uses without
// declaring them, as Go declarations (omitted when none). The test builds
// the fragment with exactly those: no import or declaration of its own, so
// an import too many or too few fails as it would for a reader. Needs are
// package-level variables; a fragment that parses as top-level
// declarations is built as such, one of statements as the body of a
// function returning error, followed by "_ = v" for each variable it
// declares and "return nil".
//
// A fragment whose prose says it goes in "the quick start" (and does not
// say it replaces part of it) extends the nearest complete program above
// it on the page: it must not declare any name that program's main
// declares again (a var, or a := with no new name).
//
// No block may declare a call's value while discarding its last result
// ("v, _ := f()"): the error an example throws away is one its reader
// never sees.
func TestDocSnippets(t *testing.T) {
	type job struct {
		name  string
		code  string
		files map[string][]byte
		err   error
	}
	var jobs []*job
	sets := map[string]map[string][]byte{}
	for _, page := range snippetPages(t) {
		text, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(page)))
		if err != nil {
			t.Fatal(err)
		}
		var quickStart []string // names main of the nearest program above declares
		for i, b := range goBlocks(string(text)) {
			if names, ok := mainNames(b.code); ok {
				quickStart = names
			}
			j := &job{name: fmt.Sprintf("%s block %d (line %d)", page, i+1, b.line), code: b.code}
			j.files, j.err = snippetFiles(b.code, quickStart)
			if j.err == nil {
				sets[fmt.Sprintf("b%03d", len(jobs))] = j.files
			}
			jobs = append(jobs, j)
		}
	}
	// One build for every block: a module per block cost a module load
	// and a check of every dependency per block.
	outs, err := buildAll(t, sets)
	if err != nil {
		t.Fatal(err)
	}
	for i, j := range jobs {
		t.Run(strings.NewReplacer("/", "_", " ", "_", "(", "", ")", "").Replace(j.name), func(t *testing.T) {
			if d := discardedErrors(j.code); len(d) > 0 {
				t.Errorf("%s discards an error: %s", j.name, strings.Join(d, "; "))
			}
			if j.err != nil {
				t.Fatalf("%s: %v\n%s", j.name, j.err, numbered([]byte(j.code)))
			}
			if out := outs[fmt.Sprintf("b%03d", i)]; out != "" {
				var src strings.Builder
				for _, f := range slices.Sorted(maps.Keys(j.files)) {
					fmt.Fprintf(&src, "--- %s\n%s", f, numbered(j.files[f]))
				}
				t.Errorf("%s does not build:\n%s\n%s", j.name, out, src.String())
			}
		})
	}
}

// block is one ```go block of a page: its text and the line of its
// opening fence.
type block struct {
	code string
	line int
}

// goBlocks returns the ```go fenced blocks of a Markdown text, in order. A
// fence indented in a list item has its indentation removed from the
// block's lines.
func goBlocks(text string) []block {
	var blocks []block
	var cur []string
	fence, indent, start := "", "", 0
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case fence == "" && strings.HasPrefix(trimmed, "```"):
			fence, start, cur = strings.TrimPrefix(trimmed, "```"), i+1, nil
			indent = line[:len(line)-len(strings.TrimLeft(line, " "))]
			if fence == "" {
				fence = "other"
			}
		case fence != "" && trimmed == "```":
			if fence == "go" {
				blocks = append(blocks, block{strings.Join(cur, "\n") + "\n", start})
			}
			fence = ""
		case fence != "":
			cur = append(cur, strings.TrimPrefix(line, indent))
		}
	}
	return blocks
}

// fragment is what a fragment's header says.
type fragment struct {
	prose   string
	imports []string // import specs: a quoted path, or a name and a quoted path
	needs   string   // Go declarations of the names it needs, one per line
}

// parseHeader reads a fragment's header comment lines.
func parseHeader(code string) (fragment, error) {
	var f fragment
	lines := strings.Split(code, "\n")
	if !strings.HasPrefix(lines[0], fragmentMark) {
		return f, fmt.Errorf("the block is neither a program (first line a package clause) nor a fragment (first line %q)", fragmentMark)
	}
	for _, line := range lines {
		if !strings.HasPrefix(line, "//") {
			break
		}
		switch {
		case strings.HasPrefix(line, fragmentMark):
			f.prose = strings.TrimSpace(strings.TrimPrefix(line, fragmentMark))
		case strings.HasPrefix(line, importsMark):
			specs, err := importSpecs(strings.TrimPrefix(line, importsMark))
			if err != nil {
				return f, err
			}
			f.imports = append(f.imports, specs...)
		case strings.HasPrefix(line, needsMark):
			for d := range strings.SplitSeq(strings.TrimPrefix(line, needsMark), ";") {
				if d = strings.TrimSpace(d); d != "" {
					f.needs += "var " + d + "\n"
				}
			}
		default:
			f.prose += " " + strings.TrimSpace(strings.TrimPrefix(line, "//"))
		}
	}
	return f, nil
}

// importSpecs splits an Imports line into import specs: quoted paths,
// each optionally preceded by a package name.
func importSpecs(s string) ([]string, error) {
	var specs []string
	fields := strings.Fields(s)
	for i := 0; i < len(fields); i++ {
		spec := fields[i]
		if !strings.HasPrefix(spec, `"`) {
			if i+1 == len(fields) || !strings.HasPrefix(fields[i+1], `"`) {
				return nil, fmt.Errorf("Imports: %q is neither a quoted path nor a name before one", spec)
			}
			i++
			spec += " " + fields[i]
		}
		if _, err := strconv.Unquote(strings.TrimSpace(spec[strings.LastIndex(spec, " ")+1:])); err != nil {
			return nil, fmt.Errorf("Imports: %s: %v", spec, err)
		}
		specs = append(specs, spec)
	}
	return specs, nil
}

// snippetFiles returns the files of the module that builds one block;
// quickStart holds the names main of the nearest program above declares.
func snippetFiles(code string, quickStart []string) (map[string][]byte, error) {
	if hasPackageClause(code) {
		return map[string][]byte{"main.go": []byte(code)}, nil
	}
	frag, err := parseHeader(code)
	if err != nil {
		return nil, err
	}
	var imports strings.Builder
	if len(frag.imports) > 0 {
		imports.WriteString("import (\n")
		for _, spec := range frag.imports {
			imports.WriteString("\t" + spec + "\n")
		}
		imports.WriteString(")\n\n")
	}
	header := "package fragment\n\n" + imports.String() + frag.needs + "\n"
	if _, err := parser.ParseFile(token.NewFileSet(), "needs.go", "package fragment\n"+frag.needs, 0); err != nil {
		return nil, fmt.Errorf("Needs: %v", err)
	}

	fset := token.NewFileSet()
	if _, err := parser.ParseFile(fset, "fragment.go", header+code, 0); err == nil {
		return map[string][]byte{"fragment.go": []byte(header + code)}, nil
	}
	f, serr := parser.ParseFile(fset, "fragment.go", "package fragment\nfunc _() error {\n"+code+"\nreturn nil\n}\n", 0)
	if serr != nil {
		return nil, fmt.Errorf("parses neither as declarations nor as statements (%v)", serr)
	}
	stmts := f.Decls[0].(*ast.FuncDecl).Body.List
	declared := declaredNames(stmts)
	if strings.Contains(frag.prose, "quick start") && !strings.Contains(frag.prose, "replac") {
		if quickStart == nil {
			return nil, fmt.Errorf("extends the quick start, but the page has no complete program with func main")
		}
		if n := redeclared(stmts, quickStart); n != "" {
			return nil, fmt.Errorf("redeclares %s of the quick start: add to it, or say what the fragment replaces", n)
		}
	}
	var uses strings.Builder
	for _, name := range declared {
		fmt.Fprintf(&uses, "\t_ = %s\n", name)
	}
	body := "func fragment() error {\n" + code + uses.String() + "\treturn nil\n}\n"
	return map[string][]byte{"fragment.go": []byte(header + body)}, nil
}

// redeclared returns a name of taken that stmts declare again where Go
// would refuse it after taken's declarations: a var declaration, or a :=
// that declares no new variable; "" when none.
func redeclared(stmts []ast.Stmt, taken []string) string {
	for _, s := range stmts {
		switch s := s.(type) {
		case *ast.AssignStmt:
			if s.Tok != token.DEFINE {
				continue
			}
			var old string
			fresh := false
			for _, e := range s.Lhs {
				if id, ok := e.(*ast.Ident); ok && id.Name != "_" {
					if slices.Contains(taken, id.Name) {
						old = id.Name
					} else {
						fresh = true
					}
				}
			}
			if old != "" && !fresh {
				return old
			}
		case *ast.DeclStmt:
			if g, ok := s.Decl.(*ast.GenDecl); ok && g.Tok == token.VAR {
				for _, spec := range g.Specs {
					for _, id := range spec.(*ast.ValueSpec).Names {
						if slices.Contains(taken, id.Name) {
							return id.Name
						}
					}
				}
			}
		}
	}
	return ""
}

// mainNames returns the names main of a complete program declares at the
// top level of its body, and whether code is such a program.
func mainNames(code string) ([]string, bool) {
	if !hasPackageClause(code) {
		return nil, false
	}
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", code, 0)
	if err != nil {
		return nil, false
	}
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == "main" && fd.Recv == nil && fd.Body != nil {
			return append(declaredNames(fd.Body.List), "main"), true
		}
	}
	return nil, false
}

// hasPackageClause reports whether the first line of code that is not
// blank or a comment is a package clause.
func hasPackageClause(code string) bool {
	for line := range strings.SplitSeq(code, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "//") {
			continue
		}
		return strings.HasPrefix(line, "package ")
	}
	return false
}

// discardedErrors returns the multi-value short variable declarations of
// code whose last left-hand side is the blank identifier and whose
// right-hand side is a call ("api, _ := slidelog.New(...)"): they keep a
// value and throw away the call's error (or, as in "got, _ :=
// rl.Remaining()", a flag the example should check).
func discardedErrors(code string) []string {
	src := code
	if !hasPackageClause(code) {
		src = "package fragment\nfunc _() {\n" + code + "\n}\n"
	}
	f, err := parser.ParseFile(token.NewFileSet(), "block.go", src, 0)
	if err != nil {
		// Declarations: parse them as they are.
		if f, err = parser.ParseFile(token.NewFileSet(), "block.go", "package fragment\n"+code, 0); err != nil {
			return nil // the build reports it
		}
	}
	var found []string
	ast.Inspect(f, func(n ast.Node) bool {
		a, ok := n.(*ast.AssignStmt)
		if !ok || a.Tok != token.DEFINE || len(a.Lhs) < 2 || len(a.Rhs) != 1 {
			return true
		}
		if id, ok := a.Lhs[len(a.Lhs)-1].(*ast.Ident); ok && id.Name == "_" {
			if _, call := a.Rhs[0].(*ast.CallExpr); call {
				var b bytes.Buffer
				for i, l := range a.Lhs {
					if i > 0 {
						b.WriteString(", ")
					}
					if id, ok := l.(*ast.Ident); ok {
						b.WriteString(id.Name)
					}
				}
				found = append(found, b.String()+" "+a.Tok.String()+" ...")
			}
		}
		return true
	})
	return found
}

// declaredNames returns the variables the statements declare at their
// top level (with := or var), in order, without "_".
func declaredNames(stmts []ast.Stmt) []string {
	var names []string
	add := func(id *ast.Ident) {
		if id.Name != "_" && !slices.Contains(names, id.Name) {
			names = append(names, id.Name)
		}
	}
	for _, s := range stmts {
		switch s := s.(type) {
		case *ast.AssignStmt:
			if s.Tok == token.DEFINE {
				for _, e := range s.Lhs {
					if id, ok := e.(*ast.Ident); ok {
						add(id)
					}
				}
			}
		case *ast.DeclStmt:
			if g, ok := s.Decl.(*ast.GenDecl); ok && g.Tok == token.VAR {
				for _, spec := range g.Specs {
					for _, id := range spec.(*ast.ValueSpec).Names {
						add(id)
					}
				}
			}
		}
	}
	return names
}
