package slidelog_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Fault modes of faultyNet.
const (
	netOK int32 = iota
	netRefuse
	netHang
)

// faultyNet injects faults on the client side of connections to one
// node, so that tests can break a node of the shared Cluster for their own
// client only.
type faultyNet struct {
	victim atomic.Value // string
	mode   atomic.Int32
}

func (f *faultyNet) broken(addr string) int32 {
	if v, _ := f.victim.Load().(string); v != addr {
		return netOK
	}
	return f.mode.Load()
}

func (f *faultyNet) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if f.broken(addr) == netRefuse {
		return nil, &net.OpError{Op: "dial", Net: network, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return c, err
	}
	return &faultyConn{Conn: c, net: f, addr: addr, closed: make(chan struct{})}, nil
}

type faultyConn struct {
	net.Conn
	net       *faultyNet
	addr      string
	rd        atomic.Int64 // read deadline, unix nanoseconds
	mu        sync.Mutex
	moved     chan struct{} // closed when the read deadline moves, as a socket's wakes its reader
	closed    chan struct{}
	closeOnce sync.Once
}

func (c *faultyConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

func (c *faultyConn) SetDeadline(t time.Time) error {
	c.setRead(t)
	return c.Conn.SetDeadline(t)
}

func (c *faultyConn) SetReadDeadline(t time.Time) error {
	c.setRead(t)
	return c.Conn.SetReadDeadline(t)
}

// setRead moves the read deadline and wakes a read waiting on the old one.
func (c *faultyConn) setRead(t time.Time) {
	c.rd.Store(t.UnixNano())
	c.mu.Lock()
	if c.moved != nil {
		close(c.moved)
		c.moved = nil
	}
	c.mu.Unlock()
}

// deadlineMoved returns a channel closed when the read deadline next moves.
func (c *faultyConn) deadlineMoved() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.moved == nil {
		c.moved = make(chan struct{})
	}
	return c.moved
}

func (c *faultyConn) Read(b []byte) (int, error) {
	switch c.net.broken(c.addr) {
	case netRefuse:
		return 0, os.NewSyscallError("read", syscall.ECONNRESET)
	case netHang: // a stopped server: nothing arrives before the deadline
		for {
			moved := c.deadlineMoved()
			rd := c.rd.Load()
			if rd <= 0 {
				rd = time.Now().Add(10 * time.Second).UnixNano()
			}
			select {
			case <-time.After(time.Until(time.Unix(0, rd))):
				return 0, os.ErrDeadlineExceeded
			case <-c.closed:
				return 0, net.ErrClosed
			case <-moved:
			}
		}
	}
	return c.Conn.Read(b)
}

// keysByNode returns n keys per master of client, by master address.
func keysByNode(t *testing.T, client *redis.ClusterClient, store *redisstore.Store, namespace string, n int) map[string][]string {
	t.Helper()
	out := make(map[string][]string)
	for i := 0; len(out) < 3 || minLen(out) < n; i++ {
		key := fmt.Sprintf("user-%d", i)
		m, err := client.MasterForKey(t.Context(), store.LogKey(namespace, key))
		require.NoError(t, err)
		addr := m.Options().Addr
		if len(out[addr]) < n {
			out[addr] = append(out[addr], key)
		}
		require.Less(t, i, 100000)
	}
	return out
}

func minLen(m map[string][]string) int {
	n := -1
	for _, v := range m {
		if n < 0 || len(v) < n {
			n = len(v)
		}
	}
	return n
}

func clusterAddrs(t *testing.T) []string {
	t.Helper()
	redistest.ClusterClient(t) // fails or skips the test without a Cluster
	return strings.Split(os.Getenv(redistest.EnvClusterAddrs), ",")
}

// TestClusterNodeFaultIsolated breaks one master for this client only
// (refused connections, then a hang like SIGSTOP) and checks that its keys
// go to the fallback by the stall detector, long before the client's own
// 3 s read timeout, while every other key stays on Redis, and that they
// return to Redis when the node heals. The client has go-redis's plain
// options (no context timeouts), as a user who never read about
// slidelog.ClusterOptions would build it.
func TestClusterNodeFaultIsolated(t *testing.T) {
	for _, mode := range []int32{netRefuse, netHang} {
		t.Run(map[int32]string{netRefuse: "refused", netHang: "hung"}[mode], func(t *testing.T) {
			fnet := &faultyNet{}
			client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: clusterAddrs(t), Dialer: fnet.dial})
			t.Cleanup(func() { _ = client.Close() })
			store := newRedisStore(t, client)
			l, err := slidelog.New(store, slidelog.Policy{Name: "p", Limit: 1000, Window: time.Minute},
				slidelog.WithBreaker(slidelog.BreakerSettings{OpenTimeout: 300 * time.Millisecond}))
			require.NoError(t, err)
			t.Cleanup(func() { _ = l.Close() })

			byNode := keysByNode(t, client, store, slidelog.Namespace(l), 20)
			var victim string
			for addr := range byNode {
				victim = addr
				break
			}
			fnet.victim.Store(victim)
			run := func() (sources map[string]map[slidelog.Source]int, slowest time.Duration) {
				sources = make(map[string]map[slidelog.Source]int)
				var mu sync.Mutex
				var wg sync.WaitGroup
				for addr := range byNode {
					sources[addr] = make(map[slidelog.Source]int)
				}
				for addr, keys := range byNode {
					for _, key := range keys {
						wg.Go(func() {
							start := time.Now()
							res, err := l.Allow(t.Context(), key)
							took := time.Since(start)
							mu.Lock()
							defer mu.Unlock()
							assert.NoError(t, err)
							sources[addr][res.Source]++
							slowest = max(slowest, took)
						})
					}
				}
				wg.Wait()
				return sources, slowest
			}
			before, _ := run()
			for addr := range byNode {
				require.Equal(t, 20, before[addr][redisstore.Source], "healthy: all on Redis")
			}

			fnet.mode.Store(mode)
			var slowest time.Duration
			for range 5 {
				sources, s := run()
				slowest = max(slowest, s)
				for addr := range byNode {
					if addr == victim {
						assert.Equal(t, 20, sources[addr][slidelog.SourceFallback], "keys of the broken node fall back: %v", sources[addr])
					} else {
						assert.Equal(t, 20, sources[addr][redisstore.Source], "keys of healthy node %s stay on Redis: %v", addr, sources[addr])
					}
				}
			}
			t.Logf("slowest decision while %s was broken: %v (stall timeout %v)", victim, slowest, redisstore.DefaultStallTimeout)
			// Not a latency target (that is measured by make faults): a
			// decision that waited for the client's 3 s read timeout
			// would mean the stall detector did not act.
			assert.Less(t, slowest, 2*time.Second, "the stall detector, not the read timeout, ends the wait")
			assert.Contains(t, []string{"open", "half-open"}, slidelog.BreakerStates(l)[victim], "the broken node's breaker is not closed")

			fnet.mode.Store(netOK)
			require.Eventually(t, func() bool {
				sources, _ := run()
				return sources[victim][redisstore.Source] == 20
			}, 5*time.Second, 50*time.Millisecond, "the node's keys return to Redis after the breaker's open timeout")
			assert.Equal(t, "closed", slidelog.BreakerStates(l)[victim])
		})
	}
}

