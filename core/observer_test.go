package slidelog_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	slidelog "github.com/slidelog/slidelog/core"
)

// recordingObserver keeps the events of the limiters bound to it as
// strings.
type recordingObserver struct {
	bindErr error
	mu      sync.Mutex
	events  []string
	gauges  func() slidelog.Gauges
	unbound int
}

func (o *recordingObserver) Bind(limiter string, gauges func() slidelog.Gauges) (slidelog.LimiterObserver, error) {
	if o.bindErr != nil {
		return nil, o.bindErr
	}
	o.add("bind " + limiter)
	o.gauges = gauges
	return o, nil
}

func (o *recordingObserver) add(e string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, e)
}

func (o *recordingObserver) Decision(s slidelog.Source, allowed bool) {
	o.add("decision " + s.String() + map[bool]string{true: " allowed", false: " denied"}[allowed])
}
func (o *recordingObserver) StoreCall(status string, _ time.Duration) { o.add("store " + status) }
func (o *recordingObserver) Failover(reason string, mode slidelog.FailureMode) {
	o.add("failover " + reason + " " + mode.String())
}
func (o *recordingObserver) Error(reason string) { o.add("error " + reason) }
func (o *recordingObserver) BreakerState(node string, st slidelog.BreakerState) {
	o.add("breaker " + node + " " + st.String())
}
func (o *recordingObserver) Unbind() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.unbound++
}

func TestObserverGetsEvents(t *testing.T) {
	o := &recordingObserver{}
	l, err := slidelog.New(failingStore(), slidelog.Policy{Name: "p", Limit: 1, Window: time.Minute}, slidelog.WithObserver(o), slidelog.WithName("obs"))
	require.NoError(t, err)
	for range 5 + 1 {
		_, err := l.Allow(t.Context(), "k")
		require.NoError(t, err)
	}
	assert.Equal(t, slidelog.Gauges{FallbackKeys: 1}, o.gauges(), "the gauges read the limiter")
	require.NoError(t, l.Close())
	_, err = l.Allow(t.Context(), "k")
	require.ErrorIs(t, err, slidelog.ErrClosed)

	want := []string{"bind obs",
		"store error", "failover error fallback", "decision fallback allowed"}
	for range 5 - 2 {
		want = append(want, "store error", "failover error fallback", "decision fallback denied")
	}
	want = append(want, "breaker store open", "store error", "failover error fallback", "decision fallback denied",
		"failover breaker_open fallback", "decision fallback denied", "error closed")
	o.mu.Lock()
	defer o.mu.Unlock()
	assert.Equal(t, want, o.events)
	assert.Equal(t, 1, o.unbound, "Close unbinds once")
}

// A cost out of range is an error instead of a decision like any other:
// slidelog_errors_total counts it (reason "other"), on every path.
func TestObserverCountsCostErrors(t *testing.T) {
	for name, store := range map[string]slidelog.Store{"store": failingStore(), "memory": newMemoryStore(t)} {
		t.Run(name, func(t *testing.T) {
			o := &recordingObserver{}
			l, err := slidelog.New(store, slidelog.Policy{Name: "p", Limit: 2, Window: time.Minute}, slidelog.WithObserver(o), slidelog.WithName("cost"))
			require.NoError(t, err)
			defer l.Close()
			for _, n := range []int{0, 3} {
				_, err := l.AllowN(t.Context(), "k", n)
				require.ErrorIs(t, err, slidelog.ErrInvalidCost)
			}
			o.mu.Lock()
			defer o.mu.Unlock()
			assert.Equal(t, []string{"bind cost", "error other", "error other"}, o.events)
		})
	}
}

// An open breaker reports half-open once its open timeout has passed,
// whether or not a request asks it: a node no key maps to any more (a
// failed-over master) does not stay "open" in slidelog_breaker_state, and
// its alert, for good.
func TestBreakerReportsHalfOpenWithoutRequests(t *testing.T) {
	o := &recordingObserver{}
	l, err := slidelog.New(failingStore(), slidelog.PerMinute(100), slidelog.WithObserver(o), slidelog.WithName("idle"),
		slidelog.WithBreaker(slidelog.BreakerSettings{OpenTimeout: 50 * time.Millisecond}))
	require.NoError(t, err)
	defer l.Close()
	for range 5 {
		_, err := l.Allow(t.Context(), "k")
		require.NoError(t, err)
	}
	require.Equal(t, map[string]string{"store": "open"}, slidelog.BreakerStates(l))
	require.Eventually(t, func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		return o.events[len(o.events)-1] == "breaker store half-open"
	}, 2*time.Second, 10*time.Millisecond, "no request came, and the breaker still reports open")
	assert.Equal(t, map[string]string{"store": "half-open"}, slidelog.BreakerStates(l))
}

func TestObserverBindErrorFailsNew(t *testing.T) {
	first := &recordingObserver{}
	_, err := slidelog.New(failingStore(), slidelog.PerMinute(1), slidelog.WithObserver(first),
		slidelog.WithObserver(&recordingObserver{bindErr: errors.New("no meter")}))
	require.ErrorIs(t, err, slidelog.ErrInvalidOption)
	assert.ErrorContains(t, err, "no meter")
	assert.Equal(t, 1, first.unbound, "New unbinds the observers bound before the failure")
	_, err = slidelog.New(failingStore(), slidelog.PerMinute(1), slidelog.WithObserver(nil))
	require.ErrorIs(t, err, slidelog.ErrInvalidOption)
}

func TestBreakerStateString(t *testing.T) {
	for give, want := range map[slidelog.BreakerState]string{
		slidelog.BreakerClosed: "closed", slidelog.BreakerHalfOpen: "half-open", slidelog.BreakerOpen: "open", 7: "BreakerState(7)",
	} {
		assert.Equal(t, want, give.String())
	}
}

// A limiter on a closed memory store under the default FailFallback has
// no fallback to fail over to: the call fails with ErrClosed, and the
// observers are told of an error of reason "closed", not of a failover
// that nothing decided. Under FailOpen or FailClosed the failure mode
// does decide, and is reported as a failover.
func TestObserverClosedMemoryStore(t *testing.T) {
	for _, tt := range []struct {
		mode    slidelog.FailureMode
		wantErr error
		want    []string
	}{
		{slidelog.FailFallback, slidelog.ErrClosed, []string{"bind m", "error closed"}},
		{slidelog.FailOpen, nil, []string{"bind m", "failover error fail_open", "decision fail_open allowed"}},
		{slidelog.FailClosed, nil, []string{"bind m", "failover error fail_closed", "decision fail_closed denied"}},
	} {
		t.Run(tt.mode.String(), func(t *testing.T) {
			o := &recordingObserver{}
			store := newMemoryStore(t)
			l, err := slidelog.New(store, slidelog.Policy{Name: "p", Limit: 1, Window: time.Minute},
				slidelog.WithObserver(o), slidelog.WithName("m"), slidelog.WithFailureMode(tt.mode))
			require.NoError(t, err)
			defer l.Close()
			require.NoError(t, store.Close())
			_, err = l.Allow(t.Context(), "k")
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
			} else {
				require.NoError(t, err)
			}
			o.mu.Lock()
			defer o.mu.Unlock()
			assert.Equal(t, tt.want, o.events)
		})
	}
}
