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

// snippetPages are the pages whose ```go blocks TestDocSnippets builds,
// relative to the repository root, with the context their fragments
// assume (see TestDocSnippets).
var snippetPages = map[string]snippetContext{
	"README.md": {
		imports: map[string]string{"chi": "github.com/go-chi/chi/v5"},
		decls: `var (
	ctx      context.Context
	clientID string
	secret   []byte
)`,
	},
	"docs/chi.md": {
		imports: map[string]string{"chi": "github.com/go-chi/chi/v5"},
		decls: `var (
	l                                       *slidelog.Limiter
	r                                       *chi.Mux
	searchHandler, userHandler, teamHandler http.HandlerFunc
	auth                                    func(http.Handler) http.Handler
)`,
	},
	"docs/gin.md": {
		imports: map[string]string{"gin": "github.com/gin-gonic/gin"},
		decls: `var (
	l                                             *slidelog.Limiter
	r                                             *gin.Engine
	searchHandler, userHandler, teamHandler, auth gin.HandlerFunc
)`,
	},
	"docs/echo.md": {
		imports: map[string]string{"echo": "github.com/labstack/echo/v4"},
		decls: `var (
	l                                       *slidelog.Limiter
	e                                       *echo.Echo
	searchHandler, userHandler, teamHandler echo.HandlerFunc
	auth                                    echo.MiddlewareFunc
)`,
	},
	"docs/echov5.md": {
		imports: map[string]string{"echo": "github.com/labstack/echo/v5"},
		decls: `var (
	l                                       *slidelog.Limiter
	e                                       *echo.Echo
	searchHandler, userHandler, teamHandler echo.HandlerFunc
	auth                                    echo.MiddlewareFunc
)`,
	},
	"docs/fiber.md": {
		imports: map[string]string{"fiber": "github.com/gofiber/fiber/v2"},
		decls: `var (
	l                                             *slidelog.Limiter
	app                                           *fiber.App
	searchHandler, userHandler, teamHandler, auth fiber.Handler
)`,
	},
	"docs/grpc.md": {
		decls: `var (
	l      *slidelog.Limiter
	ctx    context.Context
	client healthpb.HealthClient
	req    *healthpb.HealthCheckRequest
)`,
	},
}

// snippetContext is what the fragments of one page may use without
// declaring it: package-level declarations (decls) and, besides
// commonImports, the page's own import paths by package name.
type snippetContext struct {
	imports map[string]string
	decls   string
}

// commonImports are the packages a fragment may use by name without
// importing them, on every page.
var commonImports = map[string]string{
	"context":     "context",
	"errors":      "errors",
	"fmt":         "fmt",
	"log":         "log",
	"net":         "net",
	"os":          "os",
	"http":        "net/http",
	"slog":        "log/slog",
	"time":        "time",
	"prometheus":  "github.com/prometheus/client_golang/prometheus",
	"promhttp":    "github.com/prometheus/client_golang/prometheus/promhttp",
	"redis":       "github.com/redis/go-redis/v9",
	"slidelog":    "github.com/slidelog/slidelog/core",
	"httplimit":   "github.com/slidelog/slidelog/core/httplimit",
	"memstore":    "github.com/slidelog/slidelog/core/memstore",
	"redisstore":  "github.com/slidelog/slidelog/core/redisstore",
	"prommetrics": "github.com/slidelog/slidelog/core/prommetrics",
	"readiness":   "github.com/slidelog/slidelog/core/readiness",
	"slidechi":    "github.com/slidelog/slidelog/adapters/chi",
	"slidegin":    "github.com/slidelog/slidelog/adapters/gin",
	"slideecho":   "github.com/slidelog/slidelog/adapters/echo",
	"slideechov5": "github.com/slidelog/slidelog/adapters/echov5",
	"slidefiber":  "github.com/slidelog/slidelog/adapters/fiber",
	"slidegrpc":   "github.com/slidelog/slidelog/adapters/grpc",
	"adaptor":     "github.com/gofiber/fiber/v2/middleware/adaptor",
	"grpc":        "google.golang.org/grpc",
	"codes":       "google.golang.org/grpc/codes",
	"metadata":    "google.golang.org/grpc/metadata",
	"status":      "google.golang.org/grpc/status",
	"healthpb":    "google.golang.org/grpc/health/grpc_health_v1",
	"errdetails":  "google.golang.org/genproto/googleapis/rpc/errdetails",
	"ratelimit":   "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/ratelimit",
}

// fragmentMark starts the first line of a ```go block that is not a
// complete program.
const fragmentMark = "// Fragment:"

