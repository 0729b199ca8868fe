package slidelog_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/slidelogtest"
)

// wrapped is a store that is not a memory store: it embeds one, so that it
// describes itself as one, and its Take counts the calls. A limiter on it
// must decide through its Take, never on the embedded store's table.
type wrapped struct {
	*memstore.Store
	takes int
}

func (w *wrapped) Take(ctx context.Context, req slidelog.Request) (slidelog.Result, error) {
	w.takes++
	return w.Store.Take(ctx, req)
}

// TestMemoryPathMatchesTake holds a limiter on a memory store, which
// decides on the store's logs itself, to the decisions the store's Take
// makes: two limiters with the same policies and the same clock, one
// on a memory store and one on a wrapper of another, take the same random
// requests and refunds, and every Result must agree field by field.
func TestMemoryPathMatchesTake(t *testing.T) {
	configs := map[string][]slidelog.Policy{
		"exact":    {{Limit: 10, Window: time.Second}},
		"bucketed": {{Limit: 10, Window: time.Second, Precision: 100 * time.Millisecond}},
		"two policies": {
			{Name: "burst", Limit: 5, Window: 200 * time.Millisecond},
			{Name: "sustained", Limit: 12, Window: 2 * time.Second, Precision: 100 * time.Millisecond},
		},
	}
	for name, policies := range configs {
		t.Run(name, func(t *testing.T) {
			clock := slidelogtest.NewClock(time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC))
			direct := memstore.New(memstore.WithClock(clock.Now))
			defer direct.Close()
			other := &wrapped{Store: memstore.New(memstore.WithClock(clock.Now))}
			defer other.Close()
			var opts []slidelog.Option
			for _, p := range policies[1:] {
				opts = append(opts, slidelog.WithPolicy(p))
			}
			a := slidelog.MustNew(direct, policies[0], opts...)
			defer a.Close()
			b := slidelog.MustNew(other, policies[0], opts...)
			defer b.Close()
			require.True(t, slidelog.OnMemory(a), "a limiter on a memory store decides on its logs")
			require.False(t, slidelog.OnMemory(b), "a limiter on a wrapper decides through its Take")

			rng := rand.New(rand.NewPCG(1, uint64(len(name))))
			keys := []string{"alice", "bob", "carol"}
			var kept []struct{ a, b slidelog.Result }
			allowed, denied := 0, 0
			for i := range 3000 {
				clock.Advance(time.Duration(rng.IntN(40)) * time.Millisecond)
				key, n := keys[rng.IntN(len(keys))], 1+rng.IntN(3)
				ra, errA := a.AllowN(context.Background(), key, n)
				rb, errB := b.AllowN(context.Background(), key, n)
				require.NoError(t, errA)
				require.NoError(t, errB)
				requireSameResult(t, rb, ra, fmt.Sprintf("decision %d (%s, cost %d)", i, key, n))
				if ra.Allowed {
					allowed++
					kept = append(kept, struct{ a, b slidelog.Result }{ra, rb})
				} else {
					denied++
				}
				if rng.IntN(10) == 0 && len(kept) > 0 {
					j := rng.IntN(len(kept))
					require.NoError(t, a.Refund(context.Background(), kept[j].a))
					require.NoError(t, b.Refund(context.Background(), kept[j].b))
					kept = append(kept[:j], kept[j+1:]...)
				}
			}
			require.Equal(t, 3000, other.takes, "every decision of the wrapper's limiter went through its Take")
			require.Greater(t, allowed, 300)
			require.Greater(t, denied, 300)
		})
	}
}

// requireSameResult requires got to be want but for the refund ticket,
// which names the limiter that made it.
func requireSameResult(t *testing.T, want, got slidelog.Result, msg string) {
	t.Helper()
	require.Equal(t, want.Allowed, got.Allowed, msg)
	require.Equal(t, want.Limit, got.Limit, msg)
	require.Equal(t, want.Remaining, got.Remaining, msg)
	require.Equal(t, want.RetryAfter, got.RetryAfter, msg)
	require.Equal(t, want.ResetAfter, got.ResetAfter, msg)
	require.Equal(t, want.Policy, got.Policy, msg)
	require.Equal(t, want.Policies, got.Policies, msg)
	require.Equal(t, want.Source, got.Source, msg)
	require.True(t, want.DecidedAt.Equal(got.DecidedAt), "%s: decided at %v, want %v", msg, got.DecidedAt, want.DecidedAt)
	require.Equal(t, want.StableFor, got.StableFor, msg)
}

