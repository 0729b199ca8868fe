package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/slidelog/slidelog/bench/contender"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
)

// The boundary attack runs on a short window so that it takes seconds;
// its shape does not depend on the window's length.
const (
	attackLimit  = 100
	attackWindow = 2 * time.Second
	attackBurst  = 2 * attackLimit
)

// attackSchedule is the article's boundary attack. A first request opens
// the fixed window; a burst lands just before that window ends, another
// just after the next one begins, and a last one a window later.
var attackSchedule = []struct {
	at time.Duration
	n  int
}{
	{0, 1},
	{attackWindow - 200*time.Millisecond, attackBurst},
	{attackWindow + 50*time.Millisecond, attackBurst},
	{2*attackWindow + 100*time.Millisecond, attackBurst},
}

// boundaryAttack sends the same schedule to every accuracy contender
// (slidelog exact and bucketed, ulule/limiter's fixed window, redis_rate's
// GCRA) at once, on real Redis, and records when each admitted.
func boundaryAttack(ctx context.Context, client redis.UniversalClient, prefix string) ([]Accuracy, error) {
	names := accuracyContenders
	limiters := make([]contender.Limiter, len(names))
	for i, name := range names {
		l, err := newAccuracyLimiter(ctx, name, client, fmt.Sprintf("%s%d:", prefix, i))
		if err != nil {
			return nil, err
		}
		defer func() { _ = l.Close() }()
		limiters[i] = l
	}
	out := make([]Accuracy, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	start := time.Now()
	for i := range names {
		wg.Go(func() {
			out[i], errs[i] = attack(ctx, names[i], limiters[i], start)
		})
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

func attack(ctx context.Context, name string, l contender.Limiter, start time.Time) (Accuracy, error) {
	a := Accuracy{Contender: name, Limit: attackLimit, Window: Duration(attackWindow)}
	var mu sync.Mutex
	var firstErr error
	for _, step := range attackSchedule {
		time.Sleep(time.Until(start.Add(step.at)))
		const senders = 8
		var wg sync.WaitGroup
		for s := range senders {
			wg.Go(func() {
				for j := s; j < step.n; j += senders {
					ok, at, err := allowAt(ctx, l, "attacker")
					mu.Lock()
					a.Sent++
					if err != nil && firstErr == nil {
						firstErr = err
					}
					if ok && err == nil {
						a.Admitted = append(a.Admitted, at.Sub(start).Seconds())
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
	}
	slices.Sort(a.Admitted)
	a.MaxInWin = maxInWindow(a.Admitted, attackWindow.Seconds())
	return a, firstErr
}

// maxInWindow is the most entries of sorted times in any half-open window
// (t-w, t].
func maxInWindow(times []float64, w float64) int {
	best, lo := 0, 0
	for hi, t := range times {
		for times[lo] <= t-w {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}

// rollingCounts returns, for each t in ts, how many of the sorted times
// fall in (t-w, t].
func rollingCounts(times []float64, w float64, ts []float64) []int {
	out := make([]int, len(ts))
	for i, t := range ts {
		lo, _ := slices.BinarySearch(times, t-w)
		for lo < len(times) && times[lo] <= t-w {
			lo++
		}
		hi, _ := slices.BinarySearch(times, t)
		for hi < len(times) && times[hi] <= t {
			hi++
		}
		out[i] = hi - lo
	}
	return out
}

// measureMemoryUsage fills one slidelog log to its limit at 100 (a
// listpack) and 2,000 (a skiplist) and reads MEMORY USAGE.
func measureMemoryUsage(ctx context.Context, topo topology, client redis.UniversalClient, prefix string) ([]Memory, error) {
	var out []Memory
	for _, limit := range []int{100, 2000} {
		store, err := redisstore.New(client, redisstore.WithKeyPrefix(prefix))
		if err != nil {
			return out, err
		}
		l, err := slidelog.New(store, slidelog.PerMinute(limit))
		if err != nil {
			return out, err
		}
		identity := fmt.Sprintf("memory-%d", limit)
		for range limit {
			if _, err := l.Allow(ctx, identity); err != nil {
				return out, err
			}
		}
		key := store.LogKey(l.Name(), identity)
		entries, err := client.ZCard(ctx, key).Result()
		if err != nil {
			return out, err
		}
		bytes, err := client.MemoryUsage(ctx, key, 0).Result()
		if err != nil {
			return out, err
		}
		enc, _ := client.ObjectEncoding(ctx, key).Result()
		out = append(out, Memory{Topology: topo.name, Limit: limit, Entries: entries, Bytes: bytes,
			PerEntry: float64(bytes) / float64(max(entries, 1)), Encoding: enc})
		fmt.Printf("memory    %-10s limit %4d: %d entries, %d bytes, %.1f B/entry (%s)\n",
			topo.name, limit, entries, bytes, float64(bytes)/float64(max(entries, 1)), enc)
		if err := l.Close(); err != nil {
			return out, err
		}
	}
	return out, deleteKeys(ctx, client, prefix)
}
