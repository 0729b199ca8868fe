package redisstore_test

import (
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/internal/logbuf"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
)

// decision is one answer of the limiter, for the window checker: its
// server time, cost, verdict, and how many losses of the identity's keys
// happened before it.
type decision struct {
	at      time.Time
	cost    int
	allowed bool
	losses  int
}

// decisions is a stream of decisions, its admissions and denials counted.
type decisions struct {
	ds               []decision
	admitted, denied int
}

// add appends res, of cost, decided after losses losses of the identity's
// keys, and counts it admitted or denied.
func (d *decisions) add(res slidelog.Result, cost, losses int) {
	if res.Allowed {
		d.admitted++
	} else {
		d.denied++
	}
	d.ds = append(d.ds, decision{at: res.DecidedAt, cost: cost, allowed: res.Allowed, losses: losses})
}

// checkWindows runs the independent window checker
// (slidelogtest.CheckWindows) for every policy over one identity's
// decisions: the admissions in any window decided after the last loss
// before it hold at most the limit. A loss (a DEL or an eviction of a key
// of the identity) forgets what it held, so the window restarts from what
// remains: admissions before the loss are not counted against later ones,
// and nothing decided after it may exceed the limit.
func checkWindows(t *testing.T, name string, ds []decision, policies []slidelog.Policy) {
	t.Helper()
	var as []slidelogtest.Admission
	for _, d := range ds {
		if d.allowed {
			as = append(as, slidelogtest.Admission{Start: d.at, Cost: d.cost, Epoch: d.losses})
		}
	}
	for _, p := range policies {
		_, over := slidelogtest.CheckWindows(as, p.Limit, p.Window)
		for _, w := range over {
			t.Errorf("%s, policy %s: the window from %v admitted %d units after the last loss, limit %d", name, p.Name, w.From.Format("15:04:05.000000"), w.Units, p.Limit)
		}
	}
}

// keysOf returns the Redis keys of identity in the limiter's namespace.
func keysOf(s *redisstore.Store, namespace, identity string) []string {
	k := s.LogKey(namespace, identity)
	return []string{k, k + ":c", k + ":s", k + ":b", k + ":r"}
}

// DEL of the keys of an identity at random points of a stream of
// decisions, or a string written over them (a key of the wrong type, which
// the store deletes and rebuilds like a lost one): no window decided after
// a loss admits more than the limit, denials stay denials, no decision
// fails, and the identity keeps being limited afterwards.
func TestDamagedKeysHeal(t *testing.T) {
	exact := slidelog.Policy{Name: "s", Limit: 10, Window: time.Second}
	long := slidelog.Policy{Name: "m", Limit: 25, Window: 5 * time.Second}
	bucketed := slidelog.Policy{Name: "b", Limit: 10, Window: time.Second, Precision: 100 * time.Millisecond}
	for _, tt := range []struct {
		name     string
		policies []slidelog.Policy
		maxCost  int
	}{
		{"exact", []slidelog.Policy{exact}, 1},
		{"exact with costs", []slidelog.Policy{exact}, 4},
		{"two policies", []slidelog.Policy{exact, long}, 1},
		{"two policies with costs", []slidelog.Policy{exact, long}, 3},
		{"bucketed", []slidelog.Policy{bucketed}, 1},
		{"bucketed and exact with costs", []slidelog.Policy{bucketed, long}, 2},
	} {
		for topo, client := range topologyClients(t) {
			t.Run(tt.name+"/"+topo, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(len(tt.name)), uint64(len(topo))))
				clock := newTestClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
				s := newRedisStore(t, client, redisstore.WithClock(clock.Now))
				l, err := slidelog.New(s, tt.policies[0], slidelog.WithPolicy(tt.policies[1:]...), slidelog.WithName("damage"), slidelog.WithFailureMode(slidelog.FailError), slidelog.WithDenyCache(0))
				require.NoError(t, err)
				defer l.Close()
				keys := keysOf(s, l.Name(), "id")
				var ds decisions
				losses := 0
				for i := 0; i < 800; i++ {
					clock.Advance(time.Duration(5+rng.IntN(40)) * time.Millisecond)
					if rng.IntN(25) == 0 {
						// Lose one key of the identity, or all of them.
						del := keys
						if rng.IntN(4) != 0 {
							del = []string{keys[rng.IntN(len(keys))]}
						}
						if rng.IntN(2) == 0 {
							require.NoError(t, client.Del(t.Context(), del...).Err())
						} else {
							for _, k := range del {
								require.NoError(t, client.Set(t.Context(), k, "not a log", 0).Err())
							}
						}
						losses++
					}
					cost := 1 + rng.IntN(tt.maxCost)
					res, err := l.AllowN(t.Context(), "id", cost)
					require.NoError(t, err, "decision %d", i)
					ds.add(res, cost, losses)
				}
				t.Logf("%d decisions: %d admitted, %d denied, %d losses", len(ds.ds), ds.admitted, ds.denied, losses)
				require.Positive(t, losses)
				assert.Positive(t, ds.denied, "no denial: the stream never reached the limit, so the check proves nothing")
				assert.Positive(t, ds.admitted)
				checkWindows(t, tt.name, ds.ds, tt.policies)
			})
		}
	}
}

