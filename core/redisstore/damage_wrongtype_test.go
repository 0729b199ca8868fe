package redisstore_test

import (
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/internal/logbuf"
	"github.com/slidelog/slidelog/core/redisstore"
)

// A key of the identity written over with a string (a key of the wrong
// type), one kind of key at a time, at random points of a stream of
// decisions on a bucketed and a weighted exact policy, so that all five
// keys exist: the script itself finds it before it writes anything that
// depends on the key, deletes it and goes on as for a lost key, so that
// no run fails part-way (which left an admission out of its bucket, its
// retry finding the ID in the log). Every decision comes from Redis, no
// window decided after the last loss holds more than its limit, the
// store's own rebuild of wrong-typed keys (after a failed run) is never
// needed, and the repair is logged.
func TestWrongTypeKeyFoundByScript(t *testing.T) {
	bucketed := slidelog.Policy{Name: "b", Limit: 10, Window: time.Second, Precision: 100 * time.Millisecond}
	long := slidelog.Policy{Name: "m", Limit: 25, Window: 5 * time.Second}
	policies := []slidelog.Policy{bucketed, long}
	for k, kind := range []string{"log", "costs", "state", "buckets", "recent"} {
		for topo, client := range topologyClients(t) {
			t.Run(kind+"/"+topo, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(k), uint64(len(topo))))
				clock := newTestClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
				var logs logbuf.Buffer
				logger := slog.New(slog.NewTextHandler(&logs, nil))
				s := newRedisStore(t, client, redisstore.WithClock(clock.Now), redisstore.WithLogger(logger))
				l, err := slidelog.New(s, policies[0], slidelog.WithPolicy(policies[1:]...), slidelog.WithName("wrongtype"),
					slidelog.WithFailureMode(slidelog.FailError), slidelog.WithDenyCache(0))
				require.NoError(t, err)
				defer l.Close()
				key := keysOf(s, l.Name(), "id")[k]
				var ds decisions
				losses := 0
				for i := 0; i < 600; i++ {
					clock.Advance(time.Duration(5+rng.IntN(40)) * time.Millisecond)
					if i > 0 && rng.IntN(15) == 0 {
						require.NoError(t, client.Set(t.Context(), key, "not a hash", 0).Err())
						losses++
					}
					cost := 1 + rng.IntN(2)
					res, err := l.AllowN(t.Context(), "id", cost)
					require.NoError(t, err, "decision %d", i)
					require.Equal(t, redisstore.Source, res.Source, "decision %d comes from redis", i)
					ds.add(res, cost, losses)
				}
				t.Logf("%d decisions: %d admitted, %d denied, %d keys of the wrong type", len(ds.ds), ds.admitted, ds.denied, losses)
				require.Positive(t, losses)
				assert.Positive(t, ds.denied)
				assert.Positive(t, ds.admitted)
				checkWindows(t, kind, ds.ds, policies)
				failed := strings.Count(logs.String(), "deleted keys of the wrong type")
				assert.Zero(t, failed, "runs that failed on a key of the wrong type (the store deleted it and ran again)")
				assert.True(t, strings.Contains(logs.String(), "repaired damaged fields"), "the repair is logged")
			})
		}
	}
}
