// Package logbuf holds Buffer, the output of a logger that tests read
// while the code under test writes to it from other goroutines.
package logbuf

import (
	"log"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// Buffer is an io.Writer safe for concurrent use that keeps everything
// written to it. The zero Buffer is empty and ready to use.
type Buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write appends p; it never fails.
func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Count returns how many times substr occurs in what was written so far.
func (l *Buffer) Count(substr string) int { return strings.Count(l.String(), substr) }

// Lines returns the lines written so far that contain substr.
func (l *Buffer) Lines(substr string) []string {
	var out []string
	for line := range strings.SplitSeq(l.String(), "\n") {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return out
}

// CaptureDefault makes slog.Default() write text records to a new Buffer
// until t ends, and returns the Buffer. At t's end it restores the
// default logger and the log package's output and flags: slog.SetDefault
// with another handler points the log package's output at that handler,
// and setting the previous default back does not undo it, so that every
// later record of the process's default logger would go on into this
// Buffer, out of sight.
func CaptureDefault(t testing.TB) *Buffer {
	prev, w, flags := slog.Default(), log.Writer(), log.Flags()
	t.Cleanup(func() {
		slog.SetDefault(prev)
		log.SetOutput(w)
		log.SetFlags(flags)
	})
	b := new(Buffer)
	slog.SetDefault(slog.New(slog.NewTextHandler(b, nil)))
	return b
}
