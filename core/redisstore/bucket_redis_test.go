package redisstore_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
	"github.com/stretchr/testify/require"
)

// bucketModel is a brute-force model of one key under a mix of exact and
// bucketed policies: every admission is kept, and every answer is
// recomputed from the list.
type bucketModel struct {
	policies []slidelog.Policy
	entries  []modelEntry
}

type modelEntry struct {
	id   uint64
	at   int64 // µs
	cost int
}

// floorDiv is floor(a/b) for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// counts reports whether e counts against p at now: for the exact log
// while at > now-W; for buckets while the end of at's bucket is after
// now-W.
func counts(p slidelog.Policy, e modelEntry, now int64) bool {
	w := p.Window.Microseconds()
	if p.Precision == 0 {
		return e.at > now-w
	}
	P := p.Precision.Microseconds()
	return (floorDiv(e.at, P)+1)*P > now-w
}

// leaves is when e stops counting against p.
func leaves(p slidelog.Policy, e modelEntry) int64 {
	w := p.Window.Microseconds()
	if p.Precision == 0 {
		return e.at + w
	}
	P := p.Precision.Microseconds()
	return (floorDiv(e.at, P)+1)*P + w
}

func (m *bucketModel) sum(p slidelog.Policy, now int64) int {
	n := 0
	for _, e := range m.entries {
		if counts(p, e, now) {
			n += e.cost
		}
	}
	return n
}

// take decides like the store and returns the expected policy results.
func (m *bucketModel) take(id uint64, cost int, now int64) (bool, []slidelog.PolicyResult) {
	for _, e := range m.entries {
		if e.id == id {
			return true, m.results(cost, now, true)
		}
	}
	allowed := true
	for _, p := range m.policies {
		if m.sum(p, now)+cost > p.Limit {
			allowed = false
		}
	}
	if allowed {
		m.entries = append(m.entries, modelEntry{id: id, at: now, cost: cost})
	}
	return allowed, m.results(cost, now, allowed)
}

func (m *bucketModel) results(cost int, now int64, allowed bool) []slidelog.PolicyResult {
	var out []slidelog.PolicyResult
	for _, p := range m.policies {
		n := m.sum(p, now)
		r := slidelog.PolicyResult{Policy: p, Remaining: max(0, p.Limit-n), Allowed: true}
		if !allowed && n+cost > p.Limit {
			// The oldest entries leave first: when enough have left.
			need, acc := n+cost-p.Limit, 0
			var counting []modelEntry
			for _, e := range m.entries {
				if counts(p, e, now) {
					counting = append(counting, e)
				}
			}
			sortByAt(counting)
			for _, e := range counting {
				acc += e.cost
				if acc >= need {
					r.RetryAfter = time.Duration(leaves(p, e)-now) * time.Microsecond
					break
				}
			}
			r.Allowed = false
		}
		var newest int64 = -1
		for _, e := range m.entries {
			if counts(p, e, now) && leaves(p, e) > newest {
				newest = leaves(p, e)
			}
		}
		if newest > now {
			r.ResetAfter = time.Duration(newest-now) * time.Microsecond
		}
		out = append(out, r)
	}
	return out
}

func sortByAt(es []modelEntry) {
	for i := 1; i < len(es); i++ {
		for j := i; j > 0 && es[j].at < es[j-1].at; j-- {
			es[j], es[j-1] = es[j-1], es[j]
		}
	}
}

func (m *bucketModel) refund(id uint64) {
	for i, e := range m.entries {
		if e.id == id {
			m.entries = append(m.entries[:i], m.entries[i+1:]...)
			return
		}
	}
}

