package logbuf

import (
	"log"
	"log/slog"
	"testing"
)

// After the test that captured it ends, the default logger writes where
// it wrote before, and nothing more reaches the capture's Buffer.
func TestCaptureDefaultRestores(t *testing.T) {
	w, flags := log.Writer(), log.Flags()
	var b *Buffer
	t.Run("capture", func(t *testing.T) {
		b = CaptureDefault(t)
		slog.Info("captured")
		if b.Count("captured") != 1 {
			t.Fatalf("the record did not reach the buffer: %q", b.String())
		}
	})
	if log.Writer() != w || log.Flags() != flags {
		t.Errorf("the log package writes to %v with flags %d, want %v and %d", log.Writer(), log.Flags(), w, flags)
	}
	slog.Info("after the capture")
	if b.Count("after the capture") != 0 {
		t.Errorf("a record of the default logger went on into the ended test's buffer: %q", b.String())
	}
}
