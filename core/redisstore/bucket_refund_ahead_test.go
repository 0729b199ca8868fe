package redisstore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
)

// A Record stamped more than the shortest window ahead counts in every
// series as if stamped that window ahead; its Refund (at once, or after
// some of the time has passed) takes it out of the same buckets: every
// series' sum is 0 again and no bucket is left, and the full limit is
// free again.
func TestRefundRecordAhead(t *testing.T) {
	ps := []slidelog.Policy{
		{Name: "s", Limit: 10, Window: time.Second, Precision: 100 * time.Millisecond},
		{Name: "l", Limit: 10, Window: 4 * time.Second, Precision: 700 * time.Millisecond},
	}
	for _, ahead := range []time.Duration{1500 * time.Millisecond, 5 * time.Second} {
		for _, later := range []time.Duration{0, 800 * time.Millisecond} {
			for _, topo := range topologies(t) {
				t.Run(ahead.String()+"/"+later.String()+"/"+topo.name, func(t *testing.T) {
					clock := newTestClock(time.Date(2026, 1, 2, 3, 4, 5, 30_000_000, time.UTC))
					s := newRedisStore(t, topo.client, redisstore.WithClock(clock.Now))
					req := slidelog.Request{Namespace: "refundahead", Key: "k", Cost: 4, Policies: ps, ID: 1}
					require.NoError(t, s.Record(t.Context(), req, clock.Now().Add(ahead)))
					clock.Advance(later)
					require.NoError(t, s.Refund(t.Context(), req))
					key := keysOf(s, "refundahead", "k")[3]
					all, err := topo.client.HGetAll(t.Context(), key).Result()
					require.NoError(t, err)
					for _, p := range ps {
						assert.Equal(t, "0", all[seriesName(p)+"n"], "series %s: %v", p.Name, all)
					}
					peeked, err := s.Peek(t.Context(), slidelog.Request{Namespace: "refundahead", Key: "k", Cost: 1, Policies: ps, ID: 2})
					require.NoError(t, err)
					for i := range ps {
						assert.Equal(t, 10, peeked.Policies[i].Remaining, "policy %s after the refund", ps[i].Name)
					}
				})
			}
		}
	}
}
