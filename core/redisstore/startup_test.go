package redisstore_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startBound is how long New and Connect may take to give up: their one
// second of start time, with room for a busy machine. Without the bound a
// dial to an unresolvable or black-holed host waits for the resolver and
// the client's retries, several seconds.
const startBound = 4 * time.Second

// closedAddr returns a loopback address where nothing listens: a Redis
// that is down.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// captured is a slog handler that keeps every record.
type captured struct {
	mu      sync.Mutex
	records []slog.Record
}

func (c *captured) Enabled(context.Context, slog.Level) bool { return true }
func (c *captured) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.records = append(c.records, r.Clone())
	return nil
}
func (c *captured) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *captured) WithGroup(string) slog.Handler      { return c }

// errorsLogged returns the text of every ERROR record, attributes included.
func (c *captured) errorsLogged() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, r := range c.records {
		if r.Level < slog.LevelError {
			continue
		}
		var b strings.Builder
		b.WriteString(r.Message)
		r.Attrs(func(a slog.Attr) bool {
			b.WriteString(" " + a.Key + "=" + a.Value.String())
			return true
		})
		out = append(out, b.String())
	}
	return out
}

// Every misconfiguration of issue 18's list fails New at once, with the
// sentinel of its kind and the address in the message.
func TestNewFailsOnMisconfiguredRedis(t *testing.T) {
	standalone := redistest.RedisClient(t).Options().Addr
	clusterSeed := redistest.ClusterClient(t).Options().Addrs[0]
	dead := closedAddr(t)
	for _, tt := range []struct {
		name     string
		give     func() redis.UniversalClient
		wantErr  error
		wantText []string
	}{
		{"redis down", func() redis.UniversalClient { return redis.NewClient(redisstore.ClientOptions(dead)) }, redisstore.ErrUnreachable, []string{dead, "refused"}},
		{"unresolvable host", func() redis.UniversalClient {
			return redis.NewClient(redisstore.ClientOptions("nonexistent.invalid:6379"))
		}, redisstore.ErrUnreachable, []string{"nonexistent.invalid:6379"}},
		{"no port", func() redis.UniversalClient { return redis.NewClient(redisstore.ClientOptions("127.0.0.1")) }, redisstore.ErrUnreachable, []string{"127.0.0.1", "missing port"}},
		{"URL in Addr", func() redis.UniversalClient {
			return redis.NewClient(redisstore.ClientOptions("redis://" + standalone))
		}, redisstore.ErrUnreachable, []string{"redis://" + standalone, "too many colons", "redisstore.Connect"}},
		{"plain go-redis options, redis down", func() redis.UniversalClient { return redis.NewClient(&redis.Options{Addr: dead}) }, redisstore.ErrUnreachable, []string{dead}},
		{"cluster down", func() redis.UniversalClient { return redis.NewClusterClient(redisstore.ClusterOptions(dead)) }, redisstore.ErrUnreachable, []string{dead}},
		{"ClusterClient on a standalone Redis", func() redis.UniversalClient { return redis.NewClusterClient(redisstore.ClusterOptions(standalone)) }, redisstore.ErrTopology, []string{standalone, "cluster support disabled"}},
		{"Client on a Cluster node", func() redis.UniversalClient { return redis.NewClient(redisstore.ClientOptions(clusterSeed)) }, redisstore.ErrTopology, []string{clusterSeed, "Cluster"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			client := tt.give()
			t.Cleanup(func() { _ = client.Close() })
			start := time.Now()
			store, err := redisstore.New(client, redisstore.WithLogger(slog.New(slog.DiscardHandler)))
			took := time.Since(start)
			require.Error(t, err, "got a store, want an error")
			t.Logf("New: %v (after %v)", err, took.Round(time.Millisecond))
			assert.Nil(t, store)
			assert.ErrorIs(t, err, tt.wantErr)
			for _, w := range tt.wantText {
				assert.Contains(t, err.Error(), w)
			}
			assert.Less(t, took, startBound, "New took %v to fail", took)
		})
	}
}

