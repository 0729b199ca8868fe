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

// How often a series is recounted from its buckets when limiters of
// different longest windows share it (docs/algorithm.md). A limiter
// recounts a series whose mark is not after now or more than a quarter of
// its own longest window ahead, and sets the mark a quarter of that
// window later: one whose longest window is 2 s finds the 5 s mark of one
// whose longest is 20 s too far ahead, and the other finds the 0.5 s mark
// due once it passes. Every recount writes the mark, so the test reads it
// after each decision (a test clock, 10 s of decisions, one of each
// limiter every 50 ms): the series shared is recounted at most twice per
// quarter of the shorter window, each limiter's own series alone at most
// once per quarter of its own. Twice when the longer limiter finds the
// mark due first: it recounts and sets the mark 5 s ahead, and the
// shorter one, deciding next, recounts again; once when the shorter
// one finds it first, since the longer one then finds it neither due nor
// too far ahead.
func TestSharedSeriesRecountRate(t *testing.T) {
	const run, step = 10 * time.Second, 50 * time.Millisecond
	shared := slidelog.Policy{Name: "a", Limit: 1_000_000, Window: 2 * time.Second, Precision: 100 * time.Millisecond}
	long := slidelog.Policy{Name: "long", Limit: 1_000_000, Window: 20 * time.Second, Precision: time.Second}
	short := []slidelog.Policy{shared}
	longer := []slidelog.Policy{shared, long}
	cases := []struct {
		name   string
		limits [][]slidelog.Policy
		bound  int // recounts of the shared series in the run, at most
	}{
		{"shorter alone", [][]slidelog.Policy{short}, int(run/(shared.Window/4)) + 1},
		{"longer alone", [][]slidelog.Policy{longer}, int(run/(long.Window/4)) + 1},
		{"both, the shorter first", [][]slidelog.Policy{short, longer}, 2*int(run/(shared.Window/4)) + 2},
		{"both, the longer first", [][]slidelog.Policy{longer, short}, 2*int(run/(shared.Window/4)) + 2},
	}
	for _, topo := range topologies(t) {
		for _, c := range cases {
			t.Run(topo.name+"/"+c.name, func(t *testing.T) {
				clock := newTestClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
				s := newRedisStore(t, topo.client, redisstore.WithClock(clock.Now))
				key := keysOf(s, "recountrate", "k")[3]
				mark := seriesName(shared) + "d"
				id := uint64(0)
				recounts, last := 0, ""
				for start := clock.Now(); clock.Now().Sub(start) < run; clock.Advance(step) {
					for _, policies := range c.limits {
						id++
						res, err := s.Take(t.Context(), slidelog.Request{Namespace: "recountrate", Key: "k", Cost: 1, Policies: policies, ID: id})
						require.NoError(t, err)
						require.True(t, res.Allowed)
						d, err := topo.client.HGet(t.Context(), key, mark).Result()
						require.NoError(t, err, "the series' recount mark %s", mark)
						if d != last {
							recounts++
							last = d
						}
					}
				}
				decisions := int(id)
				t.Logf("%s: the shared series recounted %d times in %v of decisions (%d decisions, one every %v per limiter); bound %d",
					c.name, recounts, run, decisions, step, c.bound)
				assert.GreaterOrEqual(t, recounts, 1, "the first decision recounts (no mark yet)")
				assert.LessOrEqual(t, recounts, c.bound)
			})
		}
	}
}
