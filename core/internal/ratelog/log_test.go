package ratelog_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/slidelog/slidelog/core/internal/logbuf"
	"github.com/slidelog/slidelog/core/internal/ratelog"
)

// textLogger returns a logger writing text records to buf.
func textLogger(buf *logbuf.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, nil))
}

// counted returns the attributes of a record of n events: "in" and
// "events".
func counted(n int64) []slog.Attr {
	return []slog.Attr{slog.String("in", "test"), slog.Int64("events", n)}
}

// Log logs the first event and then the first one at least an interval
// after the previous record, with the number of events since that record.
func TestLog(t *testing.T) {
	var buf logbuf.Buffer
	logger := textLogger(&buf)
	var e ratelog.Every
	t0 := time.Unix(1000, 0)
	for _, tt := range []struct {
		give time.Duration // the event's time, after t0; in order
		want string        // its record, "" for none
	}{
		{0, "events=1"},
		{time.Second, ""},
		{9 * time.Second, ""},
		{10 * time.Second, "events=3"},
		{19 * time.Second, ""},
		{25 * time.Second, "events=2"},
		{time.Hour, "events=1"},
	} {
		before := buf.String()
		e.Log(t0.Add(tt.give), 10*time.Second, logger, slog.LevelWarn, "event", counted)
		got := strings.TrimSpace(strings.TrimPrefix(buf.String(), before))
		if tt.want == "" {
			if got != "" {
				t.Errorf("event at %v: got record %q, want none", tt.give, got)
			}
			continue
		}
		if want := "level=WARN msg=event in=test " + tt.want; !strings.HasSuffix(got, want) {
			t.Errorf("event at %v: got record %q, want one ending %q", tt.give, got, want)
		}
	}
}

// attrs is called only for an event that is logged.
func TestLogCallsAttrsOnlyForARecord(t *testing.T) {
	var e ratelog.Every
	calls := 0
	attrs := func(int64) []slog.Attr { calls++; return nil }
	now := time.Now()
	for range 100 {
		e.Log(now, time.Hour, slog.New(slog.DiscardHandler), slog.LevelInfo, "event", attrs)
	}
	if calls != 1 {
		t.Errorf("attrs called %d times for 100 events and 1 record, want 1", calls)
	}
}

// recoverAndLog runs f, and logs its panic with LogPanic in the deferred
// call that recovers it, as the library's recovering sites do.
func recoverAndLog(e *ratelog.Every, now time.Time, logger *slog.Logger, attrs func(int64) []slog.Attr, f func()) {
	defer func() {
		if p := recover(); p != nil {
			e.LogPanic(now, 10*time.Second, logger, "recovered a panic", p, attrs)
		}
	}()
	f()
}

// panicsHere panics: the stack of a record of its panic names it.
func panicsHere() { panic("boom") }

// A panic's record is at ERROR, with the attributes given, then the
// panic's value, then the stack of the goroutine that panicked: it names
// the function that panicked, although LogPanic runs after the recover.
func TestLogPanicRecordsTheStackThatPanicked(t *testing.T) {
	var buf logbuf.Buffer
	var e ratelog.Every
	recoverAndLog(&e, time.Now(), textLogger(&buf), counted, panicsHere)
	lines := buf.Lines("recovered a panic")
	if len(lines) != 1 {
		t.Fatalf("got %d records, want 1:\n%s", len(lines), buf.String())
	}
	for _, want := range []string{`level=ERROR msg="recovered a panic" in=test events=1 panic=boom stack=`,
		"ratelog_test.panicsHere()", `\npanic({`} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("record lacks %q:\n%s", want, lines[0])
		}
	}
}

// Panics are logged once per interval, with their number.
func TestLogPanicCountsPanics(t *testing.T) {
	var buf logbuf.Buffer
	var e ratelog.Every
	t0 := time.Unix(1000, 0)
	for i := range 20 {
		recoverAndLog(&e, t0.Add(time.Duration(i)*time.Second), textLogger(&buf), counted, panicsHere)
	}
	lines := buf.Lines("recovered a panic")
	if len(lines) != 2 {
		t.Fatalf("got %d records for 20 panics in 20 s, want 2:\n%s", len(lines), buf.String())
	}
	for i, want := range []string{"events=1 ", "events=10 "} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("record %d lacks %q:\n%s", i, want, lines[i])
		}
	}
}

// panickingHandler is a slog.Handler whose Handle panics.
type panickingHandler struct{ slog.Handler }

func (panickingHandler) Enabled(context.Context, slog.Level) bool  { return true }
func (panickingHandler) Handle(context.Context, slog.Record) error { panic("handler boom") }

// LogPanic and Log never panic: a logger, or an attrs, that panics loses
// the record, and the next interval's record is logged.
func TestLogNeverPanics(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, tt := range []struct {
		name   string
		logger *slog.Logger
		attrs  func(int64) []slog.Attr
	}{
		{"panicking handler", slog.New(panickingHandler{}), counted},
		{"nil logger", nil, counted},
		{"panicking attrs", slog.New(slog.DiscardHandler), func(int64) []slog.Attr { panic("attrs boom") }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var e ratelog.Every
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("panicked: %v", p)
				}
			}()
			recoverAndLog(&e, t0, tt.logger, tt.attrs, panicsHere)
			e.Log(t0.Add(10*time.Second), 10*time.Second, tt.logger, slog.LevelWarn, "event", tt.attrs)
			var buf logbuf.Buffer
			e.Log(t0.Add(20*time.Second), 10*time.Second, textLogger(&buf), slog.LevelWarn, "event", counted)
			if !strings.Contains(buf.String(), "events=1") {
				t.Errorf("got %q after the lost records, want a record of 1 event", buf.String())
			}
		})
	}
}
