package redisstore_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest"
)

// forgedRun fills a window of limit 10 per 10 s with requests of cost,
// one every 50 ms (the clock is the test's), writes val over field of
// the identity's key keys[key], keeps deciding for 60 s (six windows),
// then pauses pause and decides for 20 s more. It returns the admissions
// before and after the pause, and the time of the damage.
func forgedRun(t *testing.T, client redis.UniversalClient, p slidelog.Policy, cost, key int, field, val string, pause time.Duration) (during, after []slidelogtest.Admission, damaged time.Time) {
	t.Helper()
	var us atomic.Int64
	us.Store(time.Now().Truncate(time.Second).UnixMicro())
	s := newRedisStore(t, client, redisstore.WithClock(func() time.Time { return time.UnixMicro(us.Load()) }))
	policies := []slidelog.Policy{p}
	keys := keysOf(s, "forged", "k")
	id := uint64(100)
	take := func(cost int, into *[]slidelogtest.Admission) {
		id++
		res, err := s.Take(t.Context(), slidelog.Request{Namespace: "forged", Key: "k", Cost: cost, Policies: policies, ID: id})
		require.NoError(t, err)
		require.Equal(t, redisstore.Source, res.Source)
		if res.Allowed {
			*into = append(*into, slidelogtest.Admission{Key: "k", Start: res.DecidedAt, Cost: cost})
		}
	}
	if p.Precision == 0 {
		take(2, &during) // the log keeps running sums from here on
	}
	for step := range 1500 {
		us.Add(int64(50 * time.Millisecond / time.Microsecond))
		if step == 300 {
			damaged = time.UnixMicro(us.Load())
			require.NoError(t, client.HSet(t.Context(), keys[key], field, val).Err())
		}
		take(cost, &during)
	}
	us.Add(int64(pause / time.Microsecond))
	for range 400 {
		us.Add(int64(50 * time.Millisecond / time.Microsecond))
		take(cost, &after)
	}
	return during, after, damaged
}

// A weighted log's running sum overwritten with a smaller whole number
// than the count of its window's entries (a stray HSET of 0, or of 2 with
// three entries in the window): every entry costs at least one unit, so
// the script finds the sum short at the next decision and recounts it.
// Before it did so only when a cut passed entries, and the window
// admitted up to twice its limit (20 and 18 units of 10).
func TestForgedWeightedSumBelowCount(t *testing.T) {
	const limit, window = 10, 10 * time.Second
	p := slidelog.Policy{Name: "p", Limit: limit, Window: window}
	for _, topo := range topologies(t) {
		for _, c := range []struct {
			name string
			cost int
			val  string
		}{{"zero", 1, "0"}, {"below", 1, "3"}, {"zeroCost3", 3, "0"}, {"belowCost3", 3, "2"}} {
			t.Run(topo.name+"/"+c.name, func(t *testing.T) {
				during, after, _ := forgedRun(t, topo.client, p, c.cost, 2, "s10000000", c.val, 0)
				fullest, over := slidelogtest.CheckWindows(append(during, after...), limit, window)
				require.Empty(t, over, "a window over the limit")
				require.Equal(t, limit-limit%c.cost, fullest[0].Units, "the key keeps being admitted to its limit")
			})
		}
	}
}
