package redisstore_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
)

// Peek never shows more room than the next Take gives, on undamaged
// keys: two limiters sharing an identity (series of different windows,
// one shared, their longest windows apart; one has an exact policy too),
// costs 1 to 3, Records stamped up to 3 s ahead or behind, Refunds of
// earlier admissions and records, idle gaps, a test clock. Every Take is
// preceded by a Peek of the same request.
func TestPeekNeverMoreThanTake(t *testing.T) {
	a := []slidelog.Policy{
		{Name: "s", Limit: 6, Window: time.Second, Precision: 100 * time.Millisecond},
		{Name: "m", Limit: 9, Window: 2 * time.Second, Precision: 200 * time.Millisecond},
	}
	b := []slidelog.Policy{
		{Name: "l", Limit: 15, Window: 4 * time.Second, Precision: 500 * time.Millisecond},
		{Name: "m", Limit: 9, Window: 2 * time.Second, Precision: 200 * time.Millisecond},
		{Name: "e", Limit: 20, Window: 3 * time.Second},
	}
	for _, topo := range scriptVariants(t) {
		t.Run(topo.name, func(t *testing.T) {
			for seed := uint64(1); seed <= 6; seed++ {
				rng := rand.New(rand.NewPCG(seed, 7))
				clock := newTestClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
				s := newVariantStore(t, topo, redisstore.WithClock(clock.Now))
				id := uint64(0)
				var ids []slidelog.Request
				for step := 0; step < 300; step++ {
					if rng.IntN(20) == 0 {
						clock.Advance(time.Duration(rng.IntN(6000)) * time.Millisecond)
					} else {
						clock.Advance(time.Duration(rng.IntN(120)) * time.Millisecond)
					}
					ps := a
					if rng.IntN(2) == 0 {
						ps = b
					}
					id++
					req := slidelog.Request{Namespace: "peekdiff", Key: "k", Cost: 1 + rng.IntN(3), Policies: ps, ID: id}
					switch r := rng.IntN(10); {
					case r == 0:
						at := clock.Now().Add(time.Duration(rng.IntN(6000)-3000) * time.Millisecond)
						require.NoError(t, s.Record(t.Context(), req, at))
						ids = append(ids, req)
						continue
					case r == 1 && len(ids) > 0:
						old := ids[rng.IntN(len(ids))]
						require.NoError(t, s.Refund(t.Context(), old))
					}
					peeked, err := s.Peek(t.Context(), req)
					require.NoError(t, err)
					took, err := s.Take(t.Context(), req)
					require.NoError(t, err)
					if took.Allowed {
						ids = append(ids, req)
					}
					if peeked.Allowed && !took.Allowed {
						t.Fatalf("seed %d step %d: peek allowed cost %d, take denied (peek %+v take %+v)", seed, step, req.Cost, peeked.Policies, took.Policies)
					}
					for i := range ps {
						back := 0
						if took.Allowed {
							back = req.Cost
						}
						if peeked.Policies[i].Remaining > took.Policies[i].Remaining+back {
							t.Fatalf("seed %d step %d policy %s: peek %d free, take then %d (cost %d, allowed %v)", seed, step, ps[i].Name, peeked.Policies[i].Remaining, took.Policies[i].Remaining, req.Cost, took.Allowed)
						}
					}
				}
			}
		})
	}
}
