package redisstore_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest"
)

// The due recount heals a series' n forged below its buckets within a
// quarter of the longest window (and a bucket) of the last one. It was
// due when the hash's expiry moved, and a Record stamped ahead moves the
// expiry (its bucket is the series' newest) without a recount: the next
// one waited until the bucket of now caught up. Measured with and
// without a Record stamped 1.5 s ahead (10 per 2 s, precision 200 ms, test clock, n forged
// to its fullest bucket's units in a full window, a take every 150 ms,
// so that the admissions spread over the buckets).
func TestForgedSumHealsDespiteRecordAhead(t *testing.T) {
	const limit = 10
	const window, prec = 2 * time.Second, 200 * time.Millisecond
	p := slidelog.Policy{Name: "b", Limit: limit, Window: window, Precision: prec}
	for _, ahead := range []time.Duration{0, 1500 * time.Millisecond} {
		for _, topo := range topologies(t) {
			t.Run(ahead.String()+"/"+topo.name, func(t *testing.T) {
				client := topo.client
				clock := newTestClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
				s := newRedisStore(t, client, redisstore.WithClock(clock.Now))
				key := keysOf(s, "forgedahead", "k")[3]
				field := seriesName(p) + "n"
				req := func(id uint64) slidelog.Request {
					return slidelog.Request{Namespace: "forgedahead", Key: "k", Cost: 1, Policies: []slidelog.Policy{p}, ID: id}
				}
				var as []slidelogtest.Admission
				id := uint64(100)
				var damaged time.Time
				deficit := 0
				for i := 0; i < 120; i++ {
					if i == 60 {
						if ahead > 0 {
							at := clock.Now().Add(ahead)
							require.NoError(t, s.Record(t.Context(), req(99), at))
							as = append(as, slidelogtest.Admission{Start: at, Cost: 1})
						}
						// n forged to the fullest bucket's units: below the
						// sum, but not below the bucket of now (which is
						// rebuilt at once).
						snap, err := readBuckets(t.Context(), client, key)
						require.NoError(t, err)
						forged := int64(0)
						for _, u := range snap.buckets[seriesName(p)] {
							forged = max(forged, u)
						}
						deficit = int(snap.n[seriesName(p)] - forged)
						require.NoError(t, client.HSet(t.Context(), key, field, forged).Err())
						damaged = clock.Now()
					}
					id++
					res, err := s.Take(t.Context(), req(id))
					require.NoError(t, err)
					if res.Allowed {
						as = append(as, slidelogtest.Admission{Start: res.DecidedAt, Cost: 1})
					}
					clock.Advance(150 * time.Millisecond)
				}
				// Every window ending at an admission: the last one over
				// the limit.
				slices.SortFunc(as, func(a, b slidelogtest.Admission) int { return a.Start.Compare(b.Start) })
				most, lastOver := fullestWindow(as, window, limit)
				healed, ends := time.Duration(0), "none over the limit"
				if !lastOver.IsZero() {
					healed = lastOver.Sub(damaged)
					ends = "the last window over the limit ends " + healed.String() + " after the damage"
				}
				bound := window/4 + prec
				t.Logf("record %v ahead, deficit %d: fullest window %d of %d; %s (bound W/4 + P = %v)", ahead, deficit, most, limit, ends, bound)
				if healed > bound {
					t.Errorf("a window over the limit %v after the damage, past W/4 + P = %v", healed, bound)
				}
			})
		}
	}
}
