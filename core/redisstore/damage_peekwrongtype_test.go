package redisstore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	slidelog "github.com/slidelog/slidelog/core"
)

// Peek on an identity one of whose keys holds another type (an operator's
// SET over it): the decision script reads such a key as lost, so Peek
// reads it so too (it cannot delete it: it writes nothing), instead of
// failing with ErrDamagedKey until a decision of the identity runs. What
// it answers is what the next take of the identity finds; for costs of
// the wrong type, whose entries' costs are unknown, never more room (each
// entry counts the limit, as a damaged cost does).
func TestPeekWrongTypeKey(t *testing.T) {
	exact := slidelog.Policy{Name: "e", Limit: 5, Window: 10 * time.Second}
	bucketed := slidelog.Policy{Name: "b", Limit: 5, Window: 10 * time.Second, Precision: time.Second}
	policies := []slidelog.Policy{exact, bucketed}
	for k, kind := range []string{"log", "costs", "state", "buckets", "recent"} {
		for topo, client := range topologyClients(t) {
			t.Run(kind+"/"+topo, func(t *testing.T) {
				s := newRedisStore(t, client)
				req := func(id uint64) slidelog.Request {
					return slidelog.Request{Namespace: "peekwt", Key: "k", Cost: 2, Policies: policies, ID: id}
				}
				for id := uint64(1); id <= 1; id++ {
					res, err := s.Take(t.Context(), req(id))
					require.NoError(t, err)
					require.True(t, res.Allowed)
				}
				key := keysOf(s, "peekwt", "k")[k]
				require.NoError(t, client.Set(t.Context(), key, "not a zset or hash", 0).Err())
				peeked, err := s.Peek(t.Context(), req(10))
				require.NoError(t, err, "peek on a %s of the wrong type", kind)
				took, err := s.Take(t.Context(), req(11))
				require.NoError(t, err)
				for i := range policies {
					// The take spent 2 of what the peek saw free.
					if kind == "costs" && policies[i].Precision == 0 {
						assert.LessOrEqual(t, peeked.Policies[i].Remaining-2, took.Policies[i].Remaining, "policy %s", policies[i].Name)
						continue
					}
					assert.Equal(t, peeked.Policies[i].Remaining-2, took.Policies[i].Remaining, "policy %s", policies[i].Name)
				}
			})
		}
	}
}
