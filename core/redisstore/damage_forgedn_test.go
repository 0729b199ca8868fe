package redisstore_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest"
)

// A bucketed series' sum n overwritten with 0 (a number the script might
// have written, below its buckets' sum by d, the window's units) while a
// client keeps the window full, on the server's clock (the due recount
// follows it): the window holds at most L + d, and only until the series
// is recounted, when the hash's recount mark d is due (at most a quarter
// of the window and a bucket after the last recount); every window
// whose newest admission is decided after that holds at most L. Before,
// the sum was trusted with no end: L + d in every window to the end.
func TestForgedBucketSumBelowBuckets(t *testing.T) {
	const limit = 10
	const window, prec = 2 * time.Second, 200 * time.Millisecond
	p := slidelog.Policy{Name: "b", Limit: limit, Window: window, Precision: prec}
	field := strconv.FormatInt(window.Microseconds(), 10) + "/" + strconv.FormatInt(prec.Microseconds(), 10) + "n"
	for _, topo := range topologies(t) {
		t.Run(topo.name, func(t *testing.T) {
			t.Parallel() // keys of its own; its loop mostly sleeps
			client := topo.client
			s := newRedisStore(t, client)
			key := keysOf(s, "forgedn", "k")[3]
			var as []slidelogtest.Admission
			id := uint64(100)
			var damaged, forged time.Time // on the server's clock, and on this process's
			deficit := 0
			start := time.Now()
			// The sum is forged once the window has been full for a while,
			// at the first take that finds it full (on a busy machine the
			// loop may fall behind and let a few units leave the window),
			// and the takes go on for 3.5 s after it.
			for forged.IsZero() && time.Since(start) < 20*time.Second || !forged.IsZero() && time.Since(forged) < 3500*time.Millisecond {
				if forged.IsZero() && time.Since(start) > 2500*time.Millisecond {
					n, err := client.HGet(t.Context(), key, field).Int()
					require.NoError(t, err)
					if n == limit {
						require.NoError(t, client.HSet(t.Context(), key, field, "0").Err())
						now, err := client.Time(t.Context()).Result()
						require.NoError(t, err)
						damaged, forged, deficit = now, time.Now(), n
					}
				}
				id++
				res, err := s.Take(t.Context(), slidelog.Request{Namespace: "forgedn", Key: "k", Cost: 1, Policies: []slidelog.Policy{p}, ID: id})
				require.NoError(t, err)
				require.Equal(t, redisstore.Source, res.Source)
				if res.Allowed {
					as = append(as, slidelogtest.Admission{Key: "k", Start: res.DecidedAt, Cost: 1})
				}
				time.Sleep(10 * time.Millisecond)
			}
			require.False(t, damaged.IsZero(), "the window was never found full, to forge its sum")
			require.Equal(t, limit, deficit, "the window was full when n was forged")
			// Every window ending at an admission: its units, and the
			// last admission of a window over the limit.
			most, lastOver := fullestWindow(as, window, limit)
			healed := "never over"
			if !lastOver.IsZero() {
				healed = lastOver.Sub(damaged).String()
			}
			t.Logf("%d admissions; fullest window %d of %d (deficit %d); the last window over the limit ends %s after the damage", len(as), most, limit, deficit, healed)
			assert.LessOrEqual(t, most, limit+deficit, "a window over the limit by more than the deficit")
			bound := window/4 + prec
			if !lastOver.IsZero() {
				assert.LessOrEqual(t, lastOver.Sub(damaged), bound, "a window over the limit after the due recount")
			}
		})
	}
}
