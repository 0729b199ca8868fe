package redisstore_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
)

// A key shared by two limiters of different retentions (a policy change
// rolling out: 10 per 10 min before, 10 per 1 min after). The shorter one
// keeps the longer one's entries by the state's hold or retention mark. A
// stray write into the hold or the mark ("nan") loses what it stood for;
// the repair must not then evict the entries the longer window still
// counts, or the longer limiter admits a second limit in its window.
func TestDamagedMarkKeepsLongerRetention(t *testing.T) {
	long := []slidelog.Policy{{Name: "p", Limit: 10, Window: 10 * time.Minute}}
	short := []slidelog.Policy{{Name: "p", Limit: 10, Window: time.Minute}}
	for _, topo := range scriptVariants(t) {
		for _, field := range []string{"h", "r", "ru"} {
			for _, mode := range []string{"control", "damaged"} {
				t.Run(topo.name+"/"+field+"/"+mode, func(t *testing.T) {
					var us atomic.Int64
					us.Store(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixMicro())
					s := newVariantStore(t, topo, redisstore.WithClock(func() time.Time { return time.UnixMicro(us.Load()) }))
					ns := "marks-" + topo.name + "-" + field + "-" + mode
					keys := keysOf(s, ns, "k")
					id := uint64(100)
					take := func(p []slidelog.Policy) bool {
						id++
						res, err := s.Take(t.Context(), slidelog.Request{Namespace: ns, Key: "k", Cost: 1, Policies: p, ID: id})
						require.NoError(t, err)
						return res.Allowed
					}
					advance := func(d time.Duration) { us.Add(d.Microseconds()) }
					if field != "h" {
						// A first life of the key, whose hold (the long
						// limiter's plain expiry, seen by the short one)
						// passes: then the long limiter's retention
						// mark alone keeps its entries.
						require.True(t, take(long))
						require.True(t, take(short))
						advance(13 * time.Minute)
					}
					// The long limiter fills its window over 5 minutes.
					for range 10 {
						require.True(t, take(long))
						advance(30 * time.Second)
					}
					// The short limiter sees the key: it holds or keeps
					// the long one's entries.
					require.True(t, take(short))
					// In the Legacy variant and after a mark, the state holds h or r/ru.
					all, err := topo.client.HGetAll(t.Context(), keys[2]).Result()
					require.NoError(t, err)
					t.Logf("state: %v", all)
					if _, ok := all[field]; !ok {
						t.Skipf("no %q in the state", field)
					}
					if mode == "damaged" {
						require.NoError(t, topo.client.HSet(t.Context(), keys[2], field, "nan").Err())
					}
					advance(time.Second)
					require.True(t, take(short))
					advance(time.Second)
					// The long window holds 10 of the long limiter and 2 of
					// the short one's: the long limiter denies.
					require.False(t, take(long), "the long limiter admitted over its window's limit")
				})
			}
		}
	}
}
