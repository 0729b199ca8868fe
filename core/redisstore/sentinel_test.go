package redisstore_test

import (
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
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

// Connect takes a redis+sentinel:// URL and returns a failover client
// with the recommended options; the store decides through it, names the
// master's address in routes and errors, and follows the master when the
// Sentinels fail it over.
func TestConnectSentinel(t *testing.T) {
	t.Parallel() // servers of its own: see ownServers
	bed := redistest.StartSentinels(t, redistest.SentinelConfig{})
	first := bed.Master.Addr

	client, err := redisstore.Connect(t.Context(), bed.URL())
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	c, ok := client.(*redis.Client)
	require.True(t, ok, "got %T, want a failover *redis.Client", client)
	o := c.Options()
	assert.Equal(t, "FailoverClient", o.Addr)
	assert.True(t, o.ContextTimeoutEnabled)
	assert.Equal(t, 500*time.Millisecond, o.ReadTimeout)
	assert.Equal(t, 500*time.Millisecond, o.DialTimeout)

	store, err := redisstore.New(client, redisstore.WithKeyPrefix("sentinel:"), redisstore.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	p := slidelog.Policy{Name: "p", Limit: 5, Window: time.Minute}
	obs := &breakerObserver{}
	limLogs := &captured{}
	l, err := slidelog.New(store, p, slidelog.WithName("sentinel"), slidelog.WithFailureMode(slidelog.FailError), slidelog.WithDenyCache(0),
		slidelog.WithObserver(obs), slidelog.WithLogger(slog.New(limLogs)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })

	route := func() string {
		return store.Route(t.Context(), slidelog.Request{Namespace: "sentinel", Key: "k"}).Node
	}
	assert.Equal(t, first, route(), "the route names the master's address")
	for i := range 6 {
		res, err := l.AllowN(t.Context(), "k", 1)
		require.NoError(t, err)
		assert.Equal(t, slidelog.Source("redis"), res.Source)
		assert.Equal(t, i < 5, res.Allowed, "decision %d", i)
	}

	// A stalled master (for less than the Sentinels' down-after): the
	// store's error, the limiter's log and its breaker name its address.
	require.NoError(t, bed.Master.Signal(syscall.SIGSTOP))
	stopAt := time.Now()
	_, err = store.Take(t.Context(), slidelog.Request{Namespace: "sentinel", Key: "stall", Cost: 1, Policies: []slidelog.Policy{p}, ID: 1})
	for range 5 {
		_, _ = l.AllowN(t.Context(), "stall", 1)
	}
	require.NoError(t, bed.Master.Signal(syscall.SIGCONT))
	stopped := time.Since(stopAt).Round(time.Millisecond)
	require.ErrorIs(t, err, slidelog.ErrStalled)
	assert.Contains(t, err.Error(), first, "a stalled master's error names it")
	assert.Contains(t, strings.Join(limLogs.all(), "\n"), "node="+first, "the limiter's failure-mode log names the master")
	assert.Contains(t, obs.nodes(), first, "the breaker's node is the master")
	assert.NotContains(t, obs.nodes(), "FailoverClient")

	// A planned failover: the route and the decisions follow the new
	// master.
	sc := redis.NewSentinelClient(&redis.Options{Addr: bed.Sentinels[0].Addr})
	t.Cleanup(func() { _ = sc.Close() })
	// A Sentinel refuses a failover (NOGOODSLAVE) while its own records
	// show no replica fit to promote (by their age and the replica's last
	// replies); once, beside two CPU hogs, right after the stall above.
	// It is asked again until it agrees, for up to 20 s.
	var refusals []string
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		err := sc.Failover(t.Context(), "mymaster").Err()
		if err == nil {
			break
		}
		refusals = append(refusals, err.Error())
		require.True(t, time.Now().Before(end), "SENTINEL FAILOVER refused for 20 s (master stopped for %v above): %v", stopped, refusals)
	}
	if len(refusals) > 0 {
		t.Logf("SENTINEL FAILOVER refused %d times before it was accepted (master stopped for %v above): %s", len(refusals), stopped, refusals[0])
	}
	require.Eventually(t, func() bool { return bed.MasterAddr(t.Context()) == bed.Replica.Addr }, 20*time.Second, 50*time.Millisecond)
	require.Eventually(t, func() bool {
		_, err := l.AllowN(t.Context(), "after", 1)
		return err == nil && route() == bed.Replica.Addr
	}, 10*time.Second, 50*time.Millisecond, "the route still names %s, want the new master %s", route(), bed.Replica.Addr)
	res, err := l.AllowN(t.Context(), "after", 1)
	require.NoError(t, err)
	assert.True(t, res.Allowed)
	assert.Equal(t, slidelog.Source("redis"), res.Source)

	// The new master dies (kill -9): the Sentinels promote the first one
	// back, and the route follows it there.
	bed.Replica.Kill()
	killed := time.Now()
	require.Eventually(t, func() bool {
		_, err := l.AllowN(t.Context(), "killed", 1)
		return err == nil && route() == first
	}, 30*time.Second, 100*time.Millisecond, "the route names %s, want %s after the master's death", route(), first)
	t.Logf("back on Redis, at %s, %v after kill -9", first, time.Since(killed).Round(100*time.Millisecond))
	assert.Contains(t, obs.nodes(), bed.Replica.Addr, "the dead master's breaker")
}

// Connect's Sentinel URLs: what is malformed or names no master fails
// with the address and the cause, passwords hidden.
func TestConnectSentinelErrors(t *testing.T) {
	t.Parallel() // servers of its own: see ownServers
	bed := redistest.StartSentinels(t, redistest.SentinelConfig{})
	dead := closedAddr(t)
	s0 := bed.Sentinels[0].Addr
	for _, tt := range []struct {
		give     string
		wantErr  error
		wantText []string
	}{
		{"redis+sentinel://" + s0, redisstore.ErrUnreachable, []string{"no master name"}},
		{"redis+sentinel://" + s0 + "/nosuch", redisstore.ErrUnreachable, []string{s0, `no master named "nosuch"`}},
		{"redis+sentinel://" + dead + "/mymaster", redisstore.ErrUnreachable, []string{dead, "refused"}},
		{"redis+sentinel://127.0.0.1/mymaster", redisstore.ErrUnreachable, []string{"missing port"}},
		{"redis+sentinel://u:secret@" + s0 + "/mymaster?foo=1", redisstore.ErrUnreachable, []string{`unknown parameter "foo"`}},
		{"redis+sentinel://" + bed.Master.Addr + "/mymaster", redisstore.ErrTopology, []string{bed.Master.Addr, "not a Sentinel"}},
	} {
		t.Run(tt.give, func(t *testing.T) {
			start := time.Now()
			c, err := redisstore.Connect(t.Context(), tt.give)
			require.Error(t, err, "got a client, want an error")
			assert.Nil(t, c)
			t.Logf("Connect: %v", err)
			assert.ErrorIs(t, err, tt.wantErr)
			for _, w := range tt.wantText {
				assert.Contains(t, err.Error(), w)
			}
			assert.NotContains(t, err.Error(), "secret")
			assert.Less(t, time.Since(start), startBound)
		})
	}
	// A Sentinel URL among other addresses.
	_, err := redisstore.Connect(t.Context(), bed.URL(), bed.Master.Addr)
	assert.ErrorIs(t, err, redisstore.ErrTopology)
}

// A replica's address and a Sentinel's port fail Connect and New with
// ErrTopology, naming the address and what it is.
func TestStartRefusesReplicaAndSentinel(t *testing.T) {
	t.Parallel() // servers of its own: see ownServers
	bed := redistest.StartSentinels(t, redistest.SentinelConfig{})
	for _, tt := range []struct {
		name, addr, want string
	}{
		{"replica", bed.Replica.Addr, "is a read-only replica"},
		{"sentinel", bed.Sentinels[0].Addr, "is a Sentinel: use redis+sentinel://"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := redisstore.Connect(t.Context(), tt.addr)
			require.ErrorIs(t, err, redisstore.ErrTopology)
			assert.Contains(t, err.Error(), tt.addr+" "+tt.want)

			client := redis.NewClient(redisstore.ClientOptions(tt.addr))
			t.Cleanup(func() { _ = client.Close() })
			s, err := redisstore.New(client, redisstore.WithLogger(slog.New(slog.DiscardHandler)))
			require.ErrorIs(t, err, redisstore.ErrTopology)
			assert.Nil(t, s)
			assert.Contains(t, err.Error(), tt.addr+" "+tt.want)
			assert.False(t, errors.Is(err, redisstore.ErrUnreachable), "got %v, want no ErrUnreachable", err)
		})
	}

	t.Run("ClusterClient on a sentinel", func(t *testing.T) {
		client := redis.NewClusterClient(redisstore.ClusterOptions(bed.Sentinels[1].Addr))
		t.Cleanup(func() { _ = client.Close() })
		_, err := redisstore.New(client, redisstore.WithLogger(slog.New(slog.DiscardHandler)))
		require.ErrorIs(t, err, redisstore.ErrTopology)
		assert.Contains(t, err.Error(), bed.Sentinels[1].Addr+" is a Sentinel: use redis+sentinel://")
	})

	// A failover client given a server's address where a Sentinel's is
	// expected never finds a master: New fails with ErrTopology, as
	// Connect does for such a URL, even with WithStartUnreachable (which
	// would otherwise start a store whose every decision goes to the
	// failure mode). A master name no Sentinel knows is said so.
	t.Run("FailoverClient on a server", func(t *testing.T) {
		client := redis.NewFailoverClient(redisstore.FailoverOptions("mymaster", bed.Master.Addr))
		t.Cleanup(func() { _ = client.Close() })
		s, err := redisstore.New(client, redisstore.WithStartUnreachable(), redisstore.WithLogger(slog.New(slog.DiscardHandler)))
		require.ErrorIs(t, err, redisstore.ErrTopology)
		assert.Nil(t, s)
		assert.Contains(t, err.Error(), "is a Redis server, not a Sentinel")
	})
	t.Run("FailoverClient, unknown master name", func(t *testing.T) {
		client := redis.NewFailoverClient(redisstore.FailoverOptions("nosuch", bed.Sentinels[0].Addr))
		t.Cleanup(func() { _ = client.Close() })
		_, err := redisstore.New(client, redisstore.WithLogger(slog.New(slog.DiscardHandler)))
		require.ErrorIs(t, err, redisstore.ErrUnreachable)
		assert.Contains(t, err.Error(), "no Sentinel named a master of the name in FailoverOptions.MasterName")
	})

	// A user without INFO on a replica: the probe's writes answer
	// READONLY.
	t.Run("replica, user without info", func(t *testing.T) {
		admin := redis.NewClient(&redis.Options{Addr: bed.Replica.Addr})
		t.Cleanup(func() { _ = admin.Close() })
		line := slices.DeleteFunc(aclFor(t, admin, "noinfo", "pw"), func(a string) bool { return a == "+info" })
		setUser(t, admin, line)
		o := redisstore.ClientOptions(bed.Replica.Addr)
		o.Username, o.Password = "noinfo", "pw"
		client := redis.NewClient(o)
		t.Cleanup(func() { _ = client.Close() })
		require.Error(t, client.Info(t.Context()).Err(), "the user may not run INFO")
		s, err := redisstore.New(client, redisstore.WithLogger(slog.New(slog.DiscardHandler)))
		require.ErrorIs(t, err, redisstore.ErrTopology)
		assert.Nil(t, s)
		assert.Contains(t, err.Error(), bed.Replica.Addr+" is a read-only replica")
	})
}

// breakerObserver records the nodes of the breaker state changes it sees.
type breakerObserver struct {
	countingObserver
	bmu    sync.Mutex
	states map[string]bool
}

func (o *breakerObserver) Bind(string, func() slidelog.Gauges) (slidelog.LimiterObserver, error) {
	return o, nil
}

func (o *breakerObserver) BreakerState(node string, _ slidelog.BreakerState) {
	o.bmu.Lock()
	defer o.bmu.Unlock()
	if o.states == nil {
		o.states = map[string]bool{}
	}
	o.states[node] = true
}

func (o *breakerObserver) nodes() []string {
	o.bmu.Lock()
	defer o.bmu.Unlock()
	var out []string
	for n := range o.states {
		out = append(out, n)
	}
	return out
}
