package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// quickStart returns the quick start program of a framework page (Markdown):
// the first ```go block that declares func main and imports modPath (the
// adapter's module path). A block without a package clause gets
// "package main" in front, so a page may show the program without it.
func quickStart(page []byte, modPath string) ([]byte, error) {
	for _, block := range goBlocks(string(page)) {
		if !strings.Contains(block, "func main()") || !strings.Contains(block, strconv.Quote(modPath)) {
			continue
		}
		if !hasPackageClause(block) {
			block = "package main\n\n" + block
		}
		return []byte(block), nil
	}
	return nil, fmt.Errorf("no ```go block with func main() importing %q", modPath)
}

// goBlocks returns the contents of the fenced ```go code blocks of a
// Markdown text, in order.
func goBlocks(text string) []string {
	var blocks []string
	var cur []string
	in := false
	for line := range strings.SplitSeq(text, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case !in && strings.HasPrefix(trimmed, "```"):
			if strings.TrimSpace(strings.TrimPrefix(trimmed, "```")) == "go" {
				in, cur = true, nil
			} else {
				in, cur = true, nil
				cur = append(cur, "\x00") // a fence of another language: skip its contents
			}
		case in && trimmed == "```":
			if len(cur) == 0 || cur[0] != "\x00" {
				blocks = append(blocks, strings.Join(cur, "\n")+"\n")
			}
			in = false
		case in:
			cur = append(cur, line)
		}
	}
	return blocks
}

// hasPackageClause reports whether a Go source text has a package clause as
// its first non-comment, non-blank line.
func hasPackageClause(src string) bool {
	for line := range strings.SplitSeq(src, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "//") {
			continue
		}
		return strings.HasPrefix(line, "package ")
	}
	return false
}

// adapterPage finds the docs page of the adapter in directory dir
// (e.g. "adapters/gin"): docs/<name>.md if it exists, else the one page in
// docs/ whose text mentions the adapter's module path in a go get command.
func adapterPage(root, dir, modPath string) (string, error) {
	name := filepath.Base(filepath.FromSlash(dir))
	page := filepath.Join(root, "docs", name+".md")
	if _, err := os.Stat(page); err == nil {
		return page, nil
	}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return "", err
	}
	var found []string
	for _, p := range pages {
		data, err := os.ReadFile(p)
		if err != nil {
			return "", err
		}
		for line := range strings.SplitSeq(string(data), "\n") {
			fields := strings.Fields(line)
			if len(fields) >= 3 && fields[0] == "go" && fields[1] == "get" && strings.Split(fields[2], "@")[0] == modPath {
				found = append(found, p)
				break
			}
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return "", errors.New("no docs page: neither docs/" + name + ".md nor a docs/*.md page with `go get " + modPath + "`")
	default:
		return "", fmt.Errorf("several docs pages say `go get %s`: %v; name one docs/%s.md", modPath, found, name)
	}
}