func TestCheckRedisConfig(t *testing.T) {
	require.NoError(t, redisstore.CheckConfig(t.Context(), redistest.RedisClient(t)))
	require.NoError(t, redisstore.CheckConfig(t.Context(), redistest.ClusterClient(t)))
	newRedisStore(t, redistest.ClusterClient(t), redisstore.WithStrictConfig()) // noeviction passes the strict check
}

func TestClientOptions(t *testing.T) {
	c := redisstore.ClusterOptions("a:1", "b:2")
	assert.True(t, c.ContextTimeoutEnabled)
	assert.GreaterOrEqual(t, c.MaxRedirects, 8)
	assert.Equal(t, []string{"a:1", "b:2"}, c.Addrs)
	o := redisstore.ClientOptions("a:1")
	assert.True(t, o.ContextTimeoutEnabled)
	assert.Positive(t, o.ReadTimeout)
	assert.LessOrEqual(t, o.ReadTimeout, time.Second)
}

// TestFallbackAdmissionsWrittenBack breaks one master for this client,
// lets the fallback admit a key's whole limit, heals the node, and checks
// that the key's Redis log then holds those admissions: the next request
// is denied by Redis, and a second key, never decided again here, is
// written back by the background flush.
func TestFallbackAdmissionsWrittenBack(t *testing.T) {
	const limit = 5
	fnet := &faultyNet{}
	opts := redisstore.ClusterOptions(clusterAddrs(t)...)
	opts.Dialer = fnet.dial
	client := redis.NewClusterClient(opts)
	t.Cleanup(func() { _ = client.Close() })
	store := newRedisStore(t, client)
	l, err := slidelog.New(store, slidelog.Policy{Name: "p", Limit: limit, Window: time.Minute})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })

	byNode := keysByNode(t, client, store, slidelog.Namespace(l), 3)
	var victim string
	for addr := range byNode {
		victim = addr
		break
	}
	seen, unseen, trigger := byNode[victim][0], byNode[victim][1], byNode[victim][2]
	fnet.victim.Store(victim)
	fnet.mode.Store(netRefuse)
	for _, key := range []string{seen, unseen} {
		for i := range limit {
			res, err := l.Allow(t.Context(), key)
			require.NoError(t, err)
			require.Equal(t, slidelog.SourceFallback, res.Source, "%s call %d while the node is down", key, i)
			require.True(t, res.Allowed, "%s call %d: the fallback admits up to the limit", key, i)
		}
	}
	fnet.mode.Store(netOK)

	// The first Redis decision of seen writes its admissions back first.
	require.Eventually(t, func() bool {
		res, err := l.Allow(t.Context(), seen)
		require.NoError(t, err)
		if res.Source != redisstore.Source {
			return false
		}
		assert.False(t, res.Allowed, "the window after recovery holds the outage's %d admissions", limit)
		return true
	}, 5*time.Second, 20*time.Millisecond)
	n, err := client.ZCard(t.Context(), store.LogKey(slidelog.Namespace(l), seen)).Result()
	require.NoError(t, err)
	assert.Equal(t, int64(limit), n, "the log of the key holds its fallback admissions once")

	// unseen is never decided again: a decision on its node starts the
	// background flush.
	res, err := l.Allow(t.Context(), trigger)
	require.NoError(t, err)
	require.Equal(t, redisstore.Source, res.Source)
	require.Eventually(t, func() bool {
		n, err := client.ZCard(t.Context(), store.LogKey(slidelog.Namespace(l), unseen)).Result()
		return err == nil && n == limit
	}, 5*time.Second, 20*time.Millisecond, "the flush writes unseen's admissions back")

	// Idempotent: writing the same admissions again changes nothing.
	res, err = l.Allow(t.Context(), unseen)
	require.NoError(t, err)
	assert.False(t, res.Allowed)
	n, err = client.ZCard(t.Context(), store.LogKey(slidelog.Namespace(l), unseen)).Result()
	require.NoError(t, err)
	assert.Equal(t, int64(limit), n)
}
