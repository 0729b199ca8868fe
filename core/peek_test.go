package slidelog_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
)

// peekStores are the stores Peek is checked on, each with a clock the
// test moves by hand.
func peekStores(t *testing.T) map[string]func(t *testing.T, clock func() time.Time) slidelog.Store {
	return map[string]func(t *testing.T, clock func() time.Time) slidelog.Store{
		"memory": func(t *testing.T, clock func() time.Time) slidelog.Store {
			return newMemoryStore(t, memstore.WithClock(clock))
		},
		"redis": func(t *testing.T, clock func() time.Time) slidelog.Store {
			return newRedisStore(t, redistest.RedisClient(t), redisstore.WithClock(clock))
		},
		"cluster": func(t *testing.T, clock func() time.Time) slidelog.Store {
			return newRedisStore(t, redistest.ClusterClient(t), redisstore.WithClock(clock))
		},
	}
}

// Peek reads, per policy, what a request finds free, and consumes
// nothing: at any moment, Peek's Remaining is the Remaining of the next
// Allow plus its cost when admitted, and Allowed agrees.
func TestPeekAgreesWithAllow(t *testing.T) {
	policySets := map[string][]slidelog.Policy{
		"exact":    {{Name: "s", Limit: 7, Window: 10 * time.Second}},
		"bucketed": {{Name: "day", Limit: 40, Window: 24 * time.Hour, Precision: 15 * time.Minute}},
		"both": {
			{Name: "s", Limit: 5, Window: 10 * time.Second},
			{Name: "m", Limit: 12, Window: time.Minute, Precision: 5 * time.Second},
		},
	}
	for storeName, newStore := range peekStores(t) {
		for setName, ps := range policySets {
			t.Run(storeName+"/"+setName, func(t *testing.T) {
				// Half a second off every window and bucket edge, moved in
				// whole seconds: Redis expires keys by its own clock, so a
				// key whose last entry leaves within milliseconds of the
				// test's clock could vanish between Peek and Allow.
				now := time.Date(2026, 12, 3, 12, 0, 0, 500_000_000, time.UTC)
				clock := func() time.Time { return now }
				store := newStore(t, clock)
				l, err := slidelog.New(store, ps[0], slidelog.WithPolicy(ps[1:]...), slidelog.WithName("peek-"+setName))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = l.Close() })
				ctx := t.Context()
				rng := rand.New(rand.NewPCG(1, 2))
				for step := range 300 {
					now = now.Add(time.Duration(rng.IntN(4)) * time.Second)
					if ps[0].Window == 24*time.Hour {
						now = now.Add(time.Duration(rng.IntN(40)) * time.Minute)
					}
					peek, err := l.Peek(ctx, "client")
					if err != nil {
						t.Fatalf("step %d: peek: %v", step, err)
					}
					again, err := l.Peek(ctx, "client")
					if err != nil {
						t.Fatalf("step %d: peek: %v", step, err)
					}
					n := 1 + rng.IntN(3) // costs other than 1 too
					res, err := l.AllowN(ctx, "client", n)
					if err != nil {
						t.Fatalf("step %d: allow: %v", step, err)
					}
					if n == 1 && peek.Allowed != res.Allowed {
						t.Fatalf("step %d: peek says allowed=%v, the next Allow %v", step, peek.Allowed, res.Allowed)
					}
					for i, st := range res.States() {
						want := st.Remaining
						if res.Allowed {
							want += n
						}
						got := peek.States()[i].Remaining
						if got != want {
							t.Fatalf("step %d, policy %s: peek remaining %d, want %d (Allow: allowed=%v remaining %d)", step, st.Policy, got, want, res.Allowed, st.Remaining)
						}
						if again.States()[i].Remaining != got {
							t.Fatalf("step %d: a second peek read %d, the first %d: peek consumed", step, again.States()[i].Remaining, got)
						}
						if n == 1 && !res.Allowed && peek.States()[i].RetryAfter != st.RetryAfter {
							t.Fatalf("step %d, policy %s: peek retry-after %v, Allow's %v", step, st.Policy, peek.States()[i].RetryAfter, st.RetryAfter)
						}
					}
				}
			})
		}
	}
}

// A key never seen has every policy's limit free, and Peek does not
// make the store track it.
func TestPeekUnknownKey(t *testing.T) {
	store := newMemoryStore(t)
	l := slidelog.MustNew(store, slidelog.PerDay(10000))
	t.Cleanup(func() { _ = l.Close() })
	res, err := l.Peek(t.Context(), "nobody")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Allowed || res.Remaining != 10000 {
		t.Errorf("got allowed=%v remaining=%d, want true and 10000", res.Allowed, res.Remaining)
	}
	if store.Len() != 0 {
		t.Errorf("got %d keys tracked after a peek, want 0", store.Len())
	}
}

func TestPeekErrors(t *testing.T) {
	l := slidelog.MustNew(newMemoryStore(t), slidelog.PerMinute(5))
	if _, err := l.Peek(t.Context(), ""); !errors.Is(err, slidelog.ErrInvalidKey) {
		t.Errorf("empty key: got %v, want ErrInvalidKey", err)
	}
	_ = l.Close()
	if _, err := l.Peek(t.Context(), "k"); !errors.Is(err, slidelog.ErrClosed) {
		t.Errorf("after Close: got %v, want ErrClosed", err)
	}
}

func ExampleLimiter_Peek() {
	store := memstore.New()
	defer store.Close()
	// 10,000 a day, counted in 15-minute buckets.
	quota, _ := slidelog.ParsePolicy("10000/day precision=15m")
	limiter := slidelog.MustNew(store, quota, slidelog.WithName("api"))
	defer limiter.Close()

	for range 3 {
		_, _ = limiter.Allow(context.Background(), "customer-7")
	}
	usage, err := limiter.Peek(context.Background(), "customer-7")
	if err != nil {
		panic(err)
	}
	fmt.Printf("you have used %d of %d today\n", usage.Limit-usage.Remaining, usage.Limit)
	// Output:
	// you have used 3 of 10000 today
}
