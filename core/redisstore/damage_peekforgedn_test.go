package redisstore_test

import (
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/internal/logbuf"
	"github.com/slidelog/slidelog/core/redisstore"
)

// Peek after a bucketed series' sum n was forged to 0 in a full window
// (10 per 10 s, precision 1 s, a test clock): Peek never shows more room
// than the decisions then give (takes of cost 1 until one is denied), and
// shows just that room. The decision script rebuilds a sum below the
// units of the bucket of now at once ("now"), and recounts every series
// when the bucket hash's expiry is due to move ("due", 4 s later, the
// bucket of now empty); otherwise it trusts the sum ("trusted", 1 s
// later: not due, the bucket of now empty), the bounded over-admission
// docs/algorithm.md states. Before, Peek trusted the forged sum in all
// three: 10 free in "now" and "due", where the decisions admit none.
func TestPeekForgedBucketSum(t *testing.T) {
	const limit = 10
	const window, prec = 10 * time.Second, time.Second
	p := slidelog.Policy{Name: "b", Limit: limit, Window: window, Precision: prec}
	field := strconv.FormatInt(window.Microseconds(), 10) + "/" + strconv.FormatInt(prec.Microseconds(), 10) + "n"
	for _, c := range []struct {
		name  string
		after time.Duration // from the admissions to the damage
		room  int           // what the decisions give after it
	}{{"now", 0, 0}, {"due", 4 * time.Second, 0}, {"trusted", time.Second, limit}} {
		for topo, client := range topologyClients(t) {
			t.Run(c.name+"/"+topo, func(t *testing.T) {
				clock := newTestClock(time.Date(2026, 1, 2, 3, 4, 5, 100_000_000, time.UTC))
				s := newRedisStore(t, client, redisstore.WithClock(clock.Now))
				req := seqRequests("peekforgedn", p)
				takeAllowed(t, s, limit, req)
				clock.Advance(c.after)
				key := keysOf(s, "peekforgedn", "k")[3]
				require.NoError(t, client.HSet(t.Context(), key, field, "0").Err())
				peeked, err := s.Peek(t.Context(), req())
				require.NoError(t, err)
				admitted := 0
				for admitted <= 2*limit {
					res, err := s.Take(t.Context(), req())
					require.NoError(t, err)
					require.Equal(t, redisstore.Source, res.Source)
					if !res.Allowed {
						break
					}
					admitted++
				}
				t.Logf("peek: %d free; the decisions admitted %d", peeked.Remaining, admitted)
				assert.LessOrEqual(t, peeked.Remaining, admitted, "peek shows more room than the decisions give")
				assert.Equal(t, c.room, admitted, "what the decisions give")
				assert.Equal(t, admitted, peeked.Remaining, "peek shows other room than the decisions give")
			})
		}
	}
}

// Peek of an honest bucketed key when the buckets' expiry is due to move
// and buckets stopped counting since the last decision (10 per 10 s,
// precision 1 s, one admission a second for 5 s, Peek 12 s after the
// first; the buckets of three still count): peek recounts the series as
// the next decision will, finds the sum it holds less the buckets that
// left, so flags nothing (no warning), and shows the room the next take
// finds (its Remaining + 1).
func TestPeekDueRecountHonest(t *testing.T) {
	p := slidelog.Policy{Name: "b", Limit: 10, Window: 10 * time.Second, Precision: time.Second}
	for topo, client := range topologyClients(t) {
		t.Run(topo, func(t *testing.T) {
			clock := newTestClock(time.Date(2026, 1, 2, 3, 4, 5, 100_000_000, time.UTC))
			var logs logbuf.Buffer
			logger := slog.New(slog.NewTextHandler(&logs, nil))
			s := newRedisStore(t, client, redisstore.WithClock(clock.Now), redisstore.WithLogger(logger))
			req := func(id uint64) slidelog.Request {
				return slidelog.Request{Namespace: "peekdue", Key: "k", Cost: 1, Policies: []slidelog.Policy{p}, ID: id}
			}
			for i := range 5 {
				clock.Set(time.Duration(i) * time.Second)
				res, err := s.Take(t.Context(), req(uint64(i+1)))
				require.NoError(t, err)
				require.True(t, res.Allowed)
			}
			clock.Set(12 * time.Second)
			peeked, err := s.Peek(t.Context(), req(100))
			require.NoError(t, err)
			took, err := s.Take(t.Context(), req(101))
			require.NoError(t, err)
			require.True(t, took.Allowed)
			assert.Equal(t, 7, peeked.Remaining, "the buckets of the first two admissions left the window (bucket b counts while (b+1)P > now - W)")
			assert.Equal(t, took.Remaining+1, peeked.Remaining, "peek against the next take")
			assert.NotContains(t, logs.String(), "damaged", "an honest key read as damaged")
		})
	}
}
