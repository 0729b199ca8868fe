package slidelog_test

import (
	"bytes"
	"context"
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
	"github.com/sony/gobreaker/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWaitingRule: Refund, Reset and Peek follow the rule of the package
// documentation's "Waiting", on a real Redis Cluster with one master
// broken for this client only: they end when the caller's context does,
// and the caller's cancellation does not count against the node; their
// store errors count against the node's breaker; while that breaker is
// open they fail at once with the error a decision gets under FailError,
// without waiting on the node; the other nodes' keys are untouched.
func TestWaitingRule(t *testing.T) {
	fnet := &faultyNet{}
	opts := redisstore.ClusterOptions(clusterAddrs(t)...)
	opts.Dialer = fnet.dial
	client := redis.NewClusterClient(opts)
	t.Cleanup(func() { _ = client.Close() })
	// The keys are deleted through a client of its own: this one's pool
	// may still be backing off from the refused dials when the test ends.
	store, err := redisstore.New(client, redisstore.WithKeyPrefix(redistest.KeyPrefix(t, redistest.ClusterClient(t))))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	l, err := slidelog.New(store, slidelog.Policy{Name: "p", Limit: 1000, Window: time.Minute},
		slidelog.WithFailureMode(slidelog.FailError),
		slidelog.WithBreaker(slidelog.BreakerSettings{ConsecutiveFailures: 3, OpenTimeout: time.Minute}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })

	byNode := keysByNode(t, client, store, slidelog.Namespace(l), 8)
	var victim, healthy string
	for addr := range byNode {
		if victim == "" {
			victim = addr
		} else if healthy == "" {
			healthy = addr
		}
	}
	vk, hk := byNode[victim], byNode[healthy]
	admit := func(key string) slidelog.Result {
		res, err := l.Allow(t.Context(), key)
		require.NoError(t, err)
		require.True(t, res.Allowed)
		require.Equal(t, redisstore.Source, res.Source)
		return res
	}
	victimRes := []slidelog.Result{admit(vk[0]), admit(vk[1]), admit(vk[2])}
	healthyRes := admit(hk[0])

	// The node hangs, its breaker closed: each call ends with the caller's
	// context, and the cancellations leave the breaker closed.
	fnet.victim.Store(victim)
	fnet.mode.Store(netHang)
	calls := map[string]func(ctx context.Context, i int) error{
		"Refund": func(ctx context.Context, i int) error { return l.Refund(ctx, victimRes[i%len(victimRes)]) },
		"Reset":  func(ctx context.Context, i int) error { return l.Reset(ctx, vk[3+i%5]) },
		"Peek": func(ctx context.Context, i int) error {
			_, err := l.Peek(ctx, vk[3+i%5])
			return err
		},
	}
	for name, call := range calls {
		for i := range 4 { // more than ConsecutiveFailures
			ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
			start := time.Now()
			err := call(ctx, i)
			took := time.Since(start)
			cancel()
			assert.ErrorIs(t, err, context.DeadlineExceeded, "%s on a hung node", name)
			assert.Less(t, took, 400*time.Millisecond, "%s on a hung node: got %v, want the caller's 100 ms (the client's read timeout is 500 ms)", name, took)
		}
		assert.Equal(t, "closed", slidelog.BreakerStates(l)[victim], "%s: the caller's cancellation does not count against the node", name)
	}

	// The node refuses: store errors of Reset alone open its breaker.
	fnet.mode.Store(netRefuse)
	for i := range 3 {
		err := l.Reset(t.Context(), vk[3+i])
		require.Error(t, err, "Reset on a refusing node")
		assert.NotErrorIs(t, err, gobreaker.ErrOpenState, "Reset %d reached the node", i)
	}
	require.Equal(t, "open", slidelog.BreakerStates(l)[victim], "three failed Resets open the node's breaker")

	// Open: every call fails at once with a decision's error, even though
	// the node now hangs (a call that reached it would wait 500 ms).
	fnet.mode.Store(netHang)
	_, decisionErr := l.Allow(t.Context(), vk[4])
	require.ErrorIs(t, decisionErr, slidelog.ErrUnavailable)
	require.ErrorIs(t, decisionErr, gobreaker.ErrOpenState)
	for name, call := range calls {
		start := time.Now()
		err := call(t.Context(), 0)
		took := time.Since(start)
		assert.ErrorIs(t, err, slidelog.ErrUnavailable, name)
		assert.ErrorIs(t, err, gobreaker.ErrOpenState, name)
		if err != nil {
			assert.Equal(t, decisionErr.Error(), err.Error(), "%s: got another error than a decision's", name)
		}
		assert.Less(t, took, 250*time.Millisecond, "%s with an open breaker: got %v, want no wait on the node", name, took)
	}

	// The other nodes' keys are served as ever.
	_, err = l.Peek(t.Context(), hk[1])
	assert.NoError(t, err, "Peek on a healthy node")
	assert.NoError(t, l.Refund(t.Context(), healthyRes), "Refund on a healthy node")
	assert.NoError(t, l.Reset(t.Context(), hk[2]), "Reset on a healthy node")
	assert.Equal(t, "closed", slidelog.BreakerStates(l)[healthy])

	// Healed: go-redis's redial loop, started by the refused dials, ends
	// once a dial succeeds (a second apart), before the leak check.
	fnet.mode.Store(netOK)
	require.Eventually(t, func() bool {
		buf := make([]byte, 1<<20)
		return !bytes.Contains(buf[:runtime.Stack(buf, true)], []byte("(*ConnPool).tryDial"))
	}, 5*time.Second, 50*time.Millisecond, "go-redis redials the healed node")
}

// TestWaitingRuleNoLimiterDeadline: a Refund waits as long as the caller's
// context and the store allow, as a decision does, with no deadline of the
// limiter's own (it used to end every Refund after 1 s): on a node that
// answers this client 1.5 s late (a delay on the client's side, so that
// the shared server stays fast for other tests), with a stall timeout
// longer than that, the Refund completes and its entry is gone.
func TestWaitingRuleNoLimiterDeadline(t *testing.T) {
	slow := &slowNet{}
	opts := redisstore.ClientOptions(standaloneAddr(t))
	opts.ReadTimeout = 5 * time.Second
	opts.Dialer = slow.dial
	client := redis.NewClient(opts)
	t.Cleanup(func() { _ = client.Close() })
	store := newRedisStore(t, client, redisstore.WithStallTimeout(3*time.Second))
	l, err := slidelog.New(store, slidelog.PerMinute(1), slidelog.WithFailureMode(slidelog.FailError))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	res, err := l.Allow(t.Context(), "k")
	require.NoError(t, err)
	require.True(t, res.Allowed)

	slow.delay.Store(int64(1500 * time.Millisecond))
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Second)
	defer cancel()
	start := time.Now()
	err = l.Refund(ctx, res)
	took := time.Since(start)
	slow.delay.Store(0)
	require.NoError(t, err, "Refund from a node 1.5 s late, with a 4 s context (took %v)", took)
	assert.Greater(t, took, time.Second, "the Refund waited for the late node")
	again, err := l.Allow(t.Context(), "k")
	require.NoError(t, err)
	assert.True(t, again.Allowed, "the refunded entry is gone: a limit of 1 admits again")
}

