package redisstore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
)

// Two limiters share an identity's bucket hash with different series
// (10 per 2 s at precision 100 ms, and 1000 per 2 s at precision 200 ms;
// a test clock). The first one's n is forged to 0 in its full window,
// its bucket of now empty (so only the due recount finds it); then, every
// 50 ms, the second limiter takes, then the first. The recount is due at
// most a quarter of the longest window after the last
// (docs/algorithm.md): 4 s after the damage, the window ending then
// holds at most the limit. Before, the recount mark 'd' was one per hash
// while a decision recounts only its own series: the second limiter
// always found the recount due first, recounted its own series and moved
// 'd', so the first series was never recounted and its window held 20 of
// 10 for as long as the calls went on (the same with the expiry 'x'
// before 'd').
func TestForgedSumHealsBesideAnotherLimiter(t *testing.T) {
	const limit = 10
	const window = 2 * time.Second
	forged := slidelog.Policy{Name: "a", Limit: limit, Window: window, Precision: 100 * time.Millisecond}
	other := slidelog.Policy{Name: "b", Limit: 1000, Window: window, Precision: 200 * time.Millisecond}
	for _, topo := range scriptVariants(t) {
		t.Run(topo.name, func(t *testing.T) {
			clock := newTestClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
			s := newVariantStore(t, topo, redisstore.WithClock(clock.Now))
			id := uint64(0)
			take := func(p slidelog.Policy) bool {
				id++
				res, err := s.Take(t.Context(), slidelog.Request{Namespace: "sharedd", Key: "k", Cost: 1, Policies: []slidelog.Policy{p}, ID: id})
				require.NoError(t, err)
				require.Equal(t, redisstore.Source, res.Source)
				return res.Allowed
			}
			var admitted []time.Time
			for range limit {
				require.True(t, take(forged))
				admitted = append(admitted, clock.Now())
			}
			clock.Advance(150 * time.Millisecond)
			key := keysOf(s, "sharedd", "k")[3]
			require.NoError(t, topo.client.HSet(t.Context(), key, seriesName(forged)+"n", "0").Err())
			damaged := clock.Now()
			for clock.Now().Sub(damaged) < 6*time.Second {
				take(other)
				if take(forged) {
					admitted = append(admitted, clock.Now())
				}
				clock.Advance(50 * time.Millisecond)
			}
			end := clock.Now()
			for _, at := range []time.Duration{4 * time.Second, 5 * time.Second, 6 * time.Second} {
				t0 := damaged.Add(at)
				if t0.After(end) {
					continue
				}
				in := 0
				for _, a := range admitted {
					if a.After(t0.Add(-window)) && !a.After(t0) {
						in++
					}
				}
				assert.LessOrEqual(t, in, limit, "the window ending %v after the damage holds %d of %d", at, in, limit)
			}
		})
	}
}
