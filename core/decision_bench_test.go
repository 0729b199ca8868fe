package slidelog_test

import (
	"context"
	"math/rand/v2"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
)

// BenchmarkRedisDecision measures what one decision costs this process on
// the rig's Cluster, through a client with plain options
// (redis.ClusterOptions{Addrs}) and a limiter with default options, on
// 10,000 keys at 100 per minute: allocations (allocs/op), goroutines
// started (goroutines/op, from runtime/metrics) and CPU of the whole
// process (cpu-µs/op, getrusage user+sys), with 1, 16 and 64 callers.
//
//	eval "$(scripts/redis-rig.sh env)"
//	cd core && go test -run '^$' -bench RedisDecision -benchtime 3s .
func BenchmarkRedisDecision(b *testing.B) {
	addrs := os.Getenv("SLIDELOG_CLUSTER_ADDRS")
	if addrs == "" {
		redistest.ClusterClient(b) // fails under SLIDELOG_REQUIRE_REDIS, skips otherwise
		return
	}
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(addrs, ",")})
	b.Cleanup(func() { _ = client.Close() })
	prefix := redistest.KeyPrefix(b, client)
	store, err := redisstore.New(client, redisstore.WithKeyPrefix(prefix))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = store.Close() })
	l := benchLimiter(b, store)
	b.Cleanup(func() { redistest.DeleteKeys(b, client, prefix) })
	for _, callers := range []int{1, 16, 64} {
		b.Run("callers="+strconv.Itoa(callers), func(b *testing.B) {
			b.ReportAllocs()
			var wg sync.WaitGroup
			work := make(chan struct{}, callers)
			start := goroutinesCreated()
			cpu := cpuTime()
			b.ResetTimer()
			for range callers {
				wg.Go(func() {
					for range work {
						key := benchKeys[rand.IntN(len(benchKeys))]
						if _, err := l.Allow(context.Background(), key); err != nil {
							b.Error(err)
						}
					}
				})
			}
			for b.Loop() {
				work <- struct{}{}
			}
			close(work)
			wg.Wait()
			b.StopTimer()
			// The callers themselves are not the decisions' goroutines.
			b.ReportMetric(float64(goroutinesCreated()-start-uint64(callers))/float64(b.N), "goroutines/op")
			b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// goroutinesCreated is how many goroutines the process has started.
func goroutinesCreated() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
