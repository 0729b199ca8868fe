package slidelog_test

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMemoryStoreConformance(t *testing.T) {
	slidelogtest.RunStoreSuite(t, func(t *testing.T, clock func() time.Time) slidelog.Store {
		return memstore.New(memstore.WithClock(clock))
	})
}

// The Redis conformance suites make each store on a client of its own,
// as users are told to (redistest.RedisStores): a store on a client that
// other stores used judges a node's silence by its own alive time, not by
// the kernel's record, and beside two CPU hogs and other tests one such
// store judged a rig node stalled (TestStoreConformanceWithoutPipelining,
// a decision of 3,000 by the fallback), which its evidence cannot tell
// from a starved process.
func TestRedisStoreConformance(t *testing.T) {
	slidelogtest.RunStoreSuite(t, redistest.RedisStores(t))
}

func TestClusterStoreConformance(t *testing.T) {
	slidelogtest.RunStoreSuite(t, redistest.ClusterStores(t))
}

func TestStoreConformanceWithoutPipelining(t *testing.T) {
	for name, stores := range map[string]slidelogtest.NewStoreFunc{
		"Standalone": redistest.RedisStores(t, redisstore.WithAutoPipelining(0)),
		"Cluster":    redistest.ClusterStores(t, redisstore.WithAutoPipelining(0)),
	} {
		t.Run(name, func(t *testing.T) { slidelogtest.RunStoreSuite(t, stores) })
	}
}

// A request is one entry whatever its cost: the log holds one member, the
// costs hash one field, and a refund removes both.
func TestRedisCostIsOneEntry(t *testing.T) {
	client := redistest.RedisClient(t)
	s := newRedisStore(t, client)
	l, err := slidelog.New(s, slidelog.Policy{Name: "bytes", Limit: 1_000_000, Window: time.Minute})
	require.NoError(t, err)
	defer l.Close()
	res, err := l.AllowN(t.Context(), "k", 200_000)
	require.NoError(t, err)
	require.True(t, res.Allowed)
	require.Equal(t, 800_000, res.Remaining)
	key := s.LogKey(slidelog.Namespace(l), "k")
	assert.Equal(t, int64(1), client.ZCard(t.Context(), key).Val(), "log entries after one admission of cost 200,000")
	assert.Equal(t, []string{"200000"}, client.HVals(t.Context(), key+":c").Val(), "recorded costs")
	bytes := client.MemoryUsage(t.Context(), key, 0).Val() + client.MemoryUsage(t.Context(), key+":c", 0).Val() + client.MemoryUsage(t.Context(), key+":s", 0).Val()
	t.Logf("one admission of cost 200,000: %d bytes in its three keys", bytes)
	assert.Less(t, bytes, int64(1000))
	for _, k := range []string{key, key + ":c", key + ":s"} {
		ttl := client.PTTL(t.Context(), k).Val()
		// The keys live for the window and up to a quarter more, so that
		// most calls set no expiry.
		assert.True(t, ttl > 59*time.Second && ttl <= 75*time.Second+2*time.Millisecond, "PTTL %s = %v, want the window to 1.25 windows", k, ttl)
	}
	require.NoError(t, l.Refund(t.Context(), res))
	assert.Equal(t, int64(0), client.ZCard(t.Context(), key).Val())
	assert.Equal(t, int64(0), client.HLen(t.Context(), key+":c").Val())
	res, err = l.AllowN(t.Context(), "k", 1_000_000)
	require.NoError(t, err)
	assert.True(t, res.Allowed, "the refund gave back all 200,000 units")
}

// Instances share a budget by sharing a limiter name on a shared Redis;
// another name is another budget. (Two RedisStores stand for two
// processes.)
func TestInstancesShareABudgetByName(t *testing.T) {
	client := redistest.ClusterClient(t)
	prefix := redistest.KeyPrefix(t, client)
	p := slidelog.Policy{Name: "p", Limit: 3, Window: time.Minute}
	var limiters []*slidelog.Limiter
	for _, name := range []string{"api", "api", "other"} {
		s, err := redisstore.New(client, redisstore.WithKeyPrefix(prefix))
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		l, err := slidelog.New(s, p, slidelog.WithName(name))
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Close() })
		limiters = append(limiters, l)
	}
	for i, want := range []bool{true, true, true, false} {
		res, err := limiters[i%2].Allow(t.Context(), "client")
		require.NoError(t, err)
		assert.Equal(t, want, res.Allowed, "call %d of the instances named api", i+1)
	}
	res, err := limiters[2].Allow(t.Context(), "client")
	require.NoError(t, err)
	assert.True(t, res.Allowed, "a limiter with another name has its own budget")
}

