package memlog

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/slidelog/slidelog/core/internal/window"
)

// TestLogLayout keeps a log in a 448-byte block, seven cache lines, with
// the fields of a lookup in its first 128 bytes and the window's fields
// of an exact decision within its first 256: the layout that log's
// comment describes.
func TestLogLayout(t *testing.T) {
	var l log
	require.Greater(t, unsafe.Sizeof(l), uintptr(416), "a log of 416 bytes or fewer takes a smaller block, not a whole number of lines")
	require.LessOrEqual(t, unsafe.Sizeof(l), uintptr(448), "a log of more than 448 bytes takes a block that is not a whole number of lines")
	require.LessOrEqual(t, unsafe.Offsetof(l.kbuf)+unsafe.Sizeof(l.kbuf), uintptr(128))
	require.LessOrEqual(t, unsafe.Offsetof(l.w)+window.ExactDecisionBytes, uintptr(256))
}

// TestLogIs checks a log's identity test on each of its ways: the very
// string it was made with, an equal string elsewhere (short, compared with
// the log's copy of its bytes, and long), and strings that differ in the
// key, in a byte past the copy, in length, or in the namespace.
func TestLogIs(t *testing.T) {
	long := strings.Repeat("k", 39) + "-long"
	for _, k := range []string{"2001:db8::1", long} {
		l := newLog(logKey{"ns", k}, 1)
		require.True(t, l.is(&logKey{"ns", k}))
		require.True(t, l.is(&logKey{"ns", strings.Clone(k)}))
		require.False(t, l.is(&logKey{"other", strings.Clone(k)}))
		require.False(t, l.is(&logKey{"ns", k[:len(k)-1]}))
		require.False(t, l.is(&logKey{"ns", k[:len(k)-1] + "x"}))
	}
	require.False(t, newLog(logKey{"ns", long}, 1).is(&logKey{"ns", strings.Repeat("k", 39) + "-LONG"}), "a difference past kbuf")
}
