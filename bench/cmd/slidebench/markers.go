package main

import (
	"fmt"
	"os"
	"strings"
)

// Pages mix generated and hand-written text, told apart by marker lines.
// docs/benchmarks.md is generated but for one hand-written block between
// analysisBegin and analysisEnd, which slidebench report keeps as it is;
// docs/scaling.md is hand-written but for blocks between
// "<!-- NAME:begin ... -->" and "<!-- NAME:end -->", which slidebench
// rewrites. cutBlock finds either.
const (
	analysisBegin = "<!-- analysis: written by hand; slidebench report keeps it -->"
	analysisEnd   = "<!-- /analysis -->"
)

// cutBlock splits doc around the block that starts on the line after the
// first line beginning with begin and ends where end starts: head runs to
// that line's end, body is the block, tail starts with end.
func cutBlock(doc, begin, end string) (head, body, tail string, ok bool) {
	i := strings.Index(doc, begin)
	if i < 0 {
		return "", "", "", false
	}
	j := strings.IndexByte(doc[i:], '\n')
	if j < 0 {
		return "", "", "", false
	}
	j += i + 1
	k := strings.Index(doc[j:], end)
	if k < 0 {
		return "", "", "", false
	}
	return doc[:j], doc[j : j+k], doc[j+k:], true
}

// keptAnalysis returns the hand-written block of doc, "" when doc has no
// such block.
func keptAnalysis(doc string) string {
	_, body, _, _ := cutBlock(doc, analysisBegin, analysisEnd)
	return body
}

// replaceBlock puts body in place of the generated block name of doc.
func replaceBlock(doc, name, body string) (string, error) {
	head, _, tail, ok := cutBlock(doc, "<!-- "+name+":begin", "<!-- "+name+":end -->")
	if !ok {
		return "", fmt.Errorf("no <!-- %s:begin --> ... <!-- %s:end --> markers", name, name)
	}
	return head + "\n" + body + "\n" + tail, nil
}

// rewriteBlocks rewrites the generated blocks of the markdown file path,
// body by name; it fails, writing nothing, when a block is missing.
func rewriteBlocks(path string, bodies []namedBlock) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	doc := string(b)
	for _, nb := range bodies {
		if doc, err = replaceBlock(doc, nb.name, nb.body); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return os.WriteFile(path, []byte(doc), 0o644)
}

type namedBlock struct{ name, body string }
