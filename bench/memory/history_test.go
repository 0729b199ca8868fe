package memory

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/memstore"
)

// Keys with history: 10,000 keys, a one-hour window, about 120 admissions
// per key in its log.
const (
	historyKeys    = 10_000
	historyPerKey  = 120
	historyWindow  = time.Hour
	historyAdvance = 16 // ops between two advances of the fast clock
)

// history is a set of keys that a benchmark decides on in turn, and how
// far the fast clock moves per decision (step): each key is decided once
// per len(names) decisions, so historyPerKey of them span the window, and
// each admission pushes about one entry out of it.
type history struct {
	names []string
	step  time.Duration
}

func newHistory(keys int) history {
	names := make([]string, keys)
	for i := range names {
		names[i] = "client-" + strconv.Itoa(i)
	}
	return history{names: names, step: historyWindow / time.Duration(keys*historyPerKey)}
}

// historyKeySet is BenchmarkAdmitWithHistory's 10,000 keys.
var historyKeySet = newHistory(historyKeys)

// fastClock is the process's monotonic clock (read as memstore's default
// clock reads it, one monotonic read per call) plus a skew that the
// benchmark moves forward by history.step per decision: an hour of
// traffic passes in a fraction of a second, so that every key keeps
// about 120 admissions in its window while each admission pushes about
// one old entry out, as it would at 333 decisions per second over 10,000
// keys.
type fastClock struct {
	start time.Time
	base  int64 // start in Unix microseconds
	skew  atomic.Int64
}

func newFastClock() *fastClock {
	start := time.Now()
	return &fastClock{start: start, base: start.UnixMicro()}
}

func (c *fastClock) now() time.Time {
	return time.UnixMicro(c.base + (time.Since(c.start) + time.Duration(c.skew.Load())).Microseconds())
}

// BenchmarkFastClock is what a read of the benchmark's clock costs,
// beside what memstore's default clock (time.Since a start, as
// microseconds) and go-limiter's clock (time.Now, read as nanoseconds)
// cost.
func BenchmarkFastClock(b *testing.B) {
	var sink int64
	b.Run("fastClock", func(b *testing.B) {
		now := newFastClock().now
		for b.Loop() {
			sink += now().UnixMicro()
		}
	})
	b.Run("memstore-default", func(b *testing.B) {
		start := time.Now()
		base := start.UnixMicro()
		for b.Loop() {
			sink += base + time.Since(start).Microseconds()
		}
	})
	b.Run("time.Now", func(b *testing.B) {
		for b.Loop() {
			sink += time.Now().UnixNano()
		}
	})
	if sink == 0 {
		b.Fatal("no clock read")
	}
}

// BenchmarkAdmitWithHistory measures an admission on a key with history,
// where most users meet the memory store: 10,000 keys, a one-hour window
// and a limit no key reaches, so every request is admitted. slidelog is
// called as users call it, Limiter.Allow(ctx, key) on a memstore.Store
// with default options; go-limiter as its users call it,
// store.Take(ctx, key) on a memorystore with a one-hour interval and more
// tokens than any run takes.
//
// It runs with 1 caller (serial), one per core (parallel), and 16 and 64
// callers (goroutines), each reporting the process's CPU per decision
// (cpu-ns/op, getrusage), which does not depend on how the callers share
// the cores.
//
// Fair comparison: both walk the same keys in the same order (round
// robin, each goroutine from its own offset) and both are warmed before
// the timer starts with 120 requests per key. slidelog's store reads a
// fastClock: one monotonic read per decision, as the default clock makes,
// plus a few ns for the skew and the time.Time that WithClock passes
// (BenchmarkFastClock: 38 ns a read here against the default clock's 30;
// go-limiter reads the wall and monotonic clocks once per decision, 54
// ns), while the skew makes the warm-up's 120 admissions per key span
// the hour and keeps each key's log at about 120 entries during the run:
// every admission appends one entry and evicts one. Each goroutine moves
// the skew once every 16 decisions, so the clock costs no contended write
// per decision. go-limiter's token bucket keeps no history, so its cost
// does not depend on it. entries/key reports a key's log length after
// the run.
func BenchmarkAdmitWithHistory(b *testing.B) {
	for _, mode := range callerModes {
		b.Run("slidelog/"+mode.name, func(b *testing.B) { admitSlidelog(b, historyKeySet, mode.callers) })
		b.Run("go-limiter/"+mode.name, func(b *testing.B) { admitGoLimiter(b, historyKeySet, mode.callers) })
	}
}

// BenchmarkAdmitWithHistorySplit is BenchmarkAdmitWithHistory's parallel
// row (one goroutine per core) with each goroutine on a share of the keys
// of its own (splitCallers): there, the goroutines walk the same keys,
// half of them apart, and meet on a key whenever one has gained half the
// keys on the other, so that their decisions then wait on one lock and
// pass the key's lines between cores.
func BenchmarkAdmitWithHistorySplit(b *testing.B) {
	b.Run("slidelog", func(b *testing.B) { admitSlidelog(b, historyKeySet, splitCallers) })
	b.Run("go-limiter", func(b *testing.B) { admitGoLimiter(b, historyKeySet, splitCallers) })
}