// WithStartUnreachable lets New start without Redis, logging at ERROR
// level; the limiter's decisions then come from the fallback and its
// observers count them. A mismatched client still fails.
func TestNewStartUnreachable(t *testing.T) {
	dead := closedAddr(t)
	client := redis.NewClient(redisstore.ClientOptions(dead))
	t.Cleanup(func() { _ = client.Close() })
	logs := &captured{}
	store, err := redisstore.New(client, redisstore.WithStartUnreachable(), redisstore.WithLogger(slog.New(logs)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	errs := logs.errorsLogged()
	require.Len(t, errs, 1, "got ERROR records %q, want one", errs)
	assert.Contains(t, errs[0], dead)

	obs := &countingObserver{}
	l, err := slidelog.New(store, slidelog.PerMinute(5), slidelog.WithObserver(obs))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	res, err := l.Allow(t.Context(), "client")
	require.NoError(t, err)
	assert.Equal(t, slidelog.SourceFallback, res.Source)
	assert.Equal(t, 1, obs.count(slidelog.SourceFallback), "fallback decisions counted")
	assert.Equal(t, 1, obs.failoverCount(), "failovers counted")

	seed := redistest.RedisClient(t).Options().Addr
	mismatched := redis.NewClusterClient(redisstore.ClusterOptions(seed))
	t.Cleanup(func() { _ = mismatched.Close() })
	_, err = redisstore.New(mismatched, redisstore.WithStartUnreachable(), redisstore.WithLogger(slog.New(slog.DiscardHandler)))
	assert.ErrorIs(t, err, redisstore.ErrTopology)
}

// countingObserver counts decisions by source and failovers.
type countingObserver struct {
	mu        sync.Mutex
	decisions map[slidelog.Source]int
	failovers int
}

func (o *countingObserver) Bind(string, func() slidelog.Gauges) (slidelog.LimiterObserver, error) {
	return o, nil
}

func (o *countingObserver) Decision(source slidelog.Source, _ bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.decisions == nil {
		o.decisions = map[slidelog.Source]int{}
	}
	o.decisions[source]++
}

func (o *countingObserver) Failover(string, slidelog.FailureMode) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.failovers++
}

func (o *countingObserver) count(s slidelog.Source) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.decisions[s]
}

func (o *countingObserver) failoverCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.failovers
}

func (o *countingObserver) StoreCall(string, time.Duration)            {}
func (o *countingObserver) Error(string)                               {}
func (o *countingObserver) BreakerState(string, slidelog.BreakerState) {}
func (o *countingObserver) Unbind()                                    {}

// Connect returns the kind of client the server needs, from host:port or
// a URL, and one Cluster seed is enough.
func TestConnect(t *testing.T) {
	standalone := redistest.RedisClient(t).Options().Addr
	seeds := redistest.ClusterClient(t).Options().Addrs
	for _, tt := range []struct {
		name        string
		give        []string
		wantCluster bool
		wantSeeds   []string
	}{
		{"standalone host:port", []string{standalone}, false, nil},
		{"standalone URL", []string{"redis://" + standalone + "/0"}, false, nil},
		{"one Cluster seed", seeds[:1], true, seeds[:1]},
		{"one Cluster seed as a URL", []string{"redis://" + seeds[0]}, true, seeds[:1]},
		{"every Cluster seed", seeds, true, seeds},
		{"a dead seed first", []string{closedAddr(t), seeds[1]}, true, nil},
		{"a Cluster URL with more nodes", []string{"redis://" + seeds[0] + "?addr=" + seeds[1]}, true, seeds[:2]},
	} {
		t.Run(tt.name, func(t *testing.T) {
			client, err := redisstore.Connect(t.Context(), tt.give...)
			require.NoError(t, err)
			t.Cleanup(func() { _ = client.Close() })
			switch c := client.(type) {
			case *redis.ClusterClient:
				assert.True(t, tt.wantCluster, "got a ClusterClient, want a Client")
				if tt.wantSeeds != nil {
					assert.Equal(t, tt.wantSeeds, c.Options().Addrs)
				}
				assert.GreaterOrEqual(t, c.Options().MaxRedirects, 8)
			case *redis.Client:
				assert.False(t, tt.wantCluster, "got a Client, want a ClusterClient")
				assert.Equal(t, standalone, c.Options().Addr)
				assert.True(t, c.Options().ContextTimeoutEnabled)
			default:
				t.Fatalf("got a %T", client)
			}
			store, err := redisstore.New(client, redisstore.WithKeyPrefix(redistest.KeyPrefix(t, client)))
			require.NoError(t, err, "New on Connect's client")
			t.Cleanup(func() { _ = store.Close() })
			l, err := slidelog.New(store, slidelog.PerMinute(1))
			require.NoError(t, err)
			t.Cleanup(func() { _ = l.Close() })
			for i, want := range []bool{true, false} {
				res, err := l.Allow(t.Context(), "connect")
				require.NoError(t, err)
				assert.Equal(t, want, res.Allowed, "request %d", i+1)
				assert.Equal(t, redisstore.Source, res.Source, "request %d", i+1)
			}
		})
	}
}

