package redisstore_test

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
	"github.com/stretchr/testify/require"
)

// TestRedisCostOfLargeRequests measures, on a Redis server of the test's
// own, what docs/algorithm.md states beside the log's bytes per entry:
//
//   - the Redis time per call (INFO commandstats, EVALSHA) of requests
//     of cost 1 and of cost 200,000, five in each of 20 logs, the least of
//     five batches of 20: a request of any cost is one entry, so the second
//     costs about what the first does (a special log's work more);
//   - the bytes of one log holding five admissions of cost 200,000;
//   - the bytes a special log's state hash takes, and the bytes per entry
//     of a cost other than 1 that its costs hash takes.
func TestRedisCostOfLargeRequests(t *testing.T) {
	srv := redistest.StartServer(t, redistest.ServerConfig{})
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = client.Close() })
	store := newRedisStore(t, client)
	l, err := slidelog.New(store, slidelog.Policy{Name: "p", Limit: 1_000_000, Window: time.Hour}, slidelog.WithName("cost"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	ctx := t.Context()

	// usecPerCall runs calls after resetting the server's statistics and
	// returns the Redis time per EVALSHA.
	usecPerCall := func(calls int, allow func(i int)) float64 {
		t.Helper()
		require.NoError(t, client.ConfigResetStat(ctx).Err())
		for i := range calls {
			allow(i)
		}
		info, err := client.Info(ctx, "commandstats").Result()
		require.NoError(t, err)
		for line := range strings.SplitSeq(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:"); ok {
				for field := range strings.SplitSeq(v, ",") {
					if u, ok := strings.CutPrefix(field, "usec_per_call="); ok {
						f, err := strconv.ParseFloat(u, 64)
						require.NoError(t, err)
						return f
					}
				}
			}
		}
		t.Fatalf("no cmdstat_evalsha in INFO commandstats:\n%s", info)
		return 0
	}
	admit := func(key string, n int) {
		t.Helper()
		res, err := l.AllowN(ctx, key, n)
		require.NoError(t, err)
		require.True(t, res.Allowed, "cost %d on %s: %+v", n, key, res)
	}
	// Five batches of 20 calls of each cost, the least time per call of
	// each: a batch whose server lost its core for a while (a busy
	// machine) does not count.
	unit, large := math.Inf(1), math.Inf(1)
	for b := range 5 {
		unit = min(unit, usecPerCall(20, func(i int) { admit("unit-"+strconv.Itoa(4*b+i/5), 1) }))
		large = min(large, usecPerCall(20, func(i int) { admit("large-"+strconv.Itoa(4*b+i/5), 200_000) }))
	}
	t.Logf("Redis time per call: cost 1 %.1f µs, cost 200,000 %.1f µs", unit, large)
	require.Less(t, large, 10*unit, "a request of cost 200,000 should cost Redis about what one of cost 1 does")

	// Five admissions of cost 200,000 fill one log of limit 1,000,000.
	five := logBytes(t, client, store.LogKey(l.Name(), "large-0"))
	t.Logf("one log of five admissions of cost 200,000: %d bytes", five)
	require.Less(t, five, int64(2000))

	// A log of cost 1 alone is plain: a sorted set, no state hash. An
	// entry of another cost makes it special: a state hash, and a costs
	// hash holding each such entry's cost (a listpack up to Redis's
	// hash-max-listpack-entries, 128 by default, a hash table beyond).
	var state int64
	for _, entries := range []int{100, 1000} {
		key := "costs-" + strconv.Itoa(entries)
		admit(key, 1)
		if !redisstore.UsesLegacyScript(store) {
			// Redis 6.2 has no PEXPIRETIME: there every log has a state hash.
			require.Zero(t, client.Exists(ctx, store.LogKey(l.Name(), key)+":s").Val(), "a log of cost 1 alone has no state hash")
		}
		for range entries {
			admit(key, 2)
		}
		state, err = client.MemoryUsage(ctx, store.LogKey(l.Name(), key)+":s", 0).Result()
		require.NoError(t, err, "the special log's state hash")
		costs, err := client.MemoryUsage(ctx, store.LogKey(l.Name(), key)+":c", 0).Result()
		require.NoError(t, err, "the special log's costs hash")
		encoding := client.ObjectEncoding(ctx, store.LogKey(l.Name(), key)+":c").Val()
		fields := client.HKeys(ctx, store.LogKey(l.Name(), key)+":s").Val()
		t.Logf("%d entries of cost 2: state hash %d bytes (fields %v); costs hash %d bytes, %.1f per entry (%s)",
			entries, state, fields, costs, float64(costs)/float64(entries), encoding)
		require.Less(t, float64(costs)/float64(entries), 80.0, "the costs hash's bytes per entry")
	}
	require.Less(t, state, int64(300), "the state hash's bytes per log")
}
