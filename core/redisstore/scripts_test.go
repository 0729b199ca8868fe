package redisstore_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
)

// Each script the store sends is its file with the functions of lib.lua
// it calls (and those they call) joined in after the first line (the
// Redis 6.2 variants: without that line), each function's paragraph of
// lib.lua as it is, in lib.lua's order, and no other: a script run
// defines every function joined in. The same text every time, sent by the
// SHA1 of that text. No script file defines again what lib.lua defines.
// libParagraphs returns lib.lua's paragraphs (separated by blank lines)
// by the function each defines, and fails t when one defines two.
func libParagraphs(t *testing.T, lib string) map[string]string {
	t.Helper()
	def := regexp.MustCompile(`(?m)^local function (\w+)\(`)
	paras := map[string]string{}
	for _, p := range strings.Split(lib, "\n\n") {
		ms := def.FindAllStringSubmatch(p, -1)
		require.LessOrEqual(t, len(ms), 1, "a paragraph of lib.lua defines %d functions; the join takes one per paragraph", len(ms))
		if len(ms) == 1 {
			paras[ms[0][1]] = strings.TrimSpace(p)
		}
	}
	return paras
}

// With SLIDELOG_SCRIPT_DUMP set to a directory, it also writes each
// script's text there as <name>.lua, the text the store sends
// (scripts/script-cost.sh measures common.lua's that way).
func TestScriptTexts(t *testing.T) {
	lib, scripts := redisstore.Scripts()
	if dir := os.Getenv("SLIDELOG_SCRIPT_DUMP"); dir != "" {
		for _, sc := range scripts {
			require.NoError(t, os.WriteFile(filepath.Join(dir, sc.Name+".lua"), []byte(sc.Text), 0o644))
		}
	}
	libNames := regexp.MustCompile(`(?m)^local function (\w+)`).FindAllStringSubmatch(lib, -1)
	require.NotEmpty(t, libNames)
	for _, sc := range scripts {
		t.Run(sc.Name, func(t *testing.T) {
			sum := sha1.Sum([]byte(sc.Text))
			assert.Equal(t, hex.EncodeToString(sum[:]), sc.Script.Hash(), "got the SHA1 the store sends, want the SHA1 of the text")
			_, again := redisstore.Scripts()
			for _, o := range again {
				if o.Name == sc.Name {
					assert.Equal(t, sc.Text, o.Text, "the text changed between two reads")
				}
			}
			if sc.Name == "repair" || sc.Name == "reset" {
				return // repair.lua and reset.lua need nothing of the library
			}
			first, body, _ := strings.Cut(sc.File, "\n")
			assert.True(t, strings.HasSuffix(sc.Text, body), "want the file after its first line last")
			if strings.HasPrefix(sc.Name, "legacy") {
				assert.False(t, strings.HasPrefix(sc.Text, "#!"), "a Redis 6.2 variant starts with a #! line, which 6.2 cannot parse")
			} else {
				assert.True(t, strings.HasPrefix(sc.Text, first+"\n"), "want the file's first line first")
				assert.True(t, strings.HasPrefix(first, "#!lua"), "got first line %q, want #!lua", first)
			}
			// The functions the body names, then those they name, to the end.
			paras := libParagraphs(t, lib)
			comment := regexp.MustCompile(`(?m)^[ \t]*--.*$`)
			need := map[string]bool{}
			for changed := true; changed; {
				changed = false
				for _, m := range libNames {
					name := m[1]
					if need[name] {
						continue
					}
					word := regexp.MustCompile(`\b` + name + `\b`)
					used := word.MatchString(comment.ReplaceAllString(body, ""))
					for other := range need {
						used = used || word.MatchString(comment.ReplaceAllString(paras[other], ""))
					}
					if used {
						need[name], changed = true, true
					}
				}
			}
			last := -1
			for _, m := range libNames {
				name := m[1]
				defs := regexp.MustCompile(`(?m)^local function `+name+`\(`).FindAllStringIndex(sc.Text, -1)
				if !need[name] {
					assert.Empty(t, defs, "%s is joined in, but the script does not call it", name)
					continue
				}
				if assert.Len(t, defs, 1, "%s: want it joined in once", name) {
					at := strings.Index(sc.Text, paras[name])
					assert.GreaterOrEqual(t, at, 0, "%s: want its paragraph of lib.lua as it is", name)
					assert.Greater(t, at, last, "%s: want lib.lua's order", name)
					assert.Less(t, at, len(sc.Text)-len(body), "%s: want it before the file's body", name)
					last = at
				}
			}
			for _, m := range libNames {
				redefined := regexp.MustCompile(`local (function )?` + m[1] + `\b\s*[(=]`)
				assert.False(t, redefined.MatchString(body), "the file defines %s, which lib.lua has", m[1])
			}
		})
	}
}