// BenchmarkAdmitWithHistoryKeys is BenchmarkAdmitWithHistory on one
// goroutine over 10 to 30,000 keys: how an admission's cost grows with
// the memory the keys' state takes, against go-limiter's. A key's exact
// log of 120 entries takes about 1.5 KB (the log, 384 bytes; its ring of
// 128 entries of 8 bytes) where go-limiter's bucket takes about 100, so
// that from about 1,000 keys on, the lines a decision touches (the
// index's slot, the log's first lines, the ring's oldest entry and next
// free slot) no longer stay in a core's cache between two decisions on
// the key.
func BenchmarkAdmitWithHistoryKeys(b *testing.B) {
	for _, keys := range []int{10, 100, 1_000, 3_000, 10_000, 30_000} {
		h := newHistory(keys)
		b.Run(fmt.Sprintf("keys=%d/slidelog", keys), func(b *testing.B) { admitSlidelog(b, h, 1) })
		b.Run(fmt.Sprintf("keys=%d/go-limiter", keys), func(b *testing.B) { admitGoLimiter(b, h, 1) })
	}
}

// admitSlidelog runs runHistory on h with slidelog on a memory store, as
// BenchmarkAdmitWithHistory describes.
func admitSlidelog(b *testing.B, h history, callers int) {
	clock := newFastClock()
	store := memstore.New(memstore.WithClock(clock.now))
	defer store.Close()
	l := slidelog.MustNew(store, slidelog.Policy{Name: "p", Limit: slidelog.MaxLimit, Window: historyWindow})
	defer l.Close()
	ctx := context.Background()
	allow := func(key string) {
		res, err := l.Allow(ctx, key)
		if err != nil || !res.Allowed {
			b.Fatalf("%+v, %v", res, err)
		}
	}
	runHistory(b, h, callers, allow, func(n int) { clock.skew.Add(int64(n) * int64(h.step)) })
	res, err := l.Peek(ctx, h.names[0])
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(res.Limit-res.Remaining), "entries/key")
}

// admitGoLimiter runs runHistory on h with go-limiter's memory store.
func admitGoLimiter(b *testing.B, h history, callers int) {
	s := goLimiter(b, 1<<62, historyWindow)
	ctx := context.Background()
	runHistory(b, h, callers, func(key string) {
		if _, _, _, ok, _ := s.Take(ctx, key); !ok {
			b.Fatal("denied")
		}
	}, func(int) {})
}

// callerMode is how many goroutines a benchmark decides on: 1 (serial,
// a plain loop), 0 for one per core (parallel), splitCallers for one per
// core each on its own share of the keys, or that many.
type callerMode struct {
	name    string
	callers int
}

// callerModes are the callers BenchmarkAdmitWithHistory runs with: one,
// one per core, and the 16 and 64 that the Redis benchmarks report.
var callerModes = []callerMode{{"serial", 1}, {"parallel", 0}, {"16-callers", 16}, {"64-callers", 64}}

// splitCallers is the callers of BenchmarkAdmitWithHistorySplit: one
// goroutine per core, each deciding on a share of the keys of its own.
const splitCallers = -1

// runHistory warms every key of h with historyPerKey decisions, reporting
// the heap that leaves in use per key (heap-B/key), then measures decide
// on the keys in turn, on callers goroutines (see callerMode),
// calling advance with the number of decisions made every historyAdvance
// of them. It reports the CPU per decision and the goroutines it ran.
func runHistory(b *testing.B, h history, callers int, decide func(key string), advance func(n int)) {
	keys := len(h.names)
	before := liveHeap()
	for i := range keys * historyPerKey {
		decide(h.names[i%keys])
		advance(1)
	}
	perKey := float64(liveHeap()-before) / float64(keys)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime()
	defer func() {
		// CPU per decision: unlike ns/op, it does not count the time the
		// benchmark waited for a core on a busy machine.
		b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
		b.ReportMetric(perKey, "heap-B/key") // after ResetTimer, which drops metrics
	}()
	if callers == 1 {
		for i := 0; b.Loop(); i++ {
			decide(h.names[i%keys])
			if i%historyAdvance == historyAdvance-1 {
				advance(historyAdvance)
			}
		}
		return
	}
	procs := runtime.GOMAXPROCS(0)
	goroutines := procs
	if callers > 0 {
		// RunParallel starts parallelism*GOMAXPROCS goroutines.
		b.SetParallelism((callers + procs - 1) / procs)
		goroutines = (callers + procs - 1) / procs * procs
	}
	b.ReportMetric(float64(goroutines), "callers")
	var next atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		g := int(next.Add(1)) - 1
		k, span := (g+1)*keys/goroutines, keys // all the keys, from a place of its own
		if callers == splitCallers {
			k, span = g*keys/goroutines, keys/goroutines // its share alone
		}
		for i := 0; pb.Next(); i++ {
			decide(h.names[(k+i%span)%keys])
			if i%historyAdvance == historyAdvance-1 {
				advance(historyAdvance)
			}
		}
	})
}

// liveHeap is the heap in use after a collection.
func liveHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
