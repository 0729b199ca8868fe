package contender_test

import (
	"context"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/slidelog/slidelog/bench/contender"
)

const (
	limit  = 100
	window = time.Minute
	// manyKeys is large enough that no key reaches the limit within a
	// benchmark's iterations (up to 25 million), so the "allow" cases
	// measure admissions.
	manyKeys = 1 << 18
)

var keys = func() []string {
	k := make([]string, manyKeys)
	for i := range k {
		k[i] = "user-" + strconv.Itoa(i)
	}
	return k
}()

// BenchmarkMemory compares slidelog's memory store with the in-process
// peers: "allow" spreads calls over 262,144 keys so that every call is
// admitted, "deny" floods one key far over its limit.
func BenchmarkMemory(b *testing.B) {
	for _, name := range contender.Memory {
		b.Run(benchName(name), func(b *testing.B) {
			newLimiter := func(b *testing.B) contender.Limiter {
				l, err := contender.NewMemory(name, limit, window)
				if err != nil {
					b.Fatal(err)
				}
				closeAtEnd(b, l)
				return l
			}
			runCases(b, newLimiter, true)
		})
	}
}

// BenchmarkRedis measures the Redis-backed contenders one call at a time on
// the standalone Redis at SLIDELOG_REDIS_ADDR, mostly for allocations per
// decision; throughput under concurrency is the harness's job
// (cmd/slidebench).
func BenchmarkRedis(b *testing.B) {
	addr := os.Getenv("SLIDELOG_REDIS_ADDR")
	if addr == "" {
		b.Skip("SLIDELOG_REDIS_ADDR is not set: no Redis to measure")
	}
	client := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	closeAtEnd(b, client)
	prefix := "slidebench:gotest:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
	b.Cleanup(func() { deleteKeys(b, client, prefix) })
	for i, name := range append(contender.Redis, contender.EvalSHA) {
		b.Run(benchName(name), func(b *testing.B) {
			newLimiter := func(b *testing.B) contender.Limiter {
				p := prefix + strconv.Itoa(i) + b.Name() + ":"
				l, err := contender.NewRedis(b.Context(), name, client, p, limit, window)
				if err != nil {
					b.Fatal(err)
				}
				closeAtEnd(b, l)
				return l
			}
			runCases(b, newLimiter, false)
		})
	}
}

// closeAtEnd closes c when b ends, failing b if Close fails.
func closeAtEnd(b *testing.B, c io.Closer) {
	b.Cleanup(func() {
		if err := c.Close(); err != nil {
			b.Error(err)
		}
	})
}

// runCases runs the four cases on fresh limiters. With touch, the "allow"
// cases first admit one request for every key, so that what is measured
// is admissions for keys the limiter already tracks, the usual case, not
// the creation of a quarter million keys.
func runCases(b *testing.B, newLimiter func(*testing.B) contender.Limiter, touch bool) {
	touchAll := func(b *testing.B, l contender.Limiter) {
		if !touch {
			return
		}
		for _, k := range keys {
			if _, err := l.Allow(context.Background(), k); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("allow", func(b *testing.B) {
		l := newLimiter(b)
		ctx := context.Background()
		touchAll(b, l)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := l.Allow(ctx, keys[i%manyKeys]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("deny", func(b *testing.B) {
		l := newLimiter(b)
		ctx := context.Background()
		flood(b, l)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := l.Allow(ctx, "flooded"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("allow-parallel", func(b *testing.B) {
		l := newLimiter(b)
		touchAll(b, l)
		var next atomic.Uint64
		b.ResetTimer()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			for pb.Next() {
				if _, err := l.Allow(ctx, keys[next.Add(1)%manyKeys]); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("deny-parallel", func(b *testing.B) {
		l := newLimiter(b)
		flood(b, l)
		b.ResetTimer()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			for pb.Next() {
				if _, err := l.Allow(ctx, "flooded"); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// flood spends the limit of the key "flooded", so that what follows is
// denied.
func flood(b *testing.B, l contender.Limiter) {
	for range 2 * limit {
		if _, err := l.Allow(context.Background(), "flooded"); err != nil {
			b.Fatal(err)
		}
	}
}

func benchName(name string) string {
	return strings.NewReplacer(" ", "_", "(", "", ")", "", "/", "-").Replace(name)
}

func deleteKeys(b *testing.B, client *redis.Client, prefix string) {
	ctx := context.Background()
	iter := client.Scan(ctx, 0, "*"+prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		if err := client.Unlink(ctx, iter.Val()).Err(); err != nil {
			b.Error(err)
		}
	}
	if err := iter.Err(); err != nil {
		b.Error(err)
	}
}