// TestStoresAgree drives the memory store and Redis through one random
// sequence of takes (costs 1 to the limit), refunds (with a wrong cost),
// records and clock moves under two policies, and requires the same
// answer from both at every step.
func TestStoresAgree(t *testing.T) {
	for name, client := range map[string]redis.UniversalClient{
		"Standalone": redistest.RedisClient(t),
		"Cluster":    redistest.ClusterClient(t),
	} {
		t.Run(name, func(t *testing.T) {
			clock := slidelogtest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
			mem := newMemoryStore(t, memstore.WithClock(clock.Now))
			red := newRedisStore(t, client, redisstore.WithClock(clock.Now))
			policies := []slidelog.Policy{{Name: "short", Limit: 50, Window: time.Second}, {Name: "long", Limit: 400, Window: 10 * time.Second}}
			rng := rand.New(rand.NewPCG(1, 2))
			var admitted []slidelog.Request
			for step := range 3000 {
				key := []string{"a", "b"}[rng.IntN(2)]
				switch op := rng.IntN(10); {
				case op < 6:
					req := slidelog.Request{Namespace: "n", Key: key, Cost: 1 + rng.IntN(50), Policies: policies, ID: rng.Uint64()}
					if step < 1000 || rng.IntN(3) == 0 {
						req.Cost = 1 // cost-1 logs count entries; the first other cost starts running sums
					}
					a, errA := mem.Take(t.Context(), req)
					b, errB := red.Take(t.Context(), req)
					require.NoError(t, errA)
					require.NoError(t, errB)
					a.Source, a.DecidedAt = "", time.Time{}
					b.Source, b.DecidedAt = "", time.Time{}
					require.Equal(t, a, b, "step %d: take %+v", step, req)
					if a.Allowed {
						admitted = append(admitted, req)
					}
				case op < 7 && len(admitted) > 0:
					i := rng.IntN(len(admitted))
					req := admitted[i]
					admitted = append(admitted[:i], admitted[i+1:]...)
					req.Cost = 1 + rng.IntN(50) // Refund goes by ID, not by this cost
					require.NoError(t, mem.Refund(t.Context(), req))
					require.NoError(t, red.Refund(t.Context(), req))
				case op < 8:
					req := slidelog.Request{Namespace: "n", Key: key, Cost: 1 + rng.IntN(20), Policies: policies, ID: rng.Uint64()}
					if step < 1000 {
						req.Cost = 1
					}
					at := clock.Now().Add(-time.Duration(rng.IntN(12_000)) * time.Millisecond)
					require.NoError(t, mem.Record(t.Context(), req, at))
					require.NoError(t, red.Record(t.Context(), req, at))
				default:
					clock.Advance(time.Duration(rng.IntN(400_000)) * time.Microsecond)
				}
			}
		})
	}
}

// TestDefaultNamespace: without WithName, a limiter on Redis keys its logs
// by the program's path and its policies' names, so the instances of one
// program share a budget and a program that names its limiter as another
// program's default ("p") does not share it; on a memory store, which no
// other program sees, the namespace is the name.
func TestDefaultNamespace(t *testing.T) {
	client := redistest.ClusterClient(t)
	prefix := redistest.KeyPrefix(t, client)
	p := slidelog.Policy{Name: "p", Limit: 2, Window: time.Minute}
	var limiters []*slidelog.Limiter
	for _, opts := range [][]slidelog.Option{nil, nil, {slidelog.WithName("p")}} {
		s, err := redisstore.New(client, redisstore.WithKeyPrefix(prefix))
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		l, err := slidelog.New(s, p, opts...)
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Close() })
		limiters = append(limiters, l)
	}
	// A test binary's main package is named after the package under test
	// ("github.com/slidelog/slidelog/core.test").
	ns := slidelog.Namespace(limiters[0])
	assert.True(t, strings.HasPrefix(ns, "github.com/slidelog/slidelog/core") && strings.HasSuffix(ns, ":p"),
		"got namespace %q, want the program's path, a colon and p", ns)
	assert.Equal(t, "p", limiters[0].Name(), "the name in metrics and logs stays the policies'")
	assert.Equal(t, "p", slidelog.Namespace(limiters[2]))
	for i, want := range []bool{true, true, false} {
		res, err := limiters[i%2].Allow(t.Context(), "client")
		require.NoError(t, err)
		assert.Equal(t, want, res.Allowed, "call %d of two instances of one program", i+1)
	}
	res, err := limiters[2].Allow(t.Context(), "client")
	require.NoError(t, err)
	assert.True(t, res.Allowed, "got a limiter named %q denied by the budget of another program's default", "p")

	mem := slidelog.MustNew(newMemoryStore(t), p)
	t.Cleanup(func() { _ = mem.Close() })
	assert.Equal(t, "p", slidelog.Namespace(mem))
}
