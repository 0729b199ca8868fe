package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A call is reused for a later decision once no other goroutine holds it
// (it was sent inline, or its caller saw it answered); a call whose caller
// left before its reply, which a sender may still hold, is not. Were one
// reused too early, a decision would get another's reply. Many limiters
// share one store, each with a limit of its own, so each one's Remaining
// falls in a range no other limiter's can reach; a third of the calls have
// a short deadline, so they queue (a caller with a deadline never reads
// inline) and some callers leave before their reply. Every decision must
// read its own limiter's range, one step lower each time at least.
func TestReusedCallsKeepTheirReplies(t *testing.T) {
	for _, c := range redistest.PlainClients() {
		t.Run(c.Name, func(t *testing.T) {
			// A client that has sent nothing yet, with plain options, so
			// that calls without a deadline may go inline too.
			client := c.New(t)
			store := newRedisStore(t, client)
			reused0 := redisstore.ReusedCalls()
			const workers, decisions = 32, 60
			var wg sync.WaitGroup
			var mu sync.Mutex
			decided, left := 0, 0
			for w := range workers {
				limit := 1000 + 100*w
				l, err := slidelog.New(store, slidelog.Policy{Name: "p", Limit: limit, Window: time.Hour}, slidelog.WithName(fmt.Sprintf("reuse%d", w)))
				require.NoError(t, err)
				t.Cleanup(func() { _ = l.Close() })
				wg.Go(func() {
					last := limit
					for i := range decisions {
						ctx, cancel := t.Context(), context.CancelFunc(func() {})
						if i%3 == 0 {
							ctx, cancel = context.WithTimeout(ctx, time.Duration(rand.IntN(2000))*time.Microsecond)
						}
						if w%2 == 1 {
							// Now and then the pipelines are idle and a
							// call goes inline.
							time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
						}
						res, err := l.Allow(ctx, "k")
						cancel()
						if err != nil {
							assert.ErrorIs(t, err, context.DeadlineExceeded, "worker %d, call %d", w, i)
							mu.Lock()
							left++
							mu.Unlock()
							continue
						}
						assert.Equal(t, redisstore.Source, res.Source, "worker %d, call %d", w, i)
						assert.True(t, res.Allowed, "worker %d, call %d", w, i)
						assert.Less(t, res.Remaining, last, "worker %d, call %d: remaining went up or stayed", w, i)
						assert.GreaterOrEqual(t, res.Remaining, limit-decisions, "worker %d, call %d: another limiter's reply", w, i)
						last = res.Remaining
						mu.Lock()
						decided++
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			reused := redisstore.ReusedCalls() - reused0
			t.Logf("%d decisions, %d calls reused, %d callers left before their reply", decided, reused, left)
			assert.Greater(t, decided, workers*decisions/2)
			if redisstore.UsesLegacyScript(store) {
				// Redis 6.2 has no common path, whose calls are the ones
				// reused: each decision above read its own reply all the same.
				assert.Zero(t, reused, "calls reused on Redis 6.2, which has no common path")
			} else {
				assert.Positive(t, reused, "no call was reused")
			}
			assert.Positive(t, left, "no caller left a queued call")
		})
	}
}
