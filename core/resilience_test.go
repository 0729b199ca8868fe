package slidelog_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/prommetrics"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeStore is a Store whose Take does what take says, and counts calls.
type fakeStore struct {
	take  func(ctx context.Context, req slidelog.Request) (slidelog.Result, error)
	calls atomic.Int64
}

func (s *fakeStore) Take(ctx context.Context, req slidelog.Request) (slidelog.Result, error) {
	s.calls.Add(1)
	return s.take(ctx, req)
}
func (s *fakeStore) Refund(context.Context, slidelog.Request) error { return nil }
func (s *fakeStore) Reset(context.Context, slidelog.Request) error  { return nil }
func (s *fakeStore) Close() error                                   { return nil }

var errDown = errors.New("dial tcp 10.0.0.1:6379: connect: connection refused")

func failingStore() *fakeStore {
	return &fakeStore{take: func(context.Context, slidelog.Request) (slidelog.Result, error) {
		return slidelog.Result{}, errDown
	}}
}

// hangingStore answers only when the call's context is done.
func hangingStore() *fakeStore {
	return &fakeStore{take: func(ctx context.Context, _ slidelog.Request) (slidelog.Result, error) {
		<-ctx.Done()
		return slidelog.Result{}, ctx.Err()
	}}
}

func newResilientLimiter(t *testing.T, s slidelog.Store, p slidelog.Policy, opts ...slidelog.Option) *slidelog.Limiter {
	t.Helper()
	l, err := slidelog.New(s, p, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func TestFailureModes(t *testing.T) {
	p := slidelog.Policy{Name: "p", Limit: 3, Window: time.Minute}
	tests := []struct {
		give        slidelog.FailureMode
		wantSource  slidelog.Source
		wantAllowed []bool // of five calls
		wantErr     error
	}{
		{give: slidelog.FailFallback, wantSource: slidelog.SourceFallback, wantAllowed: []bool{true, true, true, false, false}},
		{give: slidelog.FailOpen, wantSource: slidelog.SourceFailOpen, wantAllowed: []bool{true, true, true, true, true}},
		{give: slidelog.FailClosed, wantSource: slidelog.SourceFailClosed, wantAllowed: []bool{false, false, false, false, false}},
		{give: slidelog.FailError, wantErr: slidelog.ErrUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.give.String(), func(t *testing.T) {
			reg := prometheus.NewRegistry()
			l := newResilientLimiter(t, failingStore(), p, slidelog.WithFailureMode(tt.give), slidelog.WithObserver(prommetrics.New(reg)))
			for i := range 5 {
				res, err := l.Allow(t.Context(), "k")
				if tt.wantErr != nil {
					require.ErrorIs(t, err, tt.wantErr)
					continue
				}
				require.NoError(t, err)
				assert.Equal(t, tt.wantSource, res.Source, "call %d", i)
				assert.Equal(t, tt.wantAllowed[i], res.Allowed, "call %d", i)
				if !res.Allowed {
					assert.Positive(t, res.RetryAfter, "a denial says when to retry")
				}
			}
			got := testutil.ToFloat64(counterSum(t, reg, prommetrics.MetricFallbackActivations))
			assert.Equal(t, 5.0, got, "every store failure is counted")
		})
	}
}

// counterSum returns a collector whose value is the sum of the metric
// family name in reg.
func counterSum(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sum"}, func() float64 { return sum })
}

func metricValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	return testutil.ToFloat64(counterSum(t, reg, name))
}

// labelledValue sums the series of metric name whose label has value.
func labelledValue(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

// An error that concerns one key (ErrDamagedKey: its data; ErrUnservedKey:
// no node serves it) goes to the failure mode but never opens the node's
// breaker: other keys stay on the store.
func TestDamagedKeyDoesNotOpenBreaker(t *testing.T) {
	for _, cause := range []error{slidelog.ErrDamagedKey, slidelog.ErrUnservedKey} {
		t.Run(cause.Error(), func(t *testing.T) {
			mem := memstore.New()
			defer mem.Close()
			s := &fakeStore{take: func(ctx context.Context, req slidelog.Request) (slidelog.Result, error) {
				if req.Key == "bad" {
					return slidelog.Result{}, fmt.Errorf("%w: %w: the key's reply", slidelog.ErrUnavailable, cause)
				}
				return mem.Take(ctx, req)
			}}
			reg := prometheus.NewRegistry()
			l := newResilientLimiter(t, s, slidelog.Policy{Name: "p", Limit: 1000, Window: time.Minute},
				slidelog.WithObserver(prommetrics.New(reg)),
				slidelog.WithBreaker(slidelog.BreakerSettings{ConsecutiveFailures: 2}))
			for i := range 50 {
				res, err := l.Allow(t.Context(), "bad")
				require.NoError(t, err)
				require.Equal(t, slidelog.SourceFallback, res.Source, "call %d", i)
			}
			assert.Equal(t, map[string]string{"store": "closed"}, slidelog.BreakerStates(l), "50 errors of one key leave the breaker closed")
			assert.Equal(t, 50.0, labelledValue(t, reg, prommetrics.MetricFallbackActivations, "reason", "error"))
			res, err := l.Allow(t.Context(), "good")
			require.NoError(t, err)
			assert.Equal(t, slidelog.Source("store"), res.Source, "another key is still decided by the store")
		})
	}
}

func TestFallbackRefundAndReset(t *testing.T) {
	l := newResilientLimiter(t, failingStore(), slidelog.Policy{Name: "p", Limit: 1, Window: time.Minute})
	res, err := l.Allow(t.Context(), "k")
	require.NoError(t, err)
	require.True(t, res.Allowed)
	require.Equal(t, slidelog.SourceFallback, res.Source)
	res2, err := l.Allow(t.Context(), "k")
	require.NoError(t, err)
	require.False(t, res2.Allowed, "the fallback enforces the limit")

	require.NoError(t, l.Refund(t.Context(), res), "a fallback admission is refunded to the fallback")
	res, err = l.Allow(t.Context(), "k")
	require.NoError(t, err)
	require.True(t, res.Allowed, "after the refund there is room again")

	require.NoError(t, l.Reset(t.Context(), "k"))
	res, err = l.Allow(t.Context(), "k")
	require.NoError(t, err)
	require.True(t, res.Allowed, "Reset clears the fallback too")
}

func TestFallbackPolicies(t *testing.T) {
	p := slidelog.Policy{Name: "p", Limit: 10, Window: time.Minute}
	tests := []struct {
		name string
		give []slidelog.Option
		want int
	}{
		{name: "default is the full limit", want: 10},
		{name: "divided by instances, rounded up", give: []slidelog.Option{slidelog.WithFallbackInstances(3)}, want: 4},
		{name: "explicit", give: []slidelog.Option{slidelog.WithFallbackPolicies(slidelog.Policy{Name: "f", Limit: 2, Window: time.Minute})}, want: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newResilientLimiter(t, failingStore(), p, tt.give...)
			admitted := 0
			for range 30 {
				res, err := l.Allow(t.Context(), "k")
				require.NoError(t, err)
				if res.Allowed {
					admitted++
				}
			}
			assert.Equal(t, tt.want, admitted)
		})
	}
}

// TestFallbackOverAdmissionBound measures what N instances admit together
// for one key in one window while every one of them is on its fallback:
// at most N*ceil(L/N) with WithFallbackInstances(N), and N*L without.
func TestFallbackOverAdmissionBound(t *testing.T) {
	const limit = 100
	p := slidelog.Policy{Name: "p", Limit: limit, Window: time.Minute}
	for _, n := range []int{1, 3, 8} {
		for _, divided := range []bool{false, true} {
			var opts []slidelog.Option
			want := n * limit
			if divided {
				opts = append(opts, slidelog.WithFallbackInstances(n))
				want = n * ((limit + n - 1) / n)
			}
			admitted := 0
			for range n {
				l := newResilientLimiter(t, failingStore(), p, opts...)
				for range 2 * limit {
					res, err := l.Allow(t.Context(), "k")
					require.NoError(t, err)
					if res.Allowed {
						admitted++
					}
				}
			}
			t.Logf("fallback: %d instances, divided=%v: admitted %d in one window for limit %d (%.2fx)", n, divided, admitted, limit, float64(admitted)/limit)
			assert.Equal(t, want, admitted)
			if divided {
				assert.LessOrEqual(t, admitted, limit+n-1)
			}
		}
	}
}

// stallingStore is a store whose node answers nothing: it ends each call
// itself after stall with ErrStalled, as a store bounds its own calls.
func stallingStore(stall time.Duration) *fakeStore {
	return &fakeStore{take: func(ctx context.Context, _ slidelog.Request) (slidelog.Result, error) {
		select {
		case <-time.After(stall):
			return slidelog.Result{}, fmt.Errorf("%w: %w", slidelog.ErrUnavailable, slidelog.ErrStalled)
		case <-ctx.Done():
			return slidelog.Result{}, ctx.Err()
		}
	}}
}

func TestStalledStoreAndBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const stall = 30 * time.Millisecond
		s := stallingStore(stall)
		reg := prometheus.NewRegistry()
		l := newResilientLimiter(t, s, slidelog.Policy{Name: "p", Limit: 100, Window: time.Minute},
			slidelog.WithObserver(prommetrics.New(reg)),
			slidelog.WithBreaker(slidelog.BreakerSettings{ConsecutiveFailures: 3, OpenTimeout: time.Second}))
		for i := range 3 {
			start := time.Now()
			res, err := l.Allow(t.Context(), "k")
			require.NoError(t, err)
			require.Equal(t, slidelog.SourceFallback, res.Source, "call %d", i)
			assert.Equal(t, stall, time.Since(start), "call %d waits for the store's own stall timeout, no more", i)
		}
		assert.Equal(t, 3.0, metricValue(t, reg, prommetrics.MetricFallbackActivations))
		assert.Equal(t, 3.0, labelledValue(t, reg, prommetrics.MetricFallbackActivations, "reason", "stalled"))
		assert.Equal(t, map[string]string{"store": "open"}, slidelog.BreakerStates(l))
		assert.Equal(t, 2.0, metricValue(t, reg, prommetrics.MetricBreakerState))

		// Open: no store call, no wait.
		start := time.Now()
		for range 10 {
			res, err := l.Allow(t.Context(), "k")
			require.NoError(t, err)
			require.Equal(t, slidelog.SourceFallback, res.Source)
		}
		assert.Zero(t, time.Since(start))
		assert.Equal(t, int64(3), s.calls.Load())

		// After the open timeout one probe goes to the store; the store is
		// back, so the breaker closes.
		time.Sleep(time.Second + time.Millisecond)
		assert.Equal(t, "half-open", slidelog.BreakerStates(l)["store"])
	})
}

func TestBreakerClosesWhenStoreRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var healthy atomic.Bool
		mem := memstore.New()
		defer mem.Close()
		s := &fakeStore{take: func(ctx context.Context, req slidelog.Request) (slidelog.Result, error) {
			if !healthy.Load() {
				return slidelog.Result{}, errDown
			}
			return mem.Take(ctx, req)
		}}
		l := newResilientLimiter(t, s, slidelog.Policy{Name: "p", Limit: 100, Window: time.Minute},
			slidelog.WithBreaker(slidelog.BreakerSettings{ConsecutiveFailures: 2, OpenTimeout: 500 * time.Millisecond}))
		allow := func() slidelog.Source {
			res, err := l.Allow(t.Context(), "k")
			require.NoError(t, err)
			return res.Source
		}
		allow()
		allow()
		require.Equal(t, "open", slidelog.BreakerStates(l)["store"])
		time.Sleep(501 * time.Millisecond)
		// Half-open, store still down: the probe fails, open again.
		require.Equal(t, slidelog.SourceFallback, allow())
		require.Equal(t, "open", slidelog.BreakerStates(l)["store"])
		healthy.Store(true)
		require.Equal(t, slidelog.SourceFallback, allow(), "still open: no store call")
		time.Sleep(501 * time.Millisecond)
		require.Equal(t, slidelog.Source("store"), allow(), "the probe reaches the store: a store that gives no name is \"store\"")
		require.Equal(t, "closed", slidelog.BreakerStates(l)["store"])
		require.Equal(t, slidelog.Source("store"), allow())
	})
}

func TestCallerCancellationIsNotAFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := hangingStore()
		reg := prometheus.NewRegistry()
		l := newResilientLimiter(t, s, slidelog.Policy{Name: "p", Limit: 100, Window: time.Minute},
			slidelog.WithObserver(prommetrics.New(reg)),
			slidelog.WithBreaker(slidelog.BreakerSettings{ConsecutiveFailures: 1}))
		for range 20 {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
			res, err := l.Allow(ctx, "k")
			cancel()
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.Equal(t, slidelog.SourceNone, res.Source)
		}
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		wg.Go(func() {
			_, err := l.Allow(ctx, "k")
			assert.ErrorIs(t, err, context.Canceled)
		})
		synctest.Wait()
		cancel()
		wg.Wait()
		assert.Equal(t, map[string]string{"store": "closed"}, slidelog.BreakerStates(l), "cancellations do not trip the breaker")
		assert.Equal(t, int64(21), s.calls.Load())
		assert.Zero(t, metricValue(t, reg, prommetrics.MetricFallbackActivations))
		assert.Equal(t, 21.0, metricValue(t, reg, prommetrics.MetricErrors))
	})
}

func TestMetricsSharedRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	mem := newMemoryStore(t)
	deny := slidelog.WithDenyCache(10_000)
	a := newResilientLimiter(t, mem, slidelog.Policy{Name: "a", Limit: 1, Window: time.Minute}, slidelog.WithObserver(prommetrics.New(reg)), deny)
	b := newResilientLimiter(t, newMemoryStore(t), slidelog.Policy{Name: "b", Limit: 1, Window: time.Minute}, slidelog.WithObserver(prommetrics.New(reg)), deny)
	for _, l := range []*slidelog.Limiter{a, b} {
		for range 3 {
			_, err := l.Allow(t.Context(), "k")
			require.NoError(t, err)
		}
	}
	// Each: 1 admitted by memory, 1 denied by memory, 1 denied by the deny cache.
	assert.Equal(t, 6.0, metricValue(t, reg, prommetrics.MetricDecisions))
	assert.Equal(t, 4.0, metricValue(t, reg, prommetrics.MetricRejections))
	assert.Equal(t, 2.0, metricValue(t, reg, prommetrics.MetricDenyCacheEntries))
	n, err := testutil.GatherAndCount(reg, prommetrics.MetricCommandDuration)
	require.NoError(t, err)
	assert.Equal(t, 2, n, "one histogram per limiter")
}

func TestOptionsRejectBadValues(t *testing.T) {
	p := slidelog.Policy{Name: "p", Limit: 1, Window: time.Second}
	for _, o := range []slidelog.Option{
		slidelog.WithFailureMode(99), slidelog.WithFallbackInstances(0),
		slidelog.WithFallbackPolicies(), slidelog.WithFallbackPolicies(slidelog.Policy{Limit: 0, Window: time.Second}),
		slidelog.WithFallbackMaxKeys(0), slidelog.WithBreaker(slidelog.BreakerSettings{ConsecutiveFailures: -1}),
		slidelog.WithDenyCache(-1), slidelog.WithObserver(prommetrics.New(nil)), slidelog.WithName(""), slidelog.WithLogger(nil),
	} {
		_, err := slidelog.New(failingStore(), p, o)
		assert.Error(t, err)
	}
}
