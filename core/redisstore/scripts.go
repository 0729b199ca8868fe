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

// The texts the servers run: each file with lib.lua joined in.
var (
	scriptSource = withLib(scriptFile)
	commonSource = withLib(commonFile)
	peekSource   = withLib(peekFile)
)

// withLib returns the text of a script file with lib.lua joined in
// after its first line.
func withLib(file string) string {
	first, rest, _ := strings.Cut(file, "\n")
	return first + "\n" + libSource + rest
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
