package redisstore_test

import (
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
)

// A refund whose log is of the wrong type (an operator's SET over it):
// the script reads the log as lost, as a decision does (it deletes it and
// runs again), so the refund neither fails nor leaves the key of the
// wrong type. It cannot find the admission in a lost log: for exact
// policies it reports nothing changed ({0}, flagged repaired), which is
// right; with a bucketed policy it finds the admission among the recent
// ones and takes it out of its bucket, and reports that ({1}). Before,
// the bucket refund ran, then the log's check restarted the run, which
// no longer found the admission: 0 was reported for a refund that
// happened. The next take finds the bucket refunded and the log empty.
func TestRefundWrongTypeLog(t *testing.T) {
	exact := slidelog.Policy{Name: "e", Limit: 5, Window: 10 * time.Second}
	bucketed := slidelog.Policy{Name: "b", Limit: 5, Window: 10 * time.Second, Precision: time.Second}
	for _, c := range []struct {
		name     string
		policies []slidelog.Policy
		changed  int64
	}{
		{"exact", []slidelog.Policy{exact}, 0},
		{"bucketed", []slidelog.Policy{bucketed}, 1},
		{"both", []slidelog.Policy{exact, bucketed}, 1},
	} {
		for topo, client := range map[string]redis.UniversalClient{
			"Standalone": redistest.RedisClient(t),
			"Cluster":    redistest.ClusterClient(t),
		} {
			t.Run(c.name+"/"+topo, func(t *testing.T) {
				var mu sync.Mutex
				now := time.Date(2026, 1, 2, 3, 4, 5, 100_000_000, time.UTC)
				clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
				s := newRedisStore(t, client, redisstore.WithClock(clock))
				req := func(id uint64, cost int) slidelog.Request {
					return slidelog.Request{Namespace: "refundwt", Key: "k", Cost: cost, Policies: c.policies, ID: id}
				}
				log := keysOf(s, "refundwt", "k")[0]
				for _, via := range []string{"script", "Refund"} {
					id := uint64(10)
					if via == "Refund" {
						id = 20
					}
					res, err := s.Take(t.Context(), req(id, 2))
					require.NoError(t, err)
					require.True(t, res.Allowed)
					require.NoError(t, client.Set(t.Context(), log, "not a zset", 0).Err())
					if via == "script" {
						_, reply, err := redisstore.ScriptCalls(t.Context(), s, "refund", req(id, 2), 0)
						require.NoError(t, err, "refund over a log of the wrong type")
						require.Len(t, reply, 2)
						first, _ := reply[0].(int64)
						assert.Equal(t, c.changed, first&^2, "changed")
						assert.Equal(t, int64(2), first&2, "flagged repaired")
					} else {
						require.NoError(t, s.Refund(t.Context(), req(id, 2)), "Refund over a log of the wrong type")
					}
					typ, err := client.Type(t.Context(), log).Result()
					require.NoError(t, err)
					assert.NotEqual(t, "string", typ, "the log is left of the wrong type")
					// Every policy: the refunded 2 units are free (a bucket)
					// or the log was lost (exact): 5 - 1 after a take of 1.
					took, err := s.Take(t.Context(), req(id+1, 1))
					require.NoError(t, err)
					require.Equal(t, redisstore.Source, took.Source)
					require.True(t, took.Allowed)
					if len(c.policies) == 1 {
						assert.Equal(t, 4, took.Remaining)
					}
					for i, p := range took.Policies {
						assert.Equal(t, 4, p.Remaining, "policy %s", c.policies[i].Name)
					}
					// Clean slate for the next round: the next bucket, the log gone.
					require.NoError(t, s.Refund(t.Context(), req(id+1, 1)))
					mu.Lock()
					now = now.Add(11 * time.Second)
					mu.Unlock()
				}
			})
		}
	}
}