// TestMemoryPathErrors holds a limiter on a memory store to the errors
// AllowN documents, the same as through a store's Take.
func TestMemoryPathErrors(t *testing.T) {
	for _, onMemory := range []bool{true, false} {
		t.Run(fmt.Sprintf("memory=%v", onMemory), func(t *testing.T) {
			mem := memstore.New()
			var store slidelog.Store = mem
			if !onMemory {
				store = &wrapped{Store: mem}
			}
			l := slidelog.MustNew(store, slidelog.PerSecond(3))
			require.Equal(t, onMemory, slidelog.OnMemory(l))
			ctx := context.Background()

			_, err := l.Allow(ctx, "")
			require.ErrorIs(t, err, slidelog.ErrInvalidKey)
			_, err = l.AllowN(ctx, "k", 0)
			require.ErrorIs(t, err, slidelog.ErrInvalidCost)
			_, err = l.AllowN(ctx, "k", 4)
			require.ErrorIs(t, err, slidelog.ErrInvalidCost)
			done, cancel := context.WithCancel(ctx)
			cancel()
			res, err := l.Allow(done, "k")
			require.ErrorIs(t, err, context.Canceled)
			require.Equal(t, slidelog.Result{}, res, "an error comes with no decision")

			res, err = l.AllowN(ctx, "k", 3)
			require.NoError(t, err)
			require.True(t, res.Allowed)
			require.Equal(t, slidelog.Source("memory"), res.Source)
			res, err = l.Allow(ctx, "k")
			require.NoError(t, err)
			require.False(t, res.Allowed, "a denial is a value")
			require.Positive(t, res.RetryAfter)
			require.Positive(t, res.StableFor)

			require.NoError(t, mem.Close())
			res, err = l.Allow(ctx, "k")
			require.ErrorIs(t, err, slidelog.ErrClosed, "a closed store")
			require.Equal(t, slidelog.Result{}, res)
			require.NoError(t, l.Close())
			_, err = l.Allow(ctx, "k")
			require.True(t, errors.Is(err, slidelog.ErrClosed), "a closed limiter")
		})
	}
}

// TestMemoryPathWithEveryOption: a limiter with metrics, a deny cache and
// a policy func decides on its memory store's logs like one without
// them, and keeps what each option promises: the observer counts every
// decision by source, the deny cache answers a repeated denial, and the
// policy func's policies are the ones enforced. A store that embeds a
// memory store without overriding anything is a store of its own too.
func TestMemoryPathWithEveryOption(t *testing.T) {
	store := memstore.New()
	defer store.Close()
	obs := &countingObserver{}
	l := slidelog.MustNew(store, slidelog.PerSecond(3), slidelog.WithName("cached"), slidelog.WithDenyCache(16),
		slidelog.WithObserver(obs),
		slidelog.WithPolicyFunc(func(_ context.Context, key string) ([]slidelog.Policy, error) {
			if key == "vip" {
				return []slidelog.Policy{{Name: "vip", Limit: 5, Window: time.Second}, {Name: "vip-hour", Limit: 100, Window: time.Hour}}, nil
			}
			return nil, nil
		}))
	defer l.Close()
	require.True(t, slidelog.OnMemory(l), "every option decides on memory")
	for range 3 {
		res, err := l.Allow(t.Context(), "k")
		require.NoError(t, err)
		require.True(t, res.Allowed)
		require.Equal(t, store.Describe().Name, string(res.Source))
	}
	res, err := l.Allow(t.Context(), "k")
	require.NoError(t, err)
	require.False(t, res.Allowed)
	require.Equal(t, slidelog.Source("memory"), res.Source, "the first denial is the store's")
	res, err = l.Allow(t.Context(), "k")
	require.NoError(t, err)
	require.False(t, res.Allowed)
	require.Equal(t, slidelog.SourceDenyCache, res.Source, "a repeated denial is the deny cache's")
	for i := range 6 {
		res, err := l.Allow(t.Context(), "vip")
		require.NoError(t, err)
		require.Equal(t, i < 5, res.Allowed, "vip request %d", i)
		require.Len(t, res.Policies, 2, "the policy func's two policies")
	}
	peek, err := l.Peek(t.Context(), "vip")
	require.NoError(t, err)
	require.Equal(t, 95, peek.Policies[1].Remaining, "Peek reads the policy func's policies")
	require.Equal(t, map[string]int{"memory/true": 8, "memory/false": 2, "deny_cache/false": 1}, obs.snapshot())
	_, err = l.Allow(t.Context(), "")
	require.ErrorIs(t, err, slidelog.ErrInvalidKey)
	require.NoError(t, store.Close())
	_, err = l.Allow(t.Context(), "other")
	require.ErrorIs(t, err, slidelog.ErrClosed)
	require.Equal(t, map[string]int{"invalid_key": 1, "closed": 1}, obs.errorSnapshot())

	embedded := &struct{ *memstore.Store }{memstore.New()}
	defer embedded.Close()
	e := slidelog.MustNew(embedded, slidelog.PerSecond(3))
	defer e.Close()
	require.False(t, slidelog.OnMemory(e), "a store embedding a memory store is decided through its Take")
}

