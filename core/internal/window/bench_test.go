package window

import (
	"fmt"
	"testing"
)

const benchWindow = 10_000_000 // 10 s in microseconds

var benchLimits = []int64{10, 100, 1_000, 100_000}

func benchPolicy(limit int64, bucketed bool) []Policy {
	p := Policy{Limit: limit, Window: benchWindow}
	if bucketed {
		p.Precision = benchWindow / 100
	}
	return []Policy{p}
}

func modelName(bucketed bool) string {
	if bucketed {
		return "bucketed"
	}
	return "exact"
}

// runEachModel runs f as a sub-benchmark named "model/limit=N" for each
// model (exact, then bucketed) and each of benchLimits, with the policies
// benchPolicy gives for them.
func runEachModel(b *testing.B, f func(b *testing.B, limit int64, bucketed bool, policies []Policy)) {
	for _, bucketed := range []bool{false, true} {
		for _, limit := range benchLimits {
			b.Run(fmt.Sprintf("%s/limit=%d", modelName(bucketed), limit), func(b *testing.B) {
				f(b, limit, bucketed, benchPolicy(limit, bucketed))
			})
		}
	}
}

// warmUp takes n admissions of one unit on l, one every step µs after
// now, with the IDs after id, and returns the last time and ID it used.
func warmUp(l *Log, policies []Policy, out []State, now int64, id uint64, step, n int64) (int64, uint64) {
	for range n {
		now += step
		id++
		l.Take(now, id, 1, policies, out)
	}
	return now, id
}

// BenchmarkTakeAllow decides admissions on a warm key whose window stays
// nearly full: one admission every Window/Limit+1 µs (bucketed: every
// (Window+2·Precision)/(Limit-1)+1 µs), so every request fits. It reports the key's bytes of
// state.
func BenchmarkTakeAllow(b *testing.B) {
	runEachModel(b, func(b *testing.B, limit int64, bucketed bool, policies []Policy) {
		out := make([]State, 1)
		var l Log
		step := benchWindow/limit + 1
		if bucketed {
			// Buckets count up to one width longer than the window.
			step = (benchWindow+2*policies[0].Precision)/(limit-1) + 1
		}
		now, id := warmUp(&l, policies, out, 1_700_000_000_000_000, 1, step, 2*limit+2)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			now += step
			id++
			if !l.Take(now, id, 1, policies, out).Allowed {
				b.Fatal("denied")
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(l.Bytes()), "B/key")
	})
}

// BenchmarkTakeDeny decides denials on a warm key whose window is full.
func BenchmarkTakeDeny(b *testing.B) {
	runEachModel(b, func(b *testing.B, limit int64, _ bool, policies []Policy) {
		out := make([]State, 1)
		var l Log
		now, id := warmUp(&l, policies, out, 1_700_000_000_000_000, 1, benchWindow/limit/2, limit)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			id++
			if l.Take(now, id, 1, policies, out).Allowed {
				b.Fatal("allowed")
			}
		}
	})
}

// BenchmarkBytesPerKey reports a key's state with its window full, at
// limits 10, 100 and 1,000, exact and with Precision Window/100 and
// Window/1000. It measures memory, not time.
func BenchmarkBytesPerKey(b *testing.B) {
	for _, buckets := range []int64{0, 100, 1000} {
		for _, limit := range benchLimits[:3] {
			name := "exact"
			if buckets > 0 {
				name = fmt.Sprintf("buckets=%d", buckets)
			}
			b.Run(fmt.Sprintf("%s/limit=%d", name, limit), func(b *testing.B) {
				p := []Policy{{Limit: limit, Window: benchWindow}}
				if buckets > 0 {
					p[0].Precision = benchWindow / buckets
				}
				out := make([]State, 1)
				var bytes int
				for range b.N {
					var l Log
					now := int64(1_700_000_000_000_000)
					for i := range limit {
						l.Take(now+i*(benchWindow/limit), uint64(i+1), 1, p, out)
					}
					bytes = l.Bytes()
				}
				b.ReportMetric(float64(bytes), "B/key")
			})
		}
	}
}
