package memlog

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidelog/slidelog/core/internal/window"
)

// skewedClock is the clock of bench/memory's BenchmarkAdmitWithHistory:
// the monotonic clock in microseconds plus a skew the benchmark moves.
type skewedClock struct {
	start time.Time
	base  int64
	skew  atomic.Int64
}

func (c *skewedClock) Now() int64 {
	return c.base + (time.Since(c.start) + time.Duration(c.skew.Load())).Microseconds()
}

// timeClock reads the skewed clock as memstore reads a clock given by
// WithClock: a time.Time, turned into microseconds.
type timeClock struct{ c *skewedClock }

func (t timeClock) Now() int64 { return t.now().UnixMicro() }

func (t timeClock) now() time.Time { return time.UnixMicro(t.c.Now()) }

// BenchmarkTableTake is bench/memory's BenchmarkAdmitWithHistoryKeys on
// the table alone: Table.Take on one goroutine, one exact policy of a
// one-hour window, over 10 and 10,000 keys, each key's log kept at about
// 120 entries by a clock that moves an hour per 120 decisions on each
// key. The clock is read in microseconds (clock=micros, as memstore's
// default clock) or through a time.Time (clock=time, as the benchmark's
// clock, given to memstore.WithClock, is read). What Limiter.Allow costs
// beyond clock=time is the limiter's part of a memory decision.
func BenchmarkTableTake(b *testing.B) {
	const perKey, advance = 120, 16
	for _, mode := range []string{"micros", "time"} {
		for _, keys := range []int{10, 10_000} {
			b.Run("clock="+mode+"/keys="+strconv.Itoa(keys), func(b *testing.B) {
				benchTableTake(b, mode, keys, perKey, advance, "take")
			})
		}
	}
}

// BenchmarkTableTakeParts splits BenchmarkTableTake's admission at
// 10,000 keys (clock=time) into its parts: take is Table.Take itself;
// lookup finds and locks the key's log, reads the clock and unlocks,
// deciding nothing; log-take decides on a log whose address the caller
// already holds (its lock, the clock, window.Log.Take), finding nothing.
func BenchmarkTableTakeParts(b *testing.B) {
	for _, part := range []string{"take", "lookup", "log-take"} {
		b.Run(part, func(b *testing.B) { benchTableTake(b, "time", 10_000, 120, 16, part) })
	}
}

// benchTableTake runs one case of BenchmarkTableTake, or with part other
// than "take" one of BenchmarkTableTakeParts.
func benchTableTake(b *testing.B, mode string, keys, perKey, advance int, part string) {
	names := make([]string, keys)
	for i := range names {
		names[i] = "client-" + strconv.Itoa(i)
	}
	step := int64(time.Hour / time.Duration(keys*perKey))
	start := time.Now()
	clock := &skewedClock{start: start, base: start.UnixMicro()}
	var read Clock = clock
	if mode == "time" {
		read = timeClock{clock}
	}
	t := NewTable(1 << 20)
	policies := []window.Policy{{Limit: 1 << 40, Window: time.Hour.Microseconds()}}
	var out [1]window.State
	take := func(i int) bool {
		var req Request
		req.Namespace, req.Key, req.Cost = "ns", names[i%keys], 1
		d, _ := t.Take(read, &req, policies, out[:])
		return d.Allowed
	}
	for i := range keys * perKey {
		take(i)
		clock.skew.Add(step)
	}
	switch part {
	case "lookup":
		take = func(i int) bool {
			l := t.lockOrAdd(&logKey{"ns", names[i%keys]}, read)
			ok := read.Now() > 0
			l.mu.Unlock()
			return ok
		}
	case "log-take":
		logs := make([]*log, keys)
		for i := range logs {
			logs[i] = t.lock(&logKey{"ns", names[i]})
			logs[i].mu.Unlock()
		}
		var id uint64
		take = func(i int) bool {
			l := logs[i%keys]
			l.mu.Lock()
			id++
			d := l.w.Take(read.Now(), id, 1, policies, out[:])
			l.mu.Unlock()
			return d.Allowed
		}
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if !take(i) {
			b.Fatal("denied")
		}
		if i%advance == advance-1 {
			clock.skew.Add(int64(advance) * step)
		}
	}
	b.StopTimer()
	if part == "lookup" {
		return // out is the warm-up's
	}
	if n := (1 << 40) - out[0].Remaining; n < int64(perKey)-2 || n > int64(perKey)+2 {
		b.Fatalf("a log holds %d entries, want about %d", n, perKey)
	}
}