// TestStalledNodeEndsEveryCall: Refund, Reset and Peek are bounded by the
// store's stall judgement, as a decision is, not by the client's timeouts:
// on a node that stops answering this client (read timeout 10 s, the
// caller's context 8 s), each fails with ErrStalled (an ErrUnavailable)
// within a few stall timeouts.
func TestStalledNodeEndsEveryCall(t *testing.T) {
	fnet := &faultyNet{}
	addr := standaloneAddr(t)
	opts := redisstore.ClientOptions(addr)
	opts.ReadTimeout, opts.WriteTimeout = 10*time.Second, 10*time.Second
	opts.Dialer = fnet.dial
	client := redis.NewClient(opts)
	t.Cleanup(func() { _ = client.Close() })
	store := newRedisStore(t, client)
	l, err := slidelog.New(store, slidelog.Policy{Name: "p", Limit: 1000, Window: time.Minute},
		slidelog.WithFailureMode(slidelog.FailError),
		slidelog.WithBreaker(slidelog.BreakerSettings{ConsecutiveFailures: 100, OpenTimeout: time.Minute}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	res, err := l.Allow(t.Context(), "k")
	require.NoError(t, err)
	require.True(t, res.Allowed)

	fnet.victim.Store(addr)
	fnet.mode.Store(netHang)
	calls := map[string]func(ctx context.Context) error{
		"Allow": func(ctx context.Context) error {
			_, err := l.Allow(ctx, "j")
			return err
		},
		"Refund": func(ctx context.Context) error { return l.Refund(ctx, res) },
		"Reset":  func(ctx context.Context) error { return l.Reset(ctx, "r") },
		"Peek": func(ctx context.Context) error {
			_, err := l.Peek(ctx, "k")
			return err
		},
	}
	for _, name := range []string{"Allow", "Refund", "Reset", "Peek"} {
		ctx, cancel := context.WithTimeout(t.Context(), 8*time.Second)
		start := time.Now()
		err := calls[name](ctx)
		took := time.Since(start)
		cancel()
		// ErrStalled, also for a call whose round trip was in flight
		// when the verdict broke its connection off.
		assert.ErrorIs(t, err, slidelog.ErrUnavailable, "%s on a stalled node", name)
		assert.ErrorIs(t, err, slidelog.ErrStalled, "%s on a stalled node", name)
		assert.NotErrorIs(t, err, context.DeadlineExceeded, "%s on a stalled node: ended by the caller's context, not by the store", name)
		assert.Less(t, took, 4*time.Second, "%s on a stalled node: got %v, want the stall judgement (150 ms), not the client's 10 s read timeout", name, took)
	}
	fnet.mode.Store(netOK)
}

// slowNet delays every read of its connections by delay (nanoseconds)
// while it is set: a node that answers late, for one client only.
type slowNet struct{ delay atomic.Int64 }

func (s *slowNet) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &slowConn{Conn: c, net: s}, nil
}

type slowConn struct {
	net.Conn
	net *slowNet
}

func (c *slowConn) Read(b []byte) (int, error) {
	if d := c.net.delay.Load(); d > 0 {
		time.Sleep(time.Duration(d))
	}
	return c.Conn.Read(b)
}

// standaloneAddr returns the standalone test Redis's address, failing the
// test when there is none.
func standaloneAddr(t *testing.T) string {
	t.Helper()
	return redistest.RedisClient(t).Options().Addr
}