// countingObserver counts a limiter's decisions by source and verdict,
// and its errors by reason.
type countingObserver struct {
	mu        sync.Mutex
	decisions map[string]int
	errors    map[string]int
}

func (o *countingObserver) Bind(string, func() slidelog.Gauges) (slidelog.LimiterObserver, error) {
	return o, nil
}

func (o *countingObserver) Decision(src slidelog.Source, allowed bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.decisions == nil {
		o.decisions = map[string]int{}
	}
	o.decisions[fmt.Sprintf("%s/%v", src, allowed)]++
}

func (o *countingObserver) Error(reason string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.errors == nil {
		o.errors = map[string]int{}
	}
	o.errors[reason]++
}

func (o *countingObserver) StoreCall(string, time.Duration)            {}
func (o *countingObserver) Failover(string, slidelog.FailureMode)      {}
func (o *countingObserver) BreakerState(string, slidelog.BreakerState) {}
func (o *countingObserver) Unbind()                                    {}
func (o *countingObserver) snapshot() map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return maps.Clone(o.decisions)
}
func (o *countingObserver) errorSnapshot() map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return maps.Clone(o.errors)
}

// TestMemoryPathConcurrentExact: two limiters of different names and
// limits share one memory store, each deciding on its logs itself, and 16
// goroutines hammer the same few keys of both. Over an hour's window
// nothing leaves, so each limiter must admit exactly its limit per key
// (counted by the callers, independently of the store), and a store
// closed mid-flood must turn every later decision into ErrClosed, never
// an admission.
func TestMemoryPathConcurrentExact(t *testing.T) {
	store := memstore.New()
	a := slidelog.MustNew(store, slidelog.Policy{Limit: 50, Window: time.Hour}, slidelog.WithName("a"))
	defer a.Close()
	b := slidelog.MustNew(store, slidelog.Policy{Limit: 7, Window: time.Hour}, slidelog.WithName("b"))
	defer b.Close()
	require.True(t, slidelog.OnMemory(a))
	require.True(t, slidelog.OnMemory(b))

	keys := []string{"k1", "k2", "k3"}
	type count struct{ admitted, denied int }
	results := make(chan map[string]count, 16)
	for g := range 16 {
		go func() {
			got := map[string]count{}
			for i := range 400 {
				l, name := a, "a"
				if (g+i)%2 == 1 {
					l, name = b, "b"
				}
				key := keys[(g*7+i)%len(keys)]
				res, err := l.Allow(context.Background(), key)
				if err != nil {
					t.Error(err)
					break
				}
				c := got[name+"/"+key]
				if res.Allowed {
					c.admitted++
				} else {
					c.denied++
				}
				got[name+"/"+key] = c
			}
			results <- got
		}()
	}
	total := map[string]count{}
	for range 16 {
		for k, c := range <-results {
			sum := total[k]
			sum.admitted += c.admitted
			sum.denied += c.denied
			total[k] = sum
		}
	}
	for _, key := range keys {
		require.Equal(t, 50, total["a/"+key].admitted, "limiter a, key %s", key)
		require.Equal(t, 7, total["b/"+key].admitted, "limiter b, key %s", key)
		require.Positive(t, total["b/"+key].denied)
	}

	// Close the store while callers decide on fresh keys.
	start := make(chan struct{})
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			<-start
			closed := false
			for i := range 2000 {
				res, err := a.Allow(context.Background(), fmt.Sprintf("fresh-%d-%d", g, i))
				switch {
				case errors.Is(err, slidelog.ErrClosed):
					closed = true
					if res.Allowed || res.Source != slidelog.SourceNone || !res.DecidedAt.IsZero() {
						errs <- fmt.Errorf("ErrClosed with a decision: %+v", res)
						return
					}
				case err != nil:
					errs <- err
					return
				case closed:
					errs <- fmt.Errorf("a decision after the store reported closed: %+v", res)
					return
				}
			}
			errs <- nil
		}()
	}
	close(start)
	time.Sleep(time.Millisecond)
	require.NoError(t, store.Close())
	for range 8 {
		require.NoError(t, <-errs)
	}
	_, err := b.Allow(context.Background(), "k1")
	require.ErrorIs(t, err, slidelog.ErrClosed)
}
