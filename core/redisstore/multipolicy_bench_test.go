package redisstore_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
)

// BenchmarkMultiPolicyDecision measures what a decision of a limiter
// with three policies (10/s, 100/min, 1000/h) costs Redis and this
// process, beside one of one policy (100/min), on the rig's standalone
// server and Cluster, with 1, 16 and 64 callers, on 10,000 keys at random
// (performance.md's cells): Redis CPU per decision (redis-cpu-µs/op:
// INFO cpu used_cpu_user + used_cpu_sys summed over the masters, before
// and after) and this process's (cpu-µs/op, getrusage user+sys). Both
// take the common path (common.lua): for three policies it measured
// 0.58-0.75x the Redis CPU of the whole script (commit 802fb82, which
// ran both paths; docs/benchmarks.md).
//
//	eval "$(scripts/redis-rig.sh env)"
//	cd core && go test -run '^$' -bench MultiPolicyDecision -benchtime 3s -count 3 ./redisstore
func BenchmarkMultiPolicyDecision(b *testing.B) {
	keys := benchKeys(10_000)
	onEachPlainClient(b, func(b *testing.B, client redis.UniversalClient, store *redisstore.Store) {
		limiters := map[string]*slidelog.Limiter{}
		for name, opts := range map[string][]slidelog.Option{
			"1": {slidelog.WithName("one")},
			"3": {slidelog.WithName("three"), slidelog.WithPolicy(slidelog.PerSecond(10), slidelog.PerHour(1000))},
		} {
			l, err := slidelog.New(store, slidelog.PerMinute(100), opts...)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = l.Close() })
			limiters[name] = l
		}
		for _, callers := range []int{1, 16, 64} {
			for _, policies := range []string{"1", "3"} {
				b.Run("callers="+strconv.Itoa(callers)+"/policies="+policies, func(b *testing.B) {
					decide(b, limiters[policies], client, keys, callers)
				})
			}
		}
	})
}

// decide runs b's decisions on l from callers goroutines and reports
// the CPU they cost Redis and this process, and the share denied.
func decide(b *testing.B, l *slidelog.Limiter, client redis.UniversalClient, keys []string, callers int) {
	denied := decideFrom(b, client, keys, callers, func(ctx context.Context, key string) (bool, error) {
		res, err := l.Allow(ctx, key)
		return res.Allowed, err
	})
	b.ReportMetric(float64(denied)/float64(b.N), "denied/op")
}

// benchKeys returns n keys, "client-0" to "client-<n-1>", for a
// benchmark's decisions to pick from at random.
func benchKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "client-" + strconv.Itoa(i)
	}
	return keys
}

// onEachPlainClient runs f as a sub-benchmark of b for each of the rig's
// plain clients (redistest.PlainClients), named after it, with the client
// and a Store on it from newBenchStore.
func onEachPlainClient(b *testing.B, f func(b *testing.B, client redis.UniversalClient, store *redisstore.Store)) {
	for _, c := range redistest.PlainClients() {
		b.Run(c.Name, func(b *testing.B) {
			client := c.New(b)
			f(b, client, newBenchStore(b, client))
		})
	}
}

// newBenchStore returns a Store on client under a key prefix of its own,
// closed when b ends. It stops b if New fails.
func newBenchStore(b *testing.B, client redis.UniversalClient) *redisstore.Store {
	prefix := redistest.KeyPrefix(b, client)
	store, err := redisstore.New(client, redisstore.WithKeyPrefix(prefix))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = store.Close() })
	return store
}

// decideFrom runs b's decisions from callers goroutines, each decision a
// call of allow on one of keys at random, and reports the CPU they cost
// this process (cpu-µs/op) and Redis's masters (redis-cpu-µs/op). It
// returns how many decisions allow reported denied; an error of allow
// fails b and counts as neither.
func decideFrom(b *testing.B, client redis.UniversalClient, keys []string, callers int, allow func(ctx context.Context, key string) (bool, error)) int {
	b.ReportAllocs()
	var wg sync.WaitGroup
	var mu sync.Mutex
	denied := 0
	work := make(chan struct{}, callers)
	redisCPU := mastersCPU(b, client)
	cpu := cpuTime()
	b.ResetTimer()
	for range callers {
		wg.Go(func() {
			for range work {
				allowed, err := allow(context.Background(), keys[rand.IntN(len(keys))])
				if err != nil {
					b.Error(err)
				} else if !allowed {
					mu.Lock()
					denied++
					mu.Unlock()
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
	n := float64(b.N)
	b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/n, "cpu-µs/op")
	b.ReportMetric(float64((mastersCPU(b, client)-redisCPU).Microseconds())/n, "redis-cpu-µs/op")
	return denied
}

// mastersCPU is used_cpu_user + used_cpu_sys summed over the masters.
func mastersCPU(b *testing.B, client redis.UniversalClient) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var mu sync.Mutex
	var total time.Duration
	read := func(ctx context.Context, node redis.UniversalClient) error {
		info, err := node.Info(ctx, "cpu").Result()
		if err != nil {
			return err
		}
		for _, line := range strings.Split(info, "\n") {
			name, v, ok := strings.Cut(strings.TrimSpace(line), ":")
			if ok && (name == "used_cpu_user" || name == "used_cpu_sys") {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return err
				}
				mu.Lock()
				total += time.Duration(f * float64(time.Second))
				mu.Unlock()
			}
		}
		return nil
	}
	if err := redistest.EachMaster(ctx, client, func(ctx context.Context, node *redis.Client) error { return read(ctx, node) }); err != nil {
		b.Fatal(err)
	}
	return total
}