// The case: the log is lost while its state survives. Every
// later request at the limit is denied, none reported admitted.
func TestLostLogIsNotAnAdmission(t *testing.T) {
	client := redistest.RedisClient(t)
	s := newRedisStore(t, client)
	p := slidelog.Policy{Name: "p", Limit: 10, Window: time.Minute}
	l, err := slidelog.New(s, p, slidelog.WithName("lost"), slidelog.WithFailureMode(slidelog.FailError), slidelog.WithDenyCache(0))
	require.NoError(t, err)
	defer l.Close()
	res, err := l.AllowN(t.Context(), "k", 2) // a cost: the log gets its state hash
	require.NoError(t, err)
	require.True(t, res.Allowed)
	keys := keysOf(s, l.Name(), "k")
	require.NoError(t, client.Del(t.Context(), keys[0]).Err())
	admitted := 0
	for range 20 {
		res, err := l.AllowN(t.Context(), "k", 1)
		require.NoError(t, err)
		if res.Allowed {
			admitted++
			continue
		}
		assert.Positive(t, res.RetryAfter, "a denial says when to retry")
	}
	assert.Equal(t, 10, admitted, "20 requests after the log was lost, limit 10")
	n, err := client.ZCard(t.Context(), keys[0]).Result()
	require.NoError(t, err)
	assert.Equal(t, int64(10), n, "every admission is recorded in the log")

	// Only the state lost: costs still count.
	require.NoError(t, client.Del(t.Context(), keys...).Err())
	res, err = l.AllowN(t.Context(), "c", 6)
	require.NoError(t, err)
	require.True(t, res.Allowed)
	require.NoError(t, client.Del(t.Context(), keysOf(s, l.Name(), "c")[2]).Err())
	units := 6
	for range 10 {
		res, err := l.AllowN(t.Context(), "c", 2)
		require.NoError(t, err)
		if res.Allowed {
			units += 2
		}
	}
	assert.LessOrEqual(t, units, 10, "units admitted in the window after the state hash was lost, limit 10")
}