// TestRedisBucketsMatchModel drives Redis through random takes (costs 1
// to 3, retries of earlier IDs), refunds of recent admissions (each twice)
// and clock moves, on a test clock, under an exact and two bucketed
// policies, and requires the brute-force model's answer at every step:
// the decision, and every policy's Remaining, RetryAfter and ResetAfter.
func TestRedisBucketsMatchModel(t *testing.T) {
	standalone := redistest.RedisClient(t)
	for name, client := range map[string]redis.UniversalClient{
		"Standalone":   standalone,
		"Cluster":      redistest.ClusterClient(t),
		"LegacyScript": standalone, // the Redis 6.2 variant, without #!lua
	} {
		t.Run(name, func(t *testing.T) {
			for _, policies := range [][]slidelog.Policy{
				{{Name: "short", Limit: 8, Window: time.Second, Precision: 100 * time.Millisecond}},
				{
					{Name: "exact", Limit: 12, Window: 2 * time.Second},
					{Name: "short", Limit: 8, Window: time.Second, Precision: 100 * time.Millisecond},
					{Name: "long", Limit: 20, Window: 3 * time.Second, Precision: 700 * time.Millisecond},
				},
			} {
				t.Run(policies[len(policies)-1].Name, func(t *testing.T) {
					testBucketsMatchModel(t, client, policies, name == "LegacyScript")
				})
			}
		})
	}
}

func testBucketsMatchModel(t *testing.T, client redis.UniversalClient, policies []slidelog.Policy, legacy bool) {
	// Not aligned to any bucket, so that bucket edges fall between steps.
	clock := slidelogtest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 123_457_000, time.UTC))
	red := newRedisStore(t, client, redisstore.WithClock(clock.Now))
	if legacy {
		redisstore.UseLegacyScript(red)
	}
	models := map[string]*bucketModel{}
	type sent struct {
		req slidelog.Request
		at  int64
	}
	var history []sent
	rng := rand.New(rand.NewPCG(3, 4))
	for step := range 1500 {
		key := []string{"a", "b"}[rng.IntN(2)]
		if models[key] == nil {
			models[key] = &bucketModel{policies: policies}
		}
		m := models[key]
		now := clock.Now().UnixMicro()
		switch op := rng.IntN(10); {
		case op < 6:
			req := slidelog.Request{Namespace: "n", Key: key, Cost: 1 + rng.IntN(3), Policies: policies, ID: rng.Uint64()}
			if rng.IntN(5) == 0 && len(history) > 0 {
				// A retry: the same call sent again, soon after.
				if h := history[len(history)-1-rng.IntN(min(3, len(history)))]; h.req.Key == key && now-h.at < 500_000 {
					req = h.req
				}
			}
			wantAllowed, want := m.take(req.ID, req.Cost, now)
			got, err := red.Take(t.Context(), req)
			require.NoError(t, err)
			require.Equal(t, wantAllowed, got.Allowed, "step %d: take %+v at %d", step, req, now)
			for i := range want {
				g := got.States()[i]
				require.Equal(t, want[i].Remaining, g.Remaining, "step %d: %s Remaining", step, want[i].Policy)
				require.Equal(t, want[i].RetryAfter, g.RetryAfter, "step %d: %s RetryAfter", step, want[i].Policy)
				require.Equal(t, want[i].ResetAfter, g.ResetAfter, "step %d: %s ResetAfter", step, want[i].Policy)
				require.Equal(t, want[i].Allowed, g.Allowed, "step %d: %s Allowed", step, want[i].Policy)
			}
			if got.Allowed {
				history = append(history, sent{req, now})
			}
		case op < 7 && len(history) > 0:
			// A refund of a recent admission, sent twice: the second
			// changes nothing.
			i := len(history) - 1 - rng.IntN(min(5, len(history)))
			h := history[i]
			if now-h.at > 2_000_000 {
				continue
			}
			history = append(history[:i], history[i+1:]...)
			models[h.req.Key].refund(h.req.ID)
			require.NoError(t, red.Refund(t.Context(), h.req))
			require.NoError(t, red.Refund(t.Context(), h.req))
		default:
			clock.Advance(time.Duration(rng.IntN(150_000)) * time.Microsecond)
		}
	}
}
