package redisstore_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
)

// BenchmarkScriptPathDecision measures what a decision costs Redis and
// this process on the paths of script.lua that common.lua does not take:
// a weighted log (every request of cost 2, one policy of 100 units a
// minute, so the log keeps running sums) and a bucketed window (100 a
// minute, precision 1 s), with 16 callers on 10,000 keys at random, on
// the rig's standalone server and Cluster. It is the comparison for a
// change of script.lua's per-call work (redis-cpu-µs/op, as
// BenchmarkMultiPolicyDecision reports it).
//
//	eval "$(scripts/redis-rig.sh env)"
//	cd core && go test -run '^$' -bench ScriptPathDecision -benchtime 3s -count 3 ./redisstore
func BenchmarkScriptPathDecision(b *testing.B) {
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = "client-" + strconv.Itoa(i)
	}
	for _, c := range redistest.PlainClients() {
		b.Run(c.Name, func(b *testing.B) {
			client := c.New(b)
			prefix := redistest.KeyPrefix(b, client)
			store, err := redisstore.New(client, redisstore.WithKeyPrefix(prefix))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = store.Close() })
			for _, path := range []struct {
				name   string
				policy slidelog.Policy
				cost   int
			}{
				{"weighted", slidelog.PerMinute(100), 2},
				{"bucketed", slidelog.Policy{Name: "b", Limit: 100, Window: time.Minute, Precision: time.Second}, 1},
			} {
				l, err := slidelog.New(store, path.policy, slidelog.WithName(path.name), slidelog.WithDenyCache(0))
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = l.Close() })
				b.Run(path.name, func(b *testing.B) {
					b.ReportAllocs()
					const callers = 16
					var wg sync.WaitGroup
					work := make(chan struct{}, callers)
					redisCPU := mastersCPU(b, client)
					cpu := processCPU()
					b.ResetTimer()
					for range callers {
						wg.Go(func() {
							for range work {
								if _, err := l.AllowN(context.Background(), keys[rand.IntN(len(keys))], path.cost); err != nil {
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
					n := float64(b.N)
					b.ReportMetric(float64((processCPU()-cpu).Microseconds())/n, "cpu-µs/op")
					b.ReportMetric(float64((mastersCPU(b, client)-redisCPU).Microseconds())/n, "redis-cpu-µs/op")
				})
			}
		})
	}
}
