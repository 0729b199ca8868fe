package redisstore_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
)

// Peek after a bucketed series' sum n was forged above its buckets' (10
// per 10 s, precision 1 s, a test clock: 5 admitted, n forged to 10),
// read when buckets stopped counting since the last decision and fewer
// still count than left (so Peek adds up what counts) and the recount is
// not due: the next decision subtracts what left from the forged sum and
// denies (a number above the truth only denies), so Peek must not show
// the room the buckets hold either.
func TestPeekForgedSumAbove(t *testing.T) {
	p := slidelog.Policy{Name: "b", Limit: 10, Window: 10 * time.Second, Precision: time.Second}
	field := strconv.FormatInt(p.Window.Microseconds(), 10) + "/" + strconv.FormatInt(p.Precision.Microseconds(), 10) + "n"
	for topo, client := range topologyClients(t) {
		t.Run(topo, func(t *testing.T) {
			clock := newTestClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
			s := newRedisStore(t, client, redisstore.WithClock(clock.Now))
			req := seqRequests("peekforgedhigh", p)
			takeAllowed(t, s, 5, req)
			// A decision 9.5 s later (a refund of nothing): the recount is
			// due, made, and next due 2.5 s later.
			clock.Set(9500 * time.Millisecond)
			require.NoError(t, s.Refund(t.Context(), req()))
			key := keysOf(s, "peekforgedhigh", "k")[3]
			require.NoError(t, client.HSet(t.Context(), key, field, "10").Err())
			clock.Set(10500 * time.Millisecond)
			peeked, err := s.Peek(t.Context(), req())
			require.NoError(t, err)
			admitted := 0
			for admitted <= 20 {
				res, err := s.Take(t.Context(), req())
				require.NoError(t, err)
				if !res.Allowed {
					break
				}
				admitted++
			}
			t.Logf("peek: %d free (allowed %v); the decisions admitted %d", peeked.Remaining, peeked.Allowed, admitted)
			assert.LessOrEqual(t, peeked.Remaining, admitted, "peek shows more room than the decisions give")
		})
	}
}
