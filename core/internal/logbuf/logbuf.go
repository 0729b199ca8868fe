// Package logbuf holds Buffer, the output of a logger that tests read
// while the code under test writes to it from other goroutines.
package logbuf

import (
	"strings"
	"sync"
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
