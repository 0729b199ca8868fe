package slidelog_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
)

// Benchmarks of the hot path. Redis ones need the rig (make cluster-up):
//
//	eval "$(scripts/redis-rig.sh env)"
//	cd core && go test -run '^$' -bench . -benchmem .

var benchKeys = func() []string {
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = "client-" + strconv.Itoa(i)
	}
	return keys
}()

func benchLimiter(b *testing.B, store slidelog.Store, opts ...slidelog.Option) *slidelog.Limiter {
	b.Helper()
	l, err := slidelog.New(store, slidelog.PerMinute(100), opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = l.Close()
		_ = store.Close() // a limiter does not close its store
	})
	return l
}

func BenchmarkMemoryStore(b *testing.B) {
	b.Run("OneKey", func(b *testing.B) {
		l := benchLimiter(b, memstore.New())
		b.ReportAllocs()
		for b.Loop() {
			if _, err := l.Allow(context.Background(), "client"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ManyKeys", func(b *testing.B) {
		allowInTurn(b, benchLimiter(b, memstore.New()))
	})
	// A new identity per decision at a full store of live logs: before
	// the expiry-ordered table, each evicted the least recently used log
	// (and reset it); now each is decided on the overflow log.
	b.Run("FreshKeysFullStore", func(b *testing.B) {
		l := benchLimiter(b, memstore.New(memstore.WithMaxKeys(10_000)))
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := l.Allow(context.Background(), "fresh-"+strconv.Itoa(i)); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("ManyKeysParallel", func(b *testing.B) {
		allowInParallel(b, benchLimiter(b, memstore.New()))
	})
}

// allowInTurn makes b's decisions on l one after another, on benchKeys
// in turn, and reports allocations.
func allowInTurn(b *testing.B, l *slidelog.Limiter) {
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := l.Allow(context.Background(), benchKeys[i%len(benchKeys)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// allowInParallel makes b's decisions on l from RunParallel's goroutines
// (as many as b's parallelism says), on benchKeys in turn, and reports
// allocations.
func allowInParallel(b *testing.B, l *slidelog.Limiter) {
	b.ReportAllocs()
	var next atomic.Uint64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := l.Allow(context.Background(), benchKeys[next.Add(1)%uint64(len(benchKeys))]); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func benchRedis(b *testing.B, client redis.UniversalClient, opts ...redisstore.Option) {
	l := benchLimiter(b, newRedisStore(b, client, opts...))
	b.Run("Serial", func(b *testing.B) { allowInTurn(b, l) })
	b.Run("Parallel64", func(b *testing.B) {
		b.SetParallelism(32) // 64 callers on 2 cores
		allowInParallel(b, l)
	})
}

func BenchmarkRedisStore(b *testing.B) {
	standalone := redistest.RedisClient(b)
	cluster := redistest.ClusterClient(b)
	b.Run("Standalone/Pipelined", func(b *testing.B) { benchRedis(b, standalone) })
	b.Run("Standalone/Unpipelined", func(b *testing.B) { benchRedis(b, standalone, redisstore.WithAutoPipelining(0)) })
	b.Run("Cluster/Pipelined", func(b *testing.B) { benchRedis(b, cluster) })
	b.Run("Cluster/Unpipelined", func(b *testing.B) { benchRedis(b, cluster, redisstore.WithAutoPipelining(0)) })
}

// BenchmarkPlainEvalSha is the floor a single caller can reach: one
// EVALSHA round trip of a script that does nothing.
func BenchmarkPlainEvalSha(b *testing.B) {
	client := redistest.RedisClient(b)
	noop := redis.NewScript("return 1")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := noop.Load(ctx, client).Err(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := noop.EvalSha(ctx, client, []string{"slidelogtest:noop"}).Err(); err != nil {
			b.Fatal(err)
		}
	}
}
