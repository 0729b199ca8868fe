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

// Peek when more buckets stopped counting than the bucket hash holds
// fields (20 per 300 s, precision 1 s, a take every 20 s for 400 s, Peek
// 70 s after the last; the recount mark set 10 s past the Peek, so that
// it is not due): the decision then reads every field (HGETALL) to drop
// them, and rebuilds the sum when a field of the series names no bucket.
// Honest, Peek shows the room the next take finds; with such a field
// ("300000000/1000000:abc") and the sum forged 5 below its buckets', the
// decision rebuilds the sum, and Peek must not show the 5 the forged sum
// would give. Before, Peek read the buckets that left one by one (HMGET),
// never saw the field, and trusted the forged sum.
func TestPeekDropReadsAsDecision(t *testing.T) {
	p := slidelog.Policy{Name: "b", Limit: 20, Window: 300 * time.Second, Precision: time.Second}
	name := seriesName(p)
	for _, forged := range []bool{false, true} {
		for topo, client := range topologyClients(t) {
			t.Run(strconv.FormatBool(forged)+"/"+topo, func(t *testing.T) {
				clock := newTestClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
				s := newRedisStore(t, client, redisstore.WithClock(clock.Now))
				req := seqRequests("peekdrop", p)
				for at := time.Duration(0); at <= 400*time.Second; at += 20 * time.Second {
					clock.Set(at)
					res, err := s.Take(t.Context(), req())
					require.NoError(t, err)
					require.True(t, res.Allowed)
				}
				clock.Set(470 * time.Second)
				key := keysOf(s, "peekdrop", "k")[3]
				fields := []any{name + "d", strconv.FormatInt(clock.Now().Add(10*time.Second).UnixMicro(), 10)}
				if forged {
					n, err := client.HGet(t.Context(), key, name+"n").Int()
					require.NoError(t, err)
					fields = append(fields, name+":abc", "1", name+"n", strconv.Itoa(n-5))
				}
				require.NoError(t, client.HSet(t.Context(), key, fields...).Err())
				peeked, err := s.Peek(t.Context(), req())
				require.NoError(t, err)
				took, err := s.Take(t.Context(), req())
				require.NoError(t, err)
				require.True(t, took.Allowed)
				t.Logf("peek: %d free; the take then: %d free", peeked.Remaining, took.Remaining)
				assert.Equal(t, took.Remaining+1, peeked.Remaining, "peek against the next take")
			})
		}
	}
}
