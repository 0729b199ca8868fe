package slidelog_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/internal/logbuf"
	"github.com/slidelog/slidelog/core/memstore"
)

// panickingObserver is a LimiterObserver whose BreakerState panics for
// the states in panicOn, and whose Unbind panics when unbindPanics is
// set; it is its own Observer.
type panickingObserver struct {
	panicOn      map[slidelog.BreakerState]bool
	unbindPanics bool
	panics       atomic.Int64
}

func (o *panickingObserver) Bind(string, func() slidelog.Gauges) (slidelog.LimiterObserver, error) {
	return o, nil
}
func (o *panickingObserver) Decision(slidelog.Source, bool)        {}
func (o *panickingObserver) StoreCall(string, time.Duration)       {}
func (o *panickingObserver) Failover(string, slidelog.FailureMode) {}
func (o *panickingObserver) Error(string)                          {}
func (o *panickingObserver) BreakerState(_ string, st slidelog.BreakerState) {
	if o.panicOn[st] {
		o.panics.Add(1)
		panic("observer boom: " + st.String())
	}
}
func (o *panickingObserver) Unbind() {
	if o.unbindPanics {
		panic("unbind boom")
	}
}

// countEvents returns how many of o's events are e.
func (o *recordingObserver) countEvents(e string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, got := range o.events {
		if got == e {
			n++
		}
	}
	return n
}

// requirePanicRecord checks that buf holds exactly one record of a
// recovered panic, at ERROR, with the limiter's name, where it was
// recovered, the panic's value and a stack naming wantFunc.
func requirePanicRecord(t *testing.T, buf *logbuf.Buffer, limiter, in, value, wantFunc string) {
	t.Helper()
	lines := buf.Lines("recovered a panic")
	require.Len(t, lines, 1, "got %d records of recovered panics, want 1 (at most one per interval):\n%s", len(lines), buf.String())
	for _, want := range []string{"level=ERROR", "limiter=" + limiter, "in=" + in, value, "stack=", wantFunc} {
		assert.Contains(t, lines[0], want, "the record of a recovered panic")
	}
}

// A panic in an observer's BreakerState is recovered and logged wherever
// the breaker changes: on the limiter's own timer, which moves an open
// breaker to half-open when its open timeout passes (a panic there, not
// recovered, ended the process), and in the request that opens it. The
// other observers are told all the same, the breaker's record is logged,
// and the timer is armed again each time the breaker opens.
func TestObserverPanicInBreakerStateIsRecovered(t *testing.T) {
	for _, tt := range []struct {
		name    string
		panicOn map[slidelog.BreakerState]bool
	}{
		{"timer", map[slidelog.BreakerState]bool{slidelog.BreakerHalfOpen: true}},
		{"every change", map[slidelog.BreakerState]bool{slidelog.BreakerOpen: true, slidelog.BreakerHalfOpen: true, slidelog.BreakerClosed: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var buf logbuf.Buffer
			bad, good := &panickingObserver{panicOn: tt.panicOn}, &recordingObserver{}
			l := newResilientLimiter(t, failingStore(), slidelog.PerMinute(100), slidelog.WithName("timer"),
				slidelog.WithObserver(bad), slidelog.WithObserver(good),
				slidelog.WithLogger(slog.New(slog.NewTextHandler(&buf, nil))),
				slidelog.WithBreaker(slidelog.BreakerSettings{ConsecutiveFailures: 1, OpenTimeout: 100 * time.Millisecond}))
			for round := 1; round <= 3; round++ {
				// A decision opens the breaker (the first), or fails the
				// half-open breaker's probe, which opens it again.
				res, err := l.Allow(t.Context(), "k")
				require.NoError(t, err)
				require.Equal(t, slidelog.SourceFallback, res.Source)
				require.Equal(t, map[string]string{"store": "open"}, slidelog.BreakerStates(l), "round %d", round)
				// The change is logged after the observers are told.
				require.Eventually(t, func() bool {
					return good.countEvents("breaker store half-open") == round && len(buf.Lines("to=half-open")) == round
				}, 2*time.Second, 5*time.Millisecond, "round %d: the open timer did not report half-open to the other observer, or log it:\n%s", round, &buf)
			}
			assert.Equal(t, 3, good.countEvents("breaker store open"))
			require.GreaterOrEqual(t, bad.panics.Load(), int64(3))
			requirePanicRecord(t, &buf, "timer", "observer", "panic=\"observer boom: ", "(*panickingObserver).BreakerState")
		})
	}
}