// Under memory pressure with maxmemory-policy allkeys-lru, Redis evicts
// limiter keys on its own. Evictions are seen in order with the decisions
// (keyspace notifications, with a marker published after each decision),
// and the window checker holds with each eviction counted as a loss.
func TestEvictionUnderMemoryPressure(t *testing.T) {
	srv := redistest.StartServer(t, redistest.ServerConfig{Args: []string{
		"--maxmemory", "3mb", "--maxmemory-policy", "allkeys-lru", "--maxmemory-samples", "10", "--notify-keyspace-events", "Ee"}})
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer client.Close()

	// Evictions and markers, in the server's order.
	sub := client.Subscribe(t.Context(), "__keyevent@0__:evicted", "marker")
	defer sub.Close()
	_, err := sub.Receive(t.Context())
	require.NoError(t, err)
	_, err = sub.Receive(t.Context())
	require.NoError(t, err)
	events := sub.Channel(redis.WithChannelSize(1 << 16))

	clock := newTestClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	s, err := redisstore.New(client, redisstore.WithClock(clock.Now), redisstore.WithKeyPrefix("lru:"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	p := slidelog.Policy{Name: "p", Limit: 5, Window: time.Second}
	l, err := slidelog.New(s, p, slidelog.WithName("lru"), slidelog.WithFailureMode(slidelog.FailError), slidelog.WithDenyCache(0))
	require.NoError(t, err)
	defer l.Close()

	// Filler: values that keep the server at maxmemory.
	fill := func(n int) {
		pipe := client.Pipeline()
		for range n {
			pipe.Set(t.Context(), "junk:"+strconv.Itoa(rand.IntN(1<<30)), strings.Repeat("x", 2048), 0)
		}
		_, err := pipe.Exec(t.Context())
		require.NoError(t, err)
	}
	fill(2000)

	const ids = 40
	owner := map[string]int{}
	for id := range ids {
		for _, k := range keysOf(s, l.Name(), strconv.Itoa(id)) {
			owner[k] = id
		}
	}
	perID := make([][]decision, ids)
	losses := make([]int, ids)
	evicted := 0
	drain := func(marker string) {
		for m := range events {
			if m.Channel == "marker" {
				if m.Payload == marker {
					return
				}
				continue
			}
			if id, ok := owner[m.Payload]; ok {
				losses[id]++
				evicted++
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		clock.Advance(time.Duration(1+rng.IntN(6)) * time.Millisecond)
		if i%10 == 0 {
			fill(20)
		}
		id := rng.IntN(ids)
		res, err := l.AllowN(t.Context(), strconv.Itoa(id), 1)
		require.NoError(t, err, "decision %d", i)
		marker := strconv.Itoa(i)
		require.NoError(t, client.Publish(t.Context(), "marker", marker).Err())
		drain(marker)
		// Evictions seen up to this marker happened before this decision
		// or during the commands after the previous one: count them as
		// losses before it.
		perID[id] = append(perID[id], decision{at: res.DecidedAt, cost: 1, allowed: res.Allowed, losses: losses[id]})
	}
	admitted, denied := 0, 0
	for id := range ids {
		for _, d := range perID[id] {
			if d.allowed {
				admitted++
			} else {
				denied++
			}
		}
		checkWindows(t, "identity "+strconv.Itoa(id), perID[id], []slidelog.Policy{p})
	}
	t.Logf("3000 decisions: %d admitted, %d denied, %d limiter keys evicted", admitted, denied, evicted)
	assert.Positive(t, evicted, "no limiter key was evicted: the test proves nothing")
	assert.Positive(t, denied)
}

// A key of the wrong type is the key's own trouble: the store rebuilds it,
// every decision of it still comes from Redis, and the node's breaker,
// which the limiter keeps for every key of the node, never opens (issue
// 29: 50 WRONGTYPE errors used to open it and send 22,121 decisions of
// other keys to the failure mode).
func TestWrongTypeKeyIsRebuilt(t *testing.T) {
	for topo, client := range topologyClients(t) {
		t.Run(topo, func(t *testing.T) {
			s := newRedisStore(t, client)
			var logs logbuf.Buffer
			logger := slog.New(slog.NewTextHandler(&logs, nil))
			l, err := slidelog.New(s, slidelog.Policy{Name: "p", Limit: 1000, Window: time.Minute}, slidelog.WithName("wrongtype"),
				slidelog.WithBreaker(slidelog.BreakerSettings{ConsecutiveFailures: 2}), slidelog.WithLogger(logger))
			require.NoError(t, err)
			defer l.Close()
			keys := keysOf(s, l.Name(), "bad")
			for i := range 50 {
				// A different part of the log each time, the log itself
				// among them.
				require.NoError(t, client.Set(t.Context(), keys[i%len(keys)], "x", 0).Err())
				res, err := l.Allow(t.Context(), "bad")
				require.NoError(t, err)
				require.Equal(t, redisstore.Source, res.Source, "decision %d of the damaged key comes from redis", i)
				require.True(t, res.Allowed, "decision %d", i)
			}
			res, err := l.Allow(t.Context(), "good")
			require.NoError(t, err)
			assert.Equal(t, redisstore.Source, res.Source)
			assert.NotContains(t, logs.String(), "circuit breaker", "no breaker changed state")
			typ, err := client.Type(t.Context(), keys[0]).Result()
			require.NoError(t, err)
			assert.Equal(t, "zset", typ, "the log is a sorted set again")
		})
	}
}
