package memory

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sethvargo/go-limiter"
	"github.com/sethvargo/go-limiter/memorystore"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/memstore"
)

// fakeClock is a store clock that BenchmarkBytesPerKey sets by hand: an
// atomic count of microseconds.
type fakeClock struct{ us atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.us.Store(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixMicro())
	return c
}

func (c *fakeClock) now() time.Time { return time.UnixMicro(c.us.Load()) }
func (c *fakeClock) set(us int64)   { c.us.Store(us) }
func (c *fakeClock) micros() int64  { return c.us.Load() }

const (
	benchLimit  = 100
	benchWindow = time.Second
)

// policies of BenchmarkDeny: 100 per second, exact or with 100 buckets.
var models = []struct {
	name   string
	policy slidelog.Policy
}{
	{"exact", slidelog.Policy{Name: "p", Limit: benchLimit, Window: benchWindow}},
	{"bucketed", slidelog.Policy{Name: "p", Limit: benchLimit, Window: benchWindow, Precision: benchWindow / 100}},
}

// keyer hands each goroutine of a parallel benchmark a key of its own.
type keyer struct{ n atomic.Int64 }

func (k *keyer) next() string { return "key-" + strconv.FormatInt(k.n.Add(1), 10) }

// storeTake returns a function that takes one unit for a key on store
// under policy (namespace "bench", a random ID each time) and reports
// whether it was admitted; an error fails b.
func storeTake(b *testing.B, store *memstore.Store, policy slidelog.Policy) func(key string) bool {
	req := slidelog.Request{Namespace: "bench", Cost: 1, Policies: []slidelog.Policy{policy}}
	return func(key string) bool {
		r := req
		r.Key, r.ID = key, rand.Uint64()
		res, err := store.Take(context.Background(), r)
		if err != nil {
			b.Fatal(err)
		}
		return res.Allowed
	}
}

// limiterAllow returns a function that asks l to allow a key and reports
// whether it was admitted; an error fails b.
func limiterAllow(b *testing.B, l *slidelog.Limiter) func(key string) bool {
	return func(key string) bool {
		res, err := l.Allow(context.Background(), key)
		if err != nil {
			b.Fatal(err)
		}
		return res.Allowed
	}
}

// runAdmitting runs b with run: it warms each key by deciding on it for
// warmFor, then requires every timed decision to be admitted.
func runAdmitting(b *testing.B, parallel bool, warmFor time.Duration, decide func(key string) bool) {
	run(b, parallel, func(key string) {
		for end := time.Now().Add(warmFor); time.Now().Before(end); {
			decide(key)
		}
	}, func(key string) {
		if !decide(key) {
			b.Fatal("denied")
		}
	})
}

// run runs body on one goroutine, or on GOMAXPROCS goroutines with
// b.RunParallel, each with a key of its own that warm has prepared.
func run(b *testing.B, parallel bool, warm func(key string), body func(key string)) {
	var keys keyer
	if !parallel {
		key := keys.next()
		warm(key)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			body(key)
		}
		return
	}
	// Warm one key per goroutine before the timer starts.
	procs := runtime.GOMAXPROCS(0)
	ready := make(chan string, procs*4)
	for range procs * 4 {
		k := keys.next()
		warm(k)
		ready <- k
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		key := <-ready
		for pb.Next() {
			body(key)
		}
	})
}

func modeName(parallel bool) string {
	if parallel {
		return "parallel"
	}
	return "serial"
}

// BenchmarkAllow measures admissions on warm keys, on the process clock
// as users run the store (go-limiter reads the process clock too). Every
// request fits: slidelog's policies allow MaxLimit per window (1 ms exact,
// 100 ms in 1 ms buckets), so the exact window holds the last millisecond
// of admissions and slides, one eviction per admission, as a full window
// does; go-limiter's bucket holds more tokens than any run takes.
func BenchmarkAllow(b *testing.B) {
	allowModels := []struct {
		name   string
		policy slidelog.Policy
	}{
		{"exact", slidelog.Policy{Name: "p", Limit: slidelog.MaxLimit, Window: time.Millisecond}},
		{"bucketed", slidelog.Policy{Name: "p", Limit: slidelog.MaxLimit, Window: 100 * time.Millisecond, Precision: time.Millisecond}},
	}
	// warmFor is how long a key is warmed: past its window, so that the
	// exact ring has grown to what the run needs and allocates no more.
	const warmFor = 5 * time.Millisecond
	for _, parallel := range []bool{false, true} {
		for _, m := range allowModels {
			b.Run(fmt.Sprintf("slidelog-take/%s/%s", m.name, modeName(parallel)), func(b *testing.B) {
				store := memstore.New()
				defer store.Close()
				runAdmitting(b, parallel, warmFor, storeTake(b, store, m.policy))
			})
			b.Run(fmt.Sprintf("slidelog-limiter/%s/%s", m.name, modeName(parallel)), func(b *testing.B) {
				store := memstore.New()
				defer store.Close()
				l := slidelog.MustNew(store, m.policy)
				defer l.Close()
				runAdmitting(b, parallel, warmFor, limiterAllow(b, l))
			})
		}
		b.Run("go-limiter/"+modeName(parallel), func(b *testing.B) {
			s := goLimiter(b, 1<<62, time.Hour)
			run(b, parallel, func(key string) { _, _, _, _, _ = s.Take(context.Background(), key) }, func(key string) {
				if _, _, _, ok, _ := s.Take(context.Background(), key); !ok {
					b.Fatal("denied")
				}
			})
		})
	}
}

