package redisstore

import (
	_ "embed"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The scripts. What they share is written once, in lib.lua, and joined
// into each script's text here, at package init, right after the
// script's first line (its #!lua line, which Redis 7 requires first): so
// each script's text, and so the SHA1 it is sent by (EVALSHA, then EVAL
// on NOSCRIPT), is one constant per build. Every input reaches a script
// through KEYS and ARGV only.
var (
	//go:embed lib.lua
	libSource string
	//go:embed script.lua
	scriptFile string
	//go:embed common.lua
	commonFile string
	//go:embed peek.lua
	peekFile string
	//go:embed legacy.lua
	legacySource string
	//go:embed repair.lua
	repairSource string
	//go:embed reset.lua
	resetSource string
)

// The texts the servers run: each file with the functions of lib.lua it
// calls joined in.
var (
	scriptSource = withLib(scriptFile)
	commonSource = withLib(commonFile)
	peekSource   = withLib(peekFile)
)

// libFunc is one function of lib.lua: its name and its paragraph (the
// comment before it and its definition).
type libFunc struct{ name, text string }

// libFuncs are lib.lua's functions in their order. lib.lua is
// paragraphs separated by blank lines; a paragraph that defines a
// function (a line "local function NAME(") is that function's, and one
// that defines none (the file's header, a comment on several functions)
// is not joined in.
var libFuncs = parseLib(libSource)

func parseLib(lib string) []libFunc {
	var fs []libFunc
	for _, para := range strings.Split(lib, "\n\n") {
		for _, line := range strings.Split(para, "\n") {
			if rest, ok := strings.CutPrefix(line, "local function "); ok {
				name, _, _ := strings.Cut(rest, "(")
				fs = append(fs, libFunc{name: name, text: strings.TrimSpace(para) + "\n"})
				break
			}
		}
	}
	return fs
}

// withLib returns the text of a script file with the functions of
// lib.lua it calls, and those they call, joined in after its first line,
// in lib.lua's order. A script run defines every function joined into it,
// about 0.1 µs of Redis CPU each, so a script gets only those it names.
// A name is found as a word in the text but its comment lines (a comment
// at the end of a line of code naming a function joins it in too, which
// costs only its definition).
func withLib(file string) string {
	first, rest, _ := strings.Cut(file, "\n")
	need := make([]bool, len(libFuncs))
	code := codeOf(rest)
	// Later functions only call earlier ones, so one pass from the last
	// finds every function a needed one calls.
	for i := len(libFuncs) - 1; i >= 0; i-- {
		need[i] = namesWord(code, libFuncs[i].name)
		for j := i + 1; j < len(libFuncs) && !need[i]; j++ {
			need[i] = need[j] && namesWord(codeOf(libFuncs[j].text), libFuncs[i].name)
		}
	}
	var b strings.Builder
	b.WriteString(first + "\n")
	for i, f := range libFuncs {
		if need[i] {
			b.WriteString(f.text + "\n")
		}
	}
	b.WriteString(rest)
	return b.String()
}

// codeOf returns text without its comment lines (those that start with
// "--" after blanks), which hold no code.
func codeOf(text string) string {
	lines := strings.Split(text, "\n")
	code := lines[:0]
	for _, l := range lines {
		if !strings.HasPrefix(strings.TrimLeft(l, " \t"), "--") {
			code = append(code, l)
		}
	}
	return strings.Join(code, "\n")
}

// namesWord reports whether text holds name as a word of Lua: not
// within a longer identifier.
func namesWord(text, name string) bool {
	ident := func(c byte) bool {
		return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
	}
	for i := 0; ; {
		k := strings.Index(text[i:], name)
		if k < 0 {
			return false
		}
		at, end := i+k, i+k+len(name)
		if (at == 0 || !ident(text[at-1])) && (end == len(text) || !ident(text[end])) {
			return true
		}
		i = at + 1
	}
}

// withoutFirstLine returns text without its first line (a #!lua line,
// which Redis 6.2 cannot parse).
func withoutFirstLine(text string) string {
	_, rest, _ := strings.Cut(text, "\n")
	return rest
}

// script is the whole decision script; its text never changes per request.
// It declares itself with #!lua, so Redis 7 and later refuse it whole when
// out of memory. legacyScript is the same text with legacy.lua in place of
// that line, for Redis 6.2, which cannot parse it (see Store).
var (
	script       = redis.NewScript(scriptSource)
	legacyScript = redis.NewScript(legacyScriptSource())
	// commonScript is the decision's common path alone (common.lua): a
	// take of cost 1 on exact policies (one or several) of a plain log,
	// with the log as its only key. Where that does not apply it has
	// written nothing and replies {notCommon}, and the store runs script.
	// It needs PEXPIRETIME (Redis 7.0), so a store whose servers run
	// legacyScript never uses it.
	commonScript = redis.NewScript(commonSource)
)

// legacyScriptSource is the script for Redis 6.2: legacy.lua in place of
// its #!lua line. legacy.lua makes a script that starts out of memory fail
// with OOM before any write, as Redis 7 refuses the script with the line.
func legacyScriptSource() string {
	return legacySource + withoutFirstLine(scriptSource)
}

// peekScript reads a key's usage without writing (Store.Peek); it
// declares itself read-only, so Redis runs it even out of memory.
// legacyPeekScript is the same text without that line, for Redis 6.2.
var (
	peekScript       = redis.NewScript(peekSource)
	legacyPeekScript = redis.NewScript(withoutFirstLine(peekSource))
)

// repairScript deletes the keys of a log that hold the wrong type.
var repairScript = redis.NewScript(repairSource)

// resetScript deletes the keys of a log (Store.Reset). It is a script,
// not a DEL, so that a reset goes through the node's pipelines and their
// stall watch like every other call.
var resetScript = redis.NewScript(resetSource)
