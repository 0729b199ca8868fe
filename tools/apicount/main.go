// Command apicount counts the exported top-level names of Go packages:
// functions (not methods), types, constants and variables, the way the
// API surface of issue 11 is measured.
//
//	go run ./tools/apicount core core/memstore core/redisstore ...
//
// Each argument is a package directory; test files are skipped.
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: apicount DIR...")
		os.Exit(2)
	}
	fmt.Printf("%-32s %6s %6s %6s %6s %6s\n", "package", "funcs", "types", "consts", "vars", "total")
	for _, dir := range os.Args[1:] {
		var funcs, types, consts, vars int
		fset := token.NewFileSet()
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					if d.Recv == nil && d.Name.IsExported() {
						funcs++
					}
				case *ast.GenDecl:
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							if s.Name.IsExported() {
								types++
							}
						case *ast.ValueSpec:
							for _, n := range s.Names {
								if !n.IsExported() {
									continue
								}
								if d.Tok == token.CONST {
									consts++
								} else {
									vars++
								}
							}
						}
					}
				}
			}
		}
		fmt.Printf("%-32s %6d %6d %6d %6d %6d\n", dir, funcs, types, consts, vars, funcs+types+consts+vars)
	}
}
