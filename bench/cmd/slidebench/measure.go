package main

import (
	"context"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slidelog/slidelog/bench/contender"
)

// histogram counts durations in nanoseconds in log-linear buckets:
// exact below 128 ns, then 128 buckets per power of two (under 0.8%
// error), like an HDR histogram.
type histogram struct {
	counts [subBuckets * 40]uint64
	n      uint64
	sum    float64
}

const subBuckets = 128

func bucketOf(v uint64) int {
	if v < subBuckets {
		return int(v)
	}
	shift := bits.Len64(v) - 8 // v>>shift is in [128, 256)
	return subBuckets + shift*subBuckets + int(v>>shift) - subBuckets
}

// valueOf returns the middle of bucket i.
func valueOf(i int) float64 {
	if i < subBuckets {
		return float64(i)
	}
	shift := (i - subBuckets) / subBuckets
	low := uint64(subBuckets+(i-subBuckets)%subBuckets) << shift
	return float64(low) + float64(uint64(1)<<shift)/2
}

func (h *histogram) record(d time.Duration) {
	v := uint64(max(d, 0))
	i := min(bucketOf(v), len(h.counts)-1)
	h.counts[i]++
	h.n++
	h.sum += float64(v)
}

func (w *workerStats) add(o *workerStats) {
	w.hist.merge(&o.hist)
	w.decisions += o.decisions
	w.allowed += o.allowed
	w.errors += o.errors
	if w.firstErr == nil {
		w.firstErr = o.firstErr
	}
}

func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.sum += o.sum
}

// quantile returns the q-quantile in nanoseconds.
func (h *histogram) quantile(q float64) float64 {
	if h.n == 0 {
		return math.NaN()
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= max(rank, 1) {
			return valueOf(i)
		}
	}
	return valueOf(len(h.counts) - 1)
}

type workerStats struct {
	hist      histogram
	decisions int64
	allowed   int64
	errors    int64
	firstErr  error
}

// drive runs callers goroutines calling l.Allow with keys from keyOf for
// warmup (not recorded) and then for d, and returns the merged stats and
// the measured wall time. The counters commands and trips, when not nil,
// are read right before and after the measured part, and their deltas
// returned (-1 when nil).
func drive(l contender.Limiter, callers int, keyOf func(worker int) func() string, warmup, d time.Duration, commands, trips *atomic.Int64) (workerStats, time.Duration, int64, int64) {
	ctx := context.Background()
	if warmup > 0 {
		run(ctx, l, callers, keyOf, warmup, false)
	}
	var cmds0, trips0 int64
	if commands != nil {
		cmds0, trips0 = commands.Load(), trips.Load()
	}
	stats, elapsed := run(ctx, l, callers, keyOf, d, true)
	cmds, rts := int64(-1), int64(-1)
	if commands != nil {
		cmds, rts = commands.Load()-cmds0, trips.Load()-trips0
	}
	return stats, elapsed, cmds, rts
}

func run(ctx context.Context, l contender.Limiter, callers int, keyOf func(worker int) func() string, d time.Duration, record bool) (workerStats, time.Duration) {
	var stop atomic.Bool
	stats := make([]workerStats, callers)
	var wg sync.WaitGroup
	start := time.Now()
	timer := time.AfterFunc(d, func() { stop.Store(true) })
	defer timer.Stop()
	for w := range callers {
		next := keyOf(w)
		st := &stats[w]
		wg.Go(func() {
			for !stop.Load() {
				key := next()
				t0 := time.Now()
				ok, err := l.Allow(ctx, key)
				took := time.Since(t0)
				if !record {
					continue
				}
				if err != nil {
					st.errors++
					if st.firstErr == nil {
						st.firstErr = err
					}
					continue
				}
				st.decisions++
				st.hist.record(took)
				if ok {
					st.allowed++
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	var total workerStats
	for i := range stats {
		total.add(&stats[i])
	}
	return total, elapsed
}
