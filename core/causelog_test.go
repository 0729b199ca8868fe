package slidelog_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"testing"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/internal/logbuf"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The breaker's opening and the failure mode's records say why the store
// failed, and a failing store logs once per episode, not once per decision.
func TestLogsSayWhy(t *testing.T) {
	tests := []struct {
		give      error
		wantCause string
	}{
		{errDown, "dial"},
		{fmt.Errorf("%w: READONLY You can't write against a read only replica.", slidelog.ErrUnavailable), "readonly"},
		{errors.New("WRONGPASS invalid username-password pair or user is disabled."), "auth"},
		{errors.New("NOAUTH Authentication required."), "auth"},
		{fmt.Errorf("%w: OOM command not allowed when used memory > 'maxmemory'.", slidelog.ErrUnavailable), "oom"},
		{fmt.Errorf("%w: %w", slidelog.ErrUnavailable, slidelog.ErrStalled), "stalled"},
		{errors.New("ERR something else"), "error"},
	}
	for _, tt := range tests {
		t.Run(tt.wantCause, func(t *testing.T) {
			var buf logbuf.Buffer
			store := &fakeStore{take: func(context.Context, slidelog.Request) (slidelog.Result, error) { return slidelog.Result{}, tt.give }}
			l := newResilientLimiter(t, store, slidelog.PerMinute(1000), slidelog.WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
			allowFromFallback(t, l, 100)
			opened := buf.Lines("to=open")
			require.Len(t, opened, 1, "got %d breaker openings logged, want 1:\n%s", len(opened), opened)
			assert.Contains(t, opened[0], "cause="+tt.wantCause)
			assert.Contains(t, opened[0], "error=", "the breaker's record carries the store's error")
			episodes := buf.Lines("failure mode")
			require.Len(t, episodes, 1, "got %d failure-mode records for 100 decisions in one episode, want 1:\n%s", len(episodes), episodes)
			assert.Contains(t, episodes[0], "cause="+tt.wantCause)
			assert.Contains(t, episodes[0], "mode=fallback")
		})
	}
}

// The errors slidelog_errors_total counts as "other" (the SlidelogErrors
// alert says to see the logs for them) are logged with their cause, once
// per episode, not once per call; those of other reasons are not.
func TestLogsSayWhyNoDecision(t *testing.T) {
	var buf logbuf.Buffer
	l := newResilientLimiter(t, newMemoryStore(t), slidelog.PerMinute(10), slidelog.WithName("plans"),
		slidelog.WithLogger(slog.New(slog.NewTextHandler(&buf, nil))),
		slidelog.WithPolicyFunc(func(context.Context, string) ([]slidelog.Policy, error) {
			return nil, errors.New("plan lookup: connection refused")
		}))
	for range 100 {
		_, err := l.Allow(t.Context(), "k")
		require.ErrorIs(t, err, slidelog.ErrPolicyFunc)
		_, err = l.Allow(t.Context(), "")
		require.ErrorIs(t, err, slidelog.ErrInvalidKey)
	}
	lines := buf.Lines("instead of a decision")
	require.Len(t, lines, 1, "got %d records for 100 failed calls, want 1:\n%s", len(lines), lines)
	assert.Contains(t, lines[0], "limiter=plans")
	assert.Contains(t, lines[0], "reason=other")
	assert.Contains(t, lines[0], "plan lookup: connection refused")
}

// recordingStore is a failing store that can record admissions (a
// Recorder that keeps none itself): a limiter's fallback journals what
// it admits for it.
type recordingStore struct{ fakeStore }

func (s *recordingStore) Record(context.Context, slidelog.Request, time.Time) error { return errDown }

// A fallback admission the write-back journal has no room for will never
// be counted by the store: the limiter says so, not once per admission.
func TestLogsSayJournalFull(t *testing.T) {
	var buf logbuf.Buffer
	l := newResilientLimiter(t, &recordingStore{fakeStore: *failingStore()}, slidelog.PerHour(1000), slidelog.WithName("jf"),
		slidelog.WithFallbackMaxKeys(writebackMax+10), slidelog.WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	for i := range writebackMax + 10 {
		res, err := l.Allow(t.Context(), "k"+strconv.Itoa(i))
		require.NoError(t, err)
		require.True(t, res.Allowed)
	}
	lines := buf.Lines("journal full")
	require.Len(t, lines, 1, "got %d records for 10 dropped admissions, want 1:\n%s", len(lines), lines)
	assert.Contains(t, lines[0], "limiter=jf")
	assert.Contains(t, lines[0], "dropped=1")
}

// writebackMax is the write-back journal's bound (writeback.MaxEntries).
const writebackMax = 100_000

// A Redis that is not there: the records say the connection was refused.
func TestLogsSayWhyRedisDown(t *testing.T) {
	var buf logbuf.Buffer
	store := newUnreachableStore(t, redisstore.ClientOptions("127.0.0.1:1")) // nothing listens on port 1
	l := newResilientLimiter(t, store, slidelog.PerMinute(1000), slidelog.WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	allowFromFallback(t, l, 20)
	episodes := buf.Lines("failure mode")
	require.Len(t, episodes, 1, "got %d failure-mode records, want 1:\n%s", len(episodes), episodes)
	assert.Contains(t, episodes[0], "cause=dial")
	assert.Contains(t, episodes[0], "connection refused")
}

// A real Redis that refuses the credentials: the records say auth.
func TestLogsSayWhyWrongPassword(t *testing.T) {
	opts := redisstore.ClientOptions(redistest.RedisClient(t).Options().Addr)
	opts.Username, opts.Password = "slidelog-no-such-user", "wrong" // WRONGPASS from any Redis 6+
	store := newUnreachableStore(t, opts)
	var buf logbuf.Buffer
	l := newResilientLimiter(t, store, slidelog.PerMinute(1000), slidelog.WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	allowFromFallback(t, l, 20)
	episodes := buf.Lines("failure mode")
	require.Len(t, episodes, 1, "got %d failure-mode records, want 1:\n%s", len(episodes), episodes)
	assert.Contains(t, episodes[0], "cause=auth")
	opened := buf.Lines("to=open")
	require.Len(t, opened, 1)
	assert.Contains(t, opened[0], "cause=auth")
}
