package redisstore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
)

// A Record stamped ahead of the server's time (a fallback whose clock
// runs ahead) counts from the call on: exact, until its stamp plus each
// window, so a window ending at its stamp admits at most the limit minus
// its cost; bucketed, stamped more than a window ahead, as if stamped
// one window ahead (as the memory store counts it), so the window ending
// there holds it. Stamped within a window of now and beyond, with a Take
// in between (which reads the series again). Before, a bucketed record
// more than a window and a bucket ahead was read as a damaged bucket by
// that Take and dropped: 15 of 10 in the window at its stamp.
func TestRecordAheadCountsInItsWindow(t *testing.T) {
	const limit, cost = 10, 5
	exact := slidelog.Policy{Name: "e", Limit: limit, Window: time.Second}
	bucketed := slidelog.Policy{Name: "b", Limit: limit, Window: time.Second, Precision: 100 * time.Millisecond}
	for _, p := range []slidelog.Policy{exact, bucketed} {
		for _, ahead := range []time.Duration{500 * time.Millisecond, 1300 * time.Millisecond, 5 * time.Second} {
			for _, topo := range topologies(t) {
				t.Run(p.Name+"/"+ahead.String()+"/"+topo.name, func(t *testing.T) {
					clock := newTestClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
					s := newRedisStore(t, topo.client, redisstore.WithClock(clock.Now))
					req := func(id uint64, c int) slidelog.Request {
						return slidelog.Request{Namespace: "ahead", Key: "k", Cost: c, Policies: []slidelog.Policy{p}, ID: id}
					}
					start := clock.Now()
					at := start.Add(ahead)
					require.NoError(t, s.Record(t.Context(), req(1, cost), at))
					// A take now: the series is read (and, bucketed, checked) again.
					clock.Set(10 * time.Millisecond)
					_, err := s.Take(t.Context(), req(2, 1))
					require.NoError(t, err)
					// At the stamp (bucketed and more than a window ahead:
					// at start plus the window, where it counts), the
					// window ending there holds the record, and the take
					// at start+10ms unless that has left it.
					checkAt, inWindow := at, 0
					if p.Precision > 0 && ahead > p.Window {
						checkAt = start.Add(p.Window)
					}
					if checkAt.Sub(start) < p.Window+10*time.Millisecond {
						inWindow = 1
					}
					clock.Set(checkAt.Add(time.Millisecond).Sub(start))
					admitted := 0
					for i := 0; i < limit; i++ {
						res, err := s.Take(t.Context(), req(uint64(10+i), 1))
						require.NoError(t, err)
						if res.Allowed {
							admitted++
						}
					}
					t.Logf("record of %d stamped %v ahead: %d of %d admitted at %v", cost, ahead, admitted, limit, checkAt.Sub(start))
					assert.LessOrEqual(t, admitted+cost+inWindow, limit, "the window ending at the record's stamp holds %d of %d", admitted+cost+inWindow, limit)
				})
			}
		}
	}
}
