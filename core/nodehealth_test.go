package slidelog_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/internal/logbuf"
	"github.com/slidelog/slidelog/core/prommetrics"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
)

// stoppedStore returns a store and a limiter (default options but opts)
// on a redis-server of the test's own, warmed up, and a function that
// stops the server (SIGSTOP) until the test ends.
func stoppedStore(t *testing.T, storeOpts []redisstore.Option, opts ...slidelog.Option) (*redisstore.Store, *slidelog.Limiter, func()) {
	t.Helper()
	srv := redistest.StartServer(t, redistest.ServerConfig{})
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = client.Close() })
	store, err := redisstore.New(client, storeOpts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	l, err := slidelog.New(store, slidelog.PerSecond(1000), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	// Warm up: connections and the script.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 20 {
				_, err := l.Allow(context.Background(), "warm-"+strconv.Itoa(i*100+j))
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
	return store, l, func() {
		require.NoError(t, srv.Signal(syscall.SIGSTOP))
		t.Cleanup(func() { _ = srv.Signal(syscall.SIGCONT) })
	}
}

// A caller's context that ends ends its decision within a few
// milliseconds, on a stopped node, on every path: a lone decision read in
// its caller's goroutine, one with a deadline, and decisions queued
// behind others and pipelined together (issue 29: a lone decision
// cancelled at 30 ms returned at 1.1 s). The stall timeout is set long,
// so that only the context can end them.
func TestCancelledContextEndsWait(t *testing.T) {
	const cancelAt, slack = 30 * time.Millisecond, 40 * time.Millisecond
	for _, tc := range []struct {
		name    string
		callers int
		ctx     func() (context.Context, context.CancelFunc)
	}{
		{"lone, cancelled", 1, func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(cancelAt, cancel)
			return ctx, cancel
		}},
		{"lone, deadline", 1, func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), cancelAt)
		}},
		{"queued and pipelined, cancelled", 40, func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(cancelAt, cancel)
			return ctx, cancel
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, l, stop := stoppedStore(t, []redisstore.Option{redisstore.WithStallTimeout(5 * time.Second)})
			stop()
			var wg sync.WaitGroup
			for i := range tc.callers {
				wg.Go(func() {
					ctx, cancel := tc.ctx()
					defer cancel()
					start := time.Now()
					res, err := l.Allow(ctx, "k"+strconv.Itoa(i))
					took := time.Since(start)
					assert.True(t, errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded), "caller %d: %v (%v)", i, err, res.Source)
					assert.Less(t, took, cancelAt+slack, "caller %d returned %v after its context ended", i, took-cancelAt)
				})
			}
			wg.Wait()
		})
	}
}

// Close ends every decision waiting on a stopped node with ErrClosed
// once the store judges the node, whether the decisions read in their
// callers' goroutines or wait in a queue (issue 29: 40 decisions returned
// about 45 s after Close). Each is held, from its own start, to the bound
// on a stopped node (docs/operations.md): the stall timeout and a tick,
// plus wakeUps times the latest wake-up of a sleeping goroutine measured
// beside it, or stallBound, which holds when other processes take the
// CPU, if that is longer. Close itself adds nothing to the wait.
func TestCloseEndsWaitingDecisions(t *testing.T) {
	_, l, stop := stoppedStore(t, nil)
	stop()
	late := lateWakeUps(t)
	const callers = 40
	var wg sync.WaitGroup
	took := make(chan time.Duration, callers)
	started := make(chan struct{}, callers)
	for i := range callers {
		wg.Go(func() {
			ctx := context.Background()
			if i%2 == 1 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				defer cancel()
			}
			start := time.Now()
			started <- struct{}{}
			_, err := l.Allow(ctx, "k"+strconv.Itoa(i))
			took <- time.Since(start)
			assert.ErrorIs(t, err, slidelog.ErrClosed, "caller %d", i)
		})
	}
	for range callers {
		<-started
	}
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, l.Close())
	wg.Wait()
	close(took)
	var slowest time.Duration
	for d := range took {
		slowest = max(slowest, d)
	}
	tick := redisstore.DefaultStallTimeout / 10
	bound := max(stallBound, redisstore.DefaultStallTimeout+tick+wakeUps*late())
	t.Logf("the slowest of %d decisions returned %v after its start; bound %v (latest wake-up %v)", callers, slowest, bound, late())
	assert.LessOrEqual(t, slowest, bound, "the slowest decision, from its start")
}

// Two limiters on one store see one health per node: the store judges a
// stopped node once, for both, and each limiter's decisions go to its
// failure mode as stalled, none as a plain error (issue 29: limiter A's
// verdict broke connections B's calls shared, and B counted errors).
func TestLimitersShareNodeHealth(t *testing.T) {
	var logs logbuf.Buffer
	store, a, stop := stoppedStore(t, []redisstore.Option{redisstore.WithLogger(slog.New(slog.NewTextHandler(&logs, nil)))},
		slidelog.WithName("a"))
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	_ = a.Close()
	a, err := slidelog.New(store, slidelog.PerSecond(1000), slidelog.WithName("a"), slidelog.WithObserver(prommetrics.New(regA)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close() })
	b, err := slidelog.New(store, slidelog.PerSecond(1000), slidelog.WithName("b"), slidelog.WithObserver(prommetrics.New(regB)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	stop()
	var wg sync.WaitGroup
	for i := range 10 {
		for _, l := range []*slidelog.Limiter{a, b} {
			wg.Go(func() {
				res, err := l.Allow(context.Background(), "k"+strconv.Itoa(i))
				assert.NoError(t, err)
				assert.Equal(t, slidelog.SourceFallback, res.Source)
			})
		}
	}
	wg.Wait()
	// The verdict's WARN line may follow the decisions it ended.
	assert.Eventually(t, func() bool { return logs.Count("node stalled") >= 1 }, 2*time.Second, 10*time.Millisecond, "no verdict logged:\n%s", logs.String())
	assert.Equal(t, 1, logs.Count("node stalled"), "one verdict for the node, shared by both limiters:\n%s", logs.String())
	for name, reg := range map[string]*prometheus.Registry{"a": regA, "b": regB} {
		by := labelCounts(t, reg, prommetrics.MetricFallbackActivations, "reason")
		assert.Equal(t, map[string]float64{"stalled": 10}, by, "limiter %s: its decisions went to the failure mode as stalled", name)
	}
}

// redisstore.New succeeds on a healthy server however busy its process:
// 48 CPU-bound goroutines already running (issue 29: New failed with
// "redis unreachable at 127.0.0.1:7005 (no answer within 1s)").
func TestNewInBusyProcess(t *testing.T) {
	redistest.RedisClient(t) // fails when the servers are not set
	redistest.ClusterClient(t)
	spinners(t, 48)
	for name, newClient := range map[string]func() redis.UniversalClient{
		"standalone": func() redis.UniversalClient {
			return redis.NewClient(&redis.Options{Addr: os.Getenv(redistest.EnvRedisAddr)})
		},
		"cluster": func() redis.UniversalClient {
			return redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(os.Getenv(redistest.EnvClusterAddrs), ",")})
		},
	} {
		t.Run(name, func(t *testing.T) {
			client := newClient()
			t.Cleanup(func() { _ = client.Close() })
			start := time.Now()
			s, err := redisstore.New(client)
			require.NoError(t, err, "New, after %v", time.Since(start))
			require.NoError(t, s.Close())
			t.Logf("New took %v", time.Since(start))
		})
	}
}
