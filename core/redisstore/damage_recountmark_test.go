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

// A recount mark written by a hostile hand (a word, "inf", negative, a
// fraction, far ahead, far behind) never keeps the recount from being
// due: with the series' n forged to 0 in a full window (10 per 2 s,
// precision 200 ms, a test clock, the bucket of now empty), the next
// take is denied and writes a mark a quarter of the window ahead; the
// take after it (not due) leaves that mark as it is, so the recount is
// not made on every call.
func TestHostileRecountMark(t *testing.T) {
	p := slidelog.Policy{Name: "b", Limit: 10, Window: 2 * time.Second, Precision: 200 * time.Millisecond}
	name := seriesName(p)
	for _, mark := range []string{"", "word", "inf", "-inf", "nan", "-5", "1.5", "1e400", "99999999999999999999", "far", "0"} {
		for _, topo := range topologies(t) {
			t.Run(mark+"/"+topo.name, func(t *testing.T) {
				clock := newTestClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
				s := newRedisStore(t, topo.client, redisstore.WithClock(clock.Now))
				id := uint64(0)
				take := func() bool {
					id++
					res, err := s.Take(t.Context(), slidelog.Request{Namespace: "hostiled", Key: "k", Cost: 1, Policies: []slidelog.Policy{p}, ID: id})
					require.NoError(t, err)
					return res.Allowed
				}
				for range 10 {
					require.True(t, take())
				}
				clock.Advance(250 * time.Millisecond)
				key := keysOf(s, "hostiled", "k")[3]
				v := mark
				if mark == "far" {
					v = strconv.FormatInt(clock.Now().Add(time.Hour).UnixMicro(), 10)
				}
				fields := []any{name + "n", "0"}
				if mark == "" {
					require.NoError(t, topo.client.HDel(t.Context(), key, name+"d").Err())
				} else {
					fields = append(fields, name+"d", v)
				}
				require.NoError(t, topo.client.HSet(t.Context(), key, fields...).Err())
				assert.False(t, take(), "the forged n was trusted: the recount was not due")
				got, err := topo.client.HGet(t.Context(), key, name+"d").Result()
				require.NoError(t, err)
				want := strconv.FormatInt(clock.Now().Add(p.Window/4).UnixMicro(), 10)
				assert.Equal(t, want, got, "the mark written by the recount")
				clock.Advance(50 * time.Millisecond)
				take()
				again, err := topo.client.HGet(t.Context(), key, name+"d").Result()
				require.NoError(t, err)
				assert.Equal(t, got, again, "a take not due recounted")
			})
		}
	}
}
