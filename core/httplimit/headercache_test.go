package httplimit_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/slidelogtest"
)

// TestPolicyHeaderPerPolicySet: an Engine renders RateLimit-Policy once
// per set of policies and keeps a few; with more sets than it keeps,
// requests of each set, in turn and at once, still get their own
// policies' header, as HeaderFields renders it.
func TestPolicyHeaderPerPolicySet(t *testing.T) {
	const sets = 7
	policies := func(key string) []slidelog.Policy {
		var i int
		if _, err := fmt.Sscanf(key, "ip:192.0.2.%d", &i); err != nil {
			t.Errorf("key %q", key)
		}
		if i%sets == 0 {
			return nil // the limiter's own policy
		}
		return []slidelog.Policy{{Name: "per-minute", Limit: 100 + i%sets, Window: time.Minute}, {Name: fmt.Sprintf("set-%d", i%sets), Limit: 1000, Window: time.Hour}}
	}
	store, _ := newMemory(t)
	l := slidelogtest.NewLimiter(t, store, slidelog.PerMinute(1000), slidelog.WithName("sets"),
		slidelog.WithPolicyFunc(func(_ context.Context, key string) ([]slidelog.Policy, error) { return policies(key), nil }))
	e := newEngine(t, l)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 5 * sets {
				host := 1 + (i+w)%(3*sets)
				d := e.Check(newSource(fmt.Sprintf("192.0.2.%d:1", host)))
				if d.Outcome != httplimit.OutcomeNext {
					t.Errorf("host %d: outcome %v (%v), want next", host, d.Outcome, d.Err)
					return
				}
				want := httplimit.HeaderFields(httplimit.HeadersIETF, d.Result)
				if fmt.Sprint(d.Header) != fmt.Sprint(want) {
					t.Errorf("host %d: header %v, want %v", host, d.Header, want)
				}
			}
		})
	}
	wg.Wait()
}