// BenchmarkDeny measures denials on keys whose window is full: 100 per
// second on slidelog's process clock (the fill takes well under a
// second), one token per hour on go-limiter's.
// denyPolicy is p over an hour, so that the entries that fill a key do
// not leave its window during the run.
func denyPolicy(p slidelog.Policy) slidelog.Policy {
	p.Window = time.Hour
	if p.Precision > 0 {
		p.Precision = p.Window / 100
	}
	return p
}

// runDeny measures allowed on keys it first fills to their limit and
// past: every decision measured is a denial. allowed reports whether the
// request was admitted, as a caller reads a Result: in the frame that
// made the call, so that the benchmark copies no Result of its own.
func runDeny(b *testing.B, parallel bool, allowed func(key string) bool) {
	run(b, parallel, func(key string) {
		for range benchLimit + 1 {
			allowed(key)
		}
	}, func(key string) {
		if allowed(key) {
			b.Fatal("admitted")
		}
	})
}

func BenchmarkDeny(b *testing.B) {
	for _, parallel := range []bool{false, true} {
		for _, m := range models {
			b.Run(fmt.Sprintf("slidelog-take/%s/%s", m.name, modeName(parallel)), func(b *testing.B) {
				store := memstore.New()
				defer store.Close()
				runDeny(b, parallel, storeTake(b, store, denyPolicy(m.policy)))
			})
			b.Run(fmt.Sprintf("slidelog-limiter/%s/%s", m.name, modeName(parallel)), func(b *testing.B) {
				store := memstore.New()
				defer store.Close()
				l := slidelog.MustNew(store, denyPolicy(m.policy))
				defer l.Close()
				runDeny(b, parallel, limiterAllow(b, l))
			})
		}
		b.Run("go-limiter/"+modeName(parallel), func(b *testing.B) {
			s := goLimiter(b, 1, time.Hour)
			run(b, parallel, func(key string) { _, _, _, _, _ = s.Take(context.Background(), key) }, func(key string) {
				if _, _, _, ok, _ := s.Take(context.Background(), key); ok {
					b.Fatal("admitted")
				}
			})
		})
	}
}

func goLimiter(b *testing.B, tokens uint64, interval time.Duration) limiter.Store {
	s, err := memorystore.New(&memorystore.Config{Tokens: tokens, Interval: interval})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// BenchmarkBytesPerKey reports the heap a key's state costs (B/key, its
// map entry included, its key string not), with each key's window full:
// 1,000 keys, each admitted its limit spread evenly over the window, at
// limits 10, 100 and 1,000, exact and with Precision Window/100; go-limiter
// after one request per key. It measures memory, not time: ns/op is the
// cost of building the whole table.
func BenchmarkBytesPerKey(b *testing.B) {
	const keys = 1000
	names := make([]string, keys)
	for i := range names {
		names[i] = "key-" + strconv.Itoa(i)
	}
	for _, bucketed := range []bool{false, true} {
		for _, limit := range []int{10, 100, 1000} {
			name := "exact"
			if bucketed {
				name = "bucketed-W/100"
			}
			b.Run(fmt.Sprintf("slidelog/%s/limit=%d", name, limit), func(b *testing.B) {
				p := slidelog.Policy{Name: "p", Limit: limit, Window: time.Minute}
				if bucketed {
					p.Precision = p.Window / 100
				}
				var perKey float64
				for range b.N {
					clock := newFakeClock()
					start := clock.micros()
					perKey = heapPerKey(keys, func() any {
						store := memstore.New(memstore.WithClock(clock.now))
						req := slidelog.Request{Namespace: "bench", Cost: 1, Policies: []slidelog.Policy{p}}
						for i := range limit {
							clock.set(start + int64(i)*p.Window.Microseconds()/int64(limit))
							for k, key := range names {
								req.Key, req.ID = key, uint64(i*keys+k+1)
								if res, err := store.Take(context.Background(), req); err != nil || !res.Allowed {
									b.Fatalf("fill: %+v, %v", res, err)
								}
							}
						}
						return store
					})
				}
				b.ReportMetric(perKey, "B/key")
			})
		}
	}
	b.Run("go-limiter", func(b *testing.B) {
		var perKey float64
		for range b.N {
			perKey = heapPerKey(keys, func() any {
				s, err := memorystore.New(&memorystore.Config{Tokens: 100, Interval: time.Minute})
				if err != nil {
					b.Fatal(err)
				}
				for _, key := range names {
					_, _, _, _, _ = s.Take(context.Background(), key)
				}
				return s
			})
		}
		b.ReportMetric(perKey, "B/key")
	})
}

// heapPerKey returns the live heap that build's result holds, per key.
func heapPerKey(keys int, build func() any) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	v := build()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(v)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(keys)
}