// TestDocSnippets builds every ```go block of the README and the framework
// pages, each in a new module of its own (see build), and fails naming the
// page, the block's number and its line.
//
// A block whose first line is a package clause is a complete program and
// is built as it stands. A block whose first line starts with
// "// Fragment:" is compiled too, wrapped: declarations (a block that
// parses as top-level declarations) go into a file of package fragment;
// statements go into the body of a function returning error, followed by
// "_ = v" for each variable they declare (code after the fragment would use
// them) and "return nil". The wrapper imports, from commonImports and the
// page's own table, the packages whose names the fragment uses, and a
// second file declares the names the page's fragments assume (the limiter
// l, the router, handlers, auth middleware; see snippetPages). Any other
// block fails: mark it as a program or a fragment.
func TestDocSnippets(t *testing.T) {
	for page, pc := range snippetPages {
		text, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(page)))
		if err != nil {
			t.Fatal(err)
		}
		blocks := goBlocks(string(text))
		if len(blocks) == 0 {
			t.Errorf("%s has no ```go block", page)
		}
		for i, b := range blocks {
			name := fmt.Sprintf("%s block %d (line %d)", page, i+1, b.line)
			t.Run(strings.ReplaceAll(fmt.Sprintf("%s/%d", page, i+1), "/", "_"), func(t *testing.T) {
				t.Parallel()
				files, err := snippetFiles(b.code, pc)
				if err != nil {
					t.Fatalf("%s: %v\n%s", name, err, numbered([]byte(b.code)))
				}
				if out, err := build(t, files); err != nil {
					var src strings.Builder
					for _, f := range slices.Sorted(maps.Keys(files)) {
						fmt.Fprintf(&src, "--- %s\n%s", f, numbered(files[f]))
					}
					t.Errorf("%s does not build: %v\n%s\n%s", name, err, out, src.String())
				}
			})
		}
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

// snippetFiles returns the files of the module that builds one block.
func snippetFiles(code string, pc snippetContext) (map[string][]byte, error) {
	first, _, _ := strings.Cut(code, "\n")
	switch {
	case strings.HasPrefix(first, "package "):
		return map[string][]byte{"main.go": []byte(code)}, nil
	case !strings.HasPrefix(first, fragmentMark):
		return nil, fmt.Errorf("the block is neither a program (first line a package clause) nor marked %q", fragmentMark)
	}

	fset := token.NewFileSet()
	var body string
	var unresolved []*ast.Ident
	if f, err := parser.ParseFile(fset, "fragment.go", "package fragment\n"+code, 0); err == nil {
		body, unresolved = code, freeNames(f)
	} else {
		f, serr := parser.ParseFile(fset, "fragment.go", "package fragment\nfunc _() error {\n"+code+"\nreturn nil\n}\n", 0)
		if serr != nil {
			return nil, fmt.Errorf("parses neither as declarations (%v) nor as statements (%v)", err, serr)
		}
		var uses strings.Builder
		for _, name := range declaredNames(f.Decls[0].(*ast.FuncDecl).Body.List) {
			fmt.Fprintf(&uses, "\t_ = %s\n", name)
		}
		body = "func fragment() error {\n" + code + uses.String() + "\treturn nil\n}\n"
		unresolved = freeNames(f)
	}
	ctxFile, err := parser.ParseFile(token.NewFileSet(), "context.go", "package fragment\n"+pc.decls, 0)
	if err != nil {
		return nil, fmt.Errorf("page context: %v", err)
	}
	return map[string][]byte{
		"fragment.go": importBlock("package fragment\n\n", pc.importsFor(unresolved), body),
		"context.go":  importBlock("package fragment\n\n", pc.importsFor(freeNames(ctxFile)), pc.decls+"\n"),
	}, nil
}

// importsFor returns the import paths, by package name, of the names in
// ids that are packages of the page's table or commonImports.
func (pc snippetContext) importsFor(ids []*ast.Ident) map[string]string {
	imports := map[string]string{}
	for _, id := range ids {
		if path, ok := pc.imports[id.Name]; ok {
			imports[id.Name] = path
		} else if path, ok := commonImports[id.Name]; ok {
			imports[id.Name] = path
		}
	}
	return imports
}

// importBlock returns header, an import declaration of imports (name to
// path) and body.
func importBlock(header string, imports map[string]string, body string) []byte {
	var b bytes.Buffer
	b.WriteString(header)
	if len(imports) > 0 {
		b.WriteString("import (\n")
		for _, name := range slices.Sorted(maps.Keys(imports)) {
			fmt.Fprintf(&b, "\t%s %s\n", name, strconv.Quote(imports[name]))
		}
		b.WriteString(")\n\n")
	}
	b.WriteString(body)
	return b.Bytes()
}

// freeNames returns the identifiers a file (parsed with object
// resolution) uses without declaring them: package names, the page
// context's names and predeclared ones.
func freeNames(f *ast.File) []*ast.Ident {
	return f.Unresolved
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
