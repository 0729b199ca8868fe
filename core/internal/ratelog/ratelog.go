// Package ratelog bounds how often a recurring event is logged: once when
// it first happens, then at most once per interval, with the number of
// events since the previous record, however many there are. It is the
// rule of the log records the "Never silent" rule asks for on a
// request's path: a problem that shows only at run time is said, but
// never once per request.
package ratelog

import (
	"context"
	"log/slog"
	"runtime/debug"
	"sync/atomic"
	"time"
)

// Every says when to log one kind of event (Note), or logs it (Log, and
// LogPanic for a recovered panic). It takes no lock: events on many
// goroutines (every decision of a failing node, every request of a
// misconfigured route) must not queue on one another. The zero Every has
// logged nothing and is ready to use.
type Every struct {
	logged atomic.Int64 // when a record was last logged (Unix ns); 0 never
	events atomic.Int64 // events since
}

// Note counts one event at now and reports whether to log a record of it:
// ok for the first event, and then for the first event at least interval
// after the previous record (for one of them only, when several
// goroutines race). With ok, n is the number of events since the previous
// record, this one included.
func (e *Every) Note(now time.Time, interval time.Duration) (n int64, ok bool) {
	e.events.Add(1)
	t := now.UnixNano()
	logged := e.logged.Load()
	if logged != 0 && t-logged < int64(interval) || !e.logged.CompareAndSwap(logged, t) {
		return 0, false
	}
	return e.events.Swap(0), true
}

// Log counts one event at now and, if Note says to, logs a record of it
// to logger at level, with msg and the attributes that attrs returns
// given n, the number of events since the previous record. attrs is
// called only when a record is logged. Log never panics: an attrs or a
// logger that panics loses the record, not the caller's work.
func (e *Every) Log(now time.Time, interval time.Duration, logger *slog.Logger, level slog.Level, msg string, attrs func(n int64) []slog.Attr) {
	n, ok := e.Note(now, interval)
	if !ok {
		return
	}
	defer func() { _ = recover() }()
	logger.LogAttrs(context.Background(), level, msg, attrs(n)...)
}

// LogPanic is Log at ERROR of p, a panic recovered by the deferred call
// that LogPanic runs in: after the attributes that attrs returns, the
// record has "panic" with p and "stack" with the stack of the goroutine
// that panicked, which LogPanic reads there, while the frames that
// panicked are still on it.
func (e *Every) LogPanic(now time.Time, interval time.Duration, logger *slog.Logger, msg string, p any, attrs func(n int64) []slog.Attr) {
	e.Log(now, interval, logger, slog.LevelError, msg, func(n int64) []slog.Attr {
		return append(attrs(n), slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
	})
}
