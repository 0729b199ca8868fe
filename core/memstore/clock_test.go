package memstore_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/memstore"
)

// The memory store decides with the time it reads while holding the key's
// lock (issue 18): a decision that waited for the lock must not decide with
// a time read before it. 100 goroutines on 3 keys, an exact and a
// bucketed policy, many rounds; an independent checker holds every
// rolling window of each policy, by the decisions' own times, to its
// limit.
func TestConcurrentDecisionsKeepEveryWindow(t *testing.T) {
	exact := slidelog.Policy{Name: "exact", Limit: 50, Window: 100 * time.Millisecond}
	bucketed := slidelog.Policy{Name: "bucketed", Limit: 80, Window: 200 * time.Millisecond, Precision: 20 * time.Millisecond}
	keys := []string{"a", "b", "c"}
	rounds := 20
	if testing.Short() {
		rounds = 3
	}
	for round := range rounds {
		store := memstore.New()
		l, err := slidelog.New(store, exact, slidelog.WithPolicy(bucketed), slidelog.WithName("round"))
		if err != nil {
			t.Fatal(err)
		}
		type admission struct {
			at   time.Time
			cost int
		}
		var mu sync.Mutex
		admitted := map[string][]admission{}
		var wg sync.WaitGroup
		for g := range 100 {
			wg.Go(func() {
				for i := range 200 {
					key := keys[(g+i)%len(keys)]
					cost := 1 + (g+i)%3
					res, err := l.AllowN(context.Background(), key, cost)
					if err != nil {
						t.Error(err)
						return
					}
					if res.Allowed {
						mu.Lock()
						admitted[key] = append(admitted[key], admission{res.DecidedAt, cost})
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
		_ = l.Close()
		_ = store.Close()
		total := 0
		for key, as := range admitted {
			slices.SortFunc(as, func(a, b admission) int { return a.at.Compare(b.at) })
			total += len(as)
			for _, p := range []slidelog.Policy{exact, bucketed} {
				// Two pointers: the admissions in (t-W, t] for every t.
				sum, lo := 0, 0
				for hi, a := range as {
					sum += a.cost
					for !as[lo].at.After(a.at.Add(-p.Window)) {
						sum -= as[lo].cost
						lo++
					}
					if sum > p.Limit {
						t.Fatalf("round %d, key %q, policy %s: %d units in the window ending at admission %d, want at most %d", round, key, p.Name, sum, hi, p.Limit)
					}
				}
			}
		}
		if total == 0 {
			t.Fatalf("round %d admitted nothing", round)
		}
	}
}
