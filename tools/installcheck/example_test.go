package main

import "fmt"

// The quick start of a framework page is the first ```go block that
// declares func main and imports the adapter; a missing package clause is
// added.
func Example_quickStart() {
	page := "## Quick start\n\n```go\nimport slidechi \"github.com/slidelog/slidelog/adapters/chi\"\n\nfunc main() { _ = slidechi.Middleware }\n```\n"
	program, err := quickStart([]byte(page), "github.com/slidelog/slidelog/adapters/chi")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(string(program))
	// Output:
	// package main
	//
	// import slidechi "github.com/slidelog/slidelog/adapters/chi"
	//
	// func main() { _ = slidechi.Middleware }
}