// recorderStore is a remote store whose Take fails while down is set and
// otherwise admits every request, and whose Record does what record says.
type recorderStore struct {
	down   atomic.Bool
	record func(ctx context.Context, req slidelog.Request, at time.Time) error
}

func (s *recorderStore) Take(_ context.Context, req slidelog.Request) (slidelog.Result, error) {
	if s.down.Load() {
		return slidelog.Result{}, errDown
	}
	states := make([]slidelog.PolicyResult, len(req.Policies))
	for i, p := range req.Policies {
		states[i] = slidelog.PolicyResult{Policy: p, Allowed: true, Remaining: p.Limit - req.Cost}
	}
	return slidelog.NewResult(states, ""), nil
}
func (s *recorderStore) Refund(context.Context, slidelog.Request) error { return nil }
func (s *recorderStore) Reset(context.Context, slidelog.Request) error  { return nil }
func (s *recorderStore) Close() error                                   { return nil }
func (s *recorderStore) Record(ctx context.Context, req slidelog.Request, at time.Time) error {
	return s.record(ctx, req, at)
}

// keeperStore is a recorderStore that keeps the fallback's admissions
// itself (a Keeper), and whose WriteBack does what writeBack says.
type keeperStore struct {
	recorderStore
	kept      atomic.Int64
	writeBack func(ctx context.Context) (written, left int)
}

func (s *keeperStore) Keep(slidelog.Request, time.Time) { s.kept.Add(1) }
func (s *keeperStore) Forget(slidelog.Request)          {}
func (s *keeperStore) Unwritten() int                   { return int(s.kept.Load()) }
func (s *keeperStore) WriteBack(ctx context.Context) (written, left int) {
	return s.writeBack(ctx)
}

var (
	_ slidelog.Recorder = (*recorderStore)(nil)
	_ slidelog.Keeper   = (*keeperStore)(nil)
)

// A store whose Record or WriteBack panics while the limiter writes its
// fallback's admissions back, on goroutines of the limiter's own (the
// background write-back, and the writes a decision waits for), does not
// end the process: the panic is recovered and logged at ERROR, once per
// interval, and the write-back fails as with a store error: the
// admissions stay for a later attempt, and a decision that waited for
// them goes to the failure mode.
func TestStorePanicWritingBackIsRecovered(t *testing.T) {
	recordPanics := func(context.Context, slidelog.Request, time.Time) error { panic("record boom") }
	for _, tt := range []struct {
		name     string
		store    func() slidelog.Store
		wantFunc string
	}{
		{"Recorder", func() slidelog.Store {
			return &recorderStore{record: recordPanics}
		}, "(*recorderStore).Record"},
		{"Keeper", func() slidelog.Store {
			return &keeperStore{recorderStore: recorderStore{record: recordPanics},
				writeBack: func(context.Context) (int, int) { panic("write-back boom") }}
		}, "(*keeperStore).WriteBack"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var buf logbuf.Buffer
			store := tt.store()
			down := func(b bool) {
				switch s := store.(type) {
				case *recorderStore:
					s.down.Store(b)
				case *keeperStore:
					s.down.Store(b)
				}
			}
			l, err := slidelog.New(store, slidelog.PerMinute(100), slidelog.WithName("wb"),
				slidelog.WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
			require.NoError(t, err)
			down(true)
			for range 3 {
				res, err := l.Allow(t.Context(), "k")
				require.NoError(t, err)
				require.Equal(t, slidelog.SourceFallback, res.Source)
			}
			down(false)
			// Another key's decision succeeds and starts the background
			// write-back; k's own decisions write k's admissions first.
			for range 10 {
				res, err := l.Allow(t.Context(), "other")
				require.NoError(t, err)
				require.Equal(t, slidelog.Source("store"), res.Source)
				_, err = l.Allow(t.Context(), "k")
				require.NoError(t, err)
			}
			require.Eventually(t, func() bool { return len(buf.Lines("recovered a panic")) > 0 },
				2*time.Second, 5*time.Millisecond, "no record of the recovered panic:\n%s", buf.String())
			require.NoError(t, l.Close()) // waits for the background write-back
			requirePanicRecord(t, &buf, "wb", "write_back", "boom", tt.wantFunc)
		})
	}
}

