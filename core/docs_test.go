package slidelog_test

import (
	"os"
	"strings"
	"testing"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/stretchr/testify/require"
)

// readDoc returns a repository document with its line breaks folded into
// spaces, so that phrases can be found across wrapped lines.
func readDoc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return strings.Join(strings.Fields(string(b)), " ")
}

// The documents state the defaults the code has, and the README's
// guarantee says where it holds.
func TestDocsMatchTheCode(t *testing.T) {
	ops := readDoc(t, "../docs/operations.md")
	readme := readDoc(t, "../README.md")

	// The deny cache is off by default on a memstore.Store: the code ...
	store := newMemoryStore(t)
	l := newResilientLimiter(t, store, slidelog.PerMinute(1))
	for i := range 3 {
		res, err := l.Allow(t.Context(), "k")
		require.NoError(t, err)
		require.Equal(t, memstore.Source, res.Source, "call %d on a memstore.Store without WithDenyCache", i+1)
	}
	// ... and the docs.
	require.NotContains(t, ops, "on by default for `redisstore` and `memstore`")
	require.Contains(t, ops, "It is on by default for `redisstore` and any other store. It is **off by default for `memstore`**")

	// The guarantee holds while Redis decides, and points to the bound of
	// the fallback.
	require.NotContains(t, readme, "**No rolling window ever admits more than its limit**")
	require.Contains(t, readme, "**While Redis decides, no rolling window ever admits more than its limit**")
	require.Contains(t, readme, "(docs/operations.md#bounds-how-far-from-the-limit)")
	require.Contains(t, ops, "## Bounds: how far from the limit")
	require.Contains(t, ops, "N instances all on the fallback")

	// The supported servers.
	require.Contains(t, readme, "Redis 6.2, 7.x and 8.x, and Valkey 7.2 and later")
}