// Connect fails with the address and the cause, and never shows a
// password.
func TestConnectErrors(t *testing.T) {
	standalone := redistest.RedisClient(t).Options().Addr
	seed := redistest.ClusterClient(t).Options().Addrs[0]
	dead := closedAddr(t)
	for _, tt := range []struct {
		name     string
		give     []string
		wantErr  error
		wantText []string
	}{
		{"nothing", nil, redisstore.ErrUnreachable, []string{"no address"}},
		{"redis down", []string{dead}, redisstore.ErrUnreachable, []string{dead, "refused"}},
		{"unresolvable host", []string{"nonexistent.invalid:6379"}, redisstore.ErrUnreachable, []string{"nonexistent.invalid:6379"}},
		{"no port", []string{"10.0.0.1"}, redisstore.ErrUnreachable, []string{"10.0.0.1", "missing port"}},
		{"unknown scheme", []string{"http://" + standalone}, redisstore.ErrUnreachable, []string{standalone, "http"}},
		{"password hidden", []string{"redis://user:hunter2@" + dead}, redisstore.ErrUnreachable, []string{dead}},
		{"two standalone addresses", []string{standalone, standalone}, redisstore.ErrTopology, []string{standalone}},
		{"a Cluster URL with a database", []string{"redis://" + seed + "/3"}, redisstore.ErrTopology, []string{seed, "database"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			client, err := redisstore.Connect(t.Context(), tt.give...)
			took := time.Since(start)
			if client != nil {
				_ = client.Close()
			}
			require.Error(t, err)
			t.Logf("Connect: %v", err)
			assert.Nil(t, client)
			assert.True(t, errors.Is(err, tt.wantErr), "got %v, want %v", err, tt.wantErr)
			for _, w := range tt.wantText {
				assert.Contains(t, err.Error(), w)
			}
			assert.NotContains(t, err.Error(), "hunter2")
			assert.Less(t, took, startBound)
		})
	}
}

// A client that talked to Redis before New holds connections the store
// cannot break off when their node stalls, so that node's decisions are
// handed to sender goroutines: New says so, naming the node. A client
// that New gets fresh draws no such warning.
func TestClientUsedBeforeNewIsReported(t *testing.T) {
	const warning = "connections to this node before New"
	for _, tc := range redistest.PlainClients() {
		t.Run(tc.Name, func(t *testing.T) {
			fresh := tc.New(t)
			var logs bytes.Buffer
			_, err := redisstore.New(fresh, redisstore.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			require.NoError(t, err)
			assert.NotContains(t, logs.String(), warning)

			used := tc.New(t)
			require.NoError(t, used.Ping(t.Context()).Err())
			logs.Reset()
			_, err = redisstore.New(used, redisstore.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			require.NoError(t, err)
			assert.Contains(t, logs.String(), warning)
			assert.Contains(t, logs.String(), "node=127.0.0.1:")
		})
	}
}