// A panic in an observer's Unbind reaches Close's caller, as a panic in
// any method of an observer called on the caller's goroutine does, but
// only once Close has done its work: the other observers are unbound,
// and the limiter's name on its store is released.
func TestCloseFinishesWhenUnbindPanics(t *testing.T) {
	store := memstore.New()
	defer store.Close()
	good := &recordingObserver{}
	l, err := slidelog.New(store, slidelog.PerMinute(10), slidelog.WithName("unbind"),
		slidelog.WithObserver(&panickingObserver{unbindPanics: true}), slidelog.WithObserver(good))
	require.NoError(t, err)
	require.PanicsWithValue(t, "unbind boom", func() { _ = l.Close() })
	assert.Equal(t, 1, good.unbound, "the other observer was not unbound")
	l2, err := slidelog.New(store, slidelog.PerMinute(10), slidelog.WithName("unbind"))
	require.NoError(t, err, "the closed limiter's name is still taken")
	require.NoError(t, l2.Close())
}

// bindPanics is an Observer whose Bind panics.
type bindPanics struct{}

func (bindPanics) Bind(string, func() slidelog.Gauges) (slidelog.LimiterObserver, error) {
	panic("bind boom")
}

// A panic in an observer's Bind reaches New's caller once New has undone
// its work: the observers bound before it are unbound, and the name it
// claimed on the store is free again.
func TestNewUndoesWhenBindPanics(t *testing.T) {
	store := memstore.New()
	defer store.Close()
	first := &recordingObserver{}
	require.PanicsWithValue(t, "bind boom", func() {
		_, _ = slidelog.New(store, slidelog.PerMinute(10), slidelog.WithName("bind"),
			slidelog.WithObserver(first), slidelog.WithObserver(bindPanics{}))
	})
	assert.Equal(t, 1, first.unbound, "the observer bound before the panic was not unbound")
	l, err := slidelog.New(store, slidelog.PerMinute(10), slidelog.WithName("bind"))
	require.NoError(t, err, "the name New claimed before the panic is still taken")
	require.NoError(t, l.Close())
}

// A store call that panics on the caller's goroutine (a decision's Take,
// or a Reset) lets the panic reach the caller, and gives back the probe
// it took from a half-open breaker: the breaker probes with the next
// request, instead of refusing every request for good (gobreaker counts
// the probes out and in).
func TestStorePanicGivesBackBreakerProbe(t *testing.T) {
	for _, tt := range []struct {
		name string
		call func(l *slidelog.Limiter) error
	}{
		{"Take", func(l *slidelog.Limiter) error { _, err := l.Allow(context.Background(), "k"); return err }},
		{"Reset", func(l *slidelog.Limiter) error { return l.Reset(context.Background(), "k") }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var mode atomic.Value // "down", "panic" or "up"
			mode.Store("down")
			store := &callbackStore{do: func() error {
				switch mode.Load() {
				case "down":
					return errDown
				case "panic":
					panic("store boom")
				}
				return nil
			}}
			l := newResilientLimiter(t, store, slidelog.PerMinute(100),
				slidelog.WithBreaker(slidelog.BreakerSettings{ConsecutiveFailures: 1, OpenTimeout: 20 * time.Millisecond}))
			_, err := l.Allow(t.Context(), "k")
			require.NoError(t, err)
			require.Equal(t, map[string]string{"store": "open"}, slidelog.BreakerStates(l))
			require.Eventually(t, func() bool { return slidelog.BreakerStates(l)["store"] == "half-open" },
				2*time.Second, 5*time.Millisecond)
			mode.Store("panic")
			require.PanicsWithValue(t, "store boom", func() { _ = tt.call(l) })
			mode.Store("up")
			res, err := l.Allow(t.Context(), "k")
			require.NoError(t, err)
			assert.Equal(t, slidelog.Source("store"), res.Source, "the half-open breaker lost its probe to the panic")
			assert.Equal(t, map[string]string{"store": "closed"}, slidelog.BreakerStates(l))
		})
	}
}

// callbackStore is a remote store each of whose calls returns do's error
// (Take admitting every request when it is nil).
type callbackStore struct {
	do func() error
}

func (s *callbackStore) Take(_ context.Context, req slidelog.Request) (slidelog.Result, error) {
	if err := s.do(); err != nil {
		return slidelog.Result{}, err
	}
	states := make([]slidelog.PolicyResult, len(req.Policies))
	for i, p := range req.Policies {
		states[i] = slidelog.PolicyResult{Policy: p, Allowed: true, Remaining: p.Limit - req.Cost}
	}
	return slidelog.NewResult(states, ""), nil
}
func (s *callbackStore) Refund(context.Context, slidelog.Request) error { return s.do() }
func (s *callbackStore) Reset(context.Context, slidelog.Request) error  { return s.do() }
func (s *callbackStore) Close() error                                   { return nil }