// After SCRIPT FLUSH, every script the store sends is found missing
// (NOSCRIPT) and sent again whole (EVAL), on the standalone server and on
// the Cluster, for the script variants of Redis 7 and of Redis 6.2; the
// server then holds each under the SHA1 the store sends it by, so the
// next calls run by EVALSHA again.
func TestScriptsAfterFlush(t *testing.T) {
	_, scripts := redisstore.Scripts()
	hash := map[string]string{}
	for _, sc := range scripts {
		hash[sc.Name] = sc.Script.Hash()
	}
	one := []slidelog.Policy{{Name: "m", Limit: 100, Window: time.Minute}}
	three := []slidelog.Policy{
		{Name: "s", Limit: 100, Window: time.Second},
		{Name: "m", Limit: 100, Window: time.Minute},
		{Name: "h", Limit: 1000, Window: time.Hour},
	}
	for name, client := range map[string]redis.UniversalClient{
		"Standalone": redistest.RedisClient(t),
		"Cluster":    redistest.ClusterClient(t),
	} {
		for _, legacy := range []bool{false, true} {
			t.Run(name+"/legacy="+map[bool]string{false: "false", true: "true"}[legacy], func(t *testing.T) {
				store := newRedisStore(t, client)
				if legacy {
					redisstore.UseLegacyScript(store)
				}
				ctx := t.Context()
				sent := []string{"script", "common", "peek"}
				if redisstore.UsesLegacyScript(store) {
					sent = []string{"legacy", "legacyPeek"}
				}
				node := nodeOf(t, client, store.LogKey("flush", "k"))
				for round := range 3 {
					flushScripts(t, client)
					for _, req := range []slidelog.Request{
						{Key: "k", Cost: 1, Policies: one},   // the common path, one policy
						{Key: "k", Cost: 1, Policies: three}, // the common path, three policies
						{Key: "k", Cost: 2, Policies: three}, // the whole script
					} {
						req.Namespace, req.ID = "flush", rand.Uint64()
						res, err := store.Take(ctx, req)
						require.NoError(t, err, "round %d, cost %d, %d policies", round, req.Cost, len(req.Policies))
						require.True(t, res.Allowed, "round %d, cost %d, %d policies", round, req.Cost, len(req.Policies))
					}
					_, err := store.Peek(ctx, slidelog.Request{Namespace: "flush", Key: "k", Cost: 1, Policies: three})
					require.NoError(t, err, "round %d: peek", round)
					if round == 2 {
						// A reset after a flush: its script is loaded as
						// well, and the log is gone.
						require.NoError(t, store.Reset(ctx, slidelog.Request{Namespace: "flush", Key: "k"}), "reset")
						n, err := client.Exists(ctx, store.LogKey("flush", "k")).Result()
						require.NoError(t, err)
						assert.Zero(t, n, "the log after a reset")
						sent = append(sent, "reset")
					}
					for _, s := range sent {
						exists, err := node.ScriptExists(ctx, hash[s]).Result()
						require.NoError(t, err)
						assert.Equal(t, []bool{true}, exists, "round %d: got %s loaded %v under the SHA1 the store sends", round, s, exists)
					}
				}
			})
		}
	}
}

// nodeOf is a client of the master holding key.
func nodeOf(t *testing.T, client redis.UniversalClient, key string) redis.UniversalClient {
	t.Helper()
	cc, ok := client.(*redis.ClusterClient)
	if !ok {
		return client
	}
	node, err := cc.MasterForKey(t.Context(), key)
	require.NoError(t, err)
	return node
}

// flushScripts runs SCRIPT FLUSH on every node of client.
func flushScripts(t *testing.T, client redis.UniversalClient) {
	t.Helper()
	var err error
	if cc, ok := client.(*redis.ClusterClient); ok {
		err = cc.ForEachShard(t.Context(), func(ctx context.Context, node *redis.Client) error {
			return node.ScriptFlush(ctx).Err()
		})
	} else {
		err = client.ScriptFlush(t.Context()).Err()
	}
	require.NoError(t, err, "SCRIPT FLUSH")
}
