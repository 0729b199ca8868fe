package redisstore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
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
		for topo, client := range topologyClients(t) {
			t.Run(c.name+"/"+topo, func(t *testing.T) {
				clock := newTestClock(time.Date(2026, 1, 2, 3, 4, 5, 100_000_000, time.UTC))
				s := newRedisStore(t, client, redisstore.WithClock(clock.Now))
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
					clock.Advance(11 * time.Second)
				}
			})
		}
	}
}

// A refund meeting one of the other keys of the identity of the wrong
// type, for the policies that use it: as for the log, the script reads
// it as lost (deletes it and flags the repair), the refund does not fail,
// and it changes what it still finds. Lost costs: the entry counts 1, so
// a sum keeps the rest (over-counts, never under); lost state: the sums
// are rebuilt from the log; lost buckets: the series start empty; lost
// recent admissions: the bucketed refund cannot find the admission, whose
// units stay counted until their bucket leaves the window (changed 0 for
// bucketed policies alone), as a missed refund does (docs/algorithm.md).
func TestRefundWrongTypeOtherKeys(t *testing.T) {
	exact := slidelog.Policy{Name: "e", Limit: 5, Window: 10 * time.Second}
	bucketed := slidelog.Policy{Name: "b", Limit: 5, Window: 10 * time.Second, Precision: time.Second}
	for _, c := range []struct {
		kind      int // index in keysOf
		name      string
		policies  []slidelog.Policy
		changed   int64
		remaining []int // per policy, after a take of 1
	}{
		{1, "costs/exact", []slidelog.Policy{exact}, 1, []int{4}},
		{1, "costs/both", []slidelog.Policy{exact, bucketed}, 1, []int{4, 4}},
		{2, "state/exact", []slidelog.Policy{exact}, 1, []int{4}},
		{2, "state/both", []slidelog.Policy{exact, bucketed}, 1, []int{4, 4}},
		{3, "buckets/bucketed", []slidelog.Policy{bucketed}, 1, []int{4}},
		{3, "buckets/both", []slidelog.Policy{exact, bucketed}, 1, []int{4, 4}},
		{4, "recent/bucketed", []slidelog.Policy{bucketed}, 0, []int{2}},
		{4, "recent/both", []slidelog.Policy{exact, bucketed}, 1, []int{4, 2}},
	} {
		for topo, client := range topologyClients(t) {
			t.Run(c.name+"/"+topo, func(t *testing.T) {
				now := time.Date(2026, 1, 2, 3, 4, 5, 100_000_000, time.UTC)
				s := newRedisStore(t, client, redisstore.WithClock(func() time.Time { return now }))
				req := func(id uint64, cost int) slidelog.Request {
					return slidelog.Request{Namespace: "refundwtk", Key: "k", Cost: cost, Policies: c.policies, ID: id}
				}
				res, err := s.Take(t.Context(), req(1, 2))
				require.NoError(t, err)
				require.True(t, res.Allowed)
				key := keysOf(s, "refundwtk", "k")[c.kind]
				require.NoError(t, client.Set(t.Context(), key, "not a zset or hash", 0).Err())
				_, reply, err := redisstore.ScriptCalls(t.Context(), s, "refund", req(1, 2), 0)
				require.NoError(t, err)
				require.Len(t, reply, 2)
				first, _ := reply[0].(int64)
				assert.Equal(t, c.changed, first&^2, "changed")
				assert.Equal(t, int64(2), first&2, "flagged repaired")
				typ, err := client.Type(t.Context(), key).Result()
				require.NoError(t, err)
				assert.NotEqual(t, "string", typ, "the key is left of the wrong type")
				took, err := s.Take(t.Context(), req(2, 1))
				require.NoError(t, err)
				require.Equal(t, redisstore.Source, took.Source)
				require.True(t, took.Allowed)
				got := []int{took.Remaining}
				if len(c.policies) > 1 {
					got = got[:0]
					for _, p := range took.Policies {
						got = append(got, p.Remaining)
					}
				}
				assert.Equal(t, c.remaining, got, "remaining per policy after a take of 1")
			})
		}
	}
}
