package redisstore_test

import (
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
)

// BenchmarkReplicaAck is the cost of WithReplicaAck on the Cluster: decisions
// per second (ns/op), the p99 of one decision and this process's CPU per
// decision (cpu-µs/op, getrusage user+sys), at 1, 16 and 64 callers,
// without it and with WithReplicaAck(1, 50ms) and (1, 100ms):
//
//	cd core/redisstore && go test -run '^$' -bench ReplicaAck -benchtime 3s .
func BenchmarkReplicaAck(b *testing.B) {
	client := redistest.ClusterClient(b)
	for _, cfg := range []struct {
		name string
		opts []redisstore.Option
	}{
		{"none", nil},
		{"ack=1,50ms", []redisstore.Option{redisstore.WithReplicaAck(1, 50*time.Millisecond)}},
		{"ack=1,100ms", []redisstore.Option{redisstore.WithReplicaAck(1, 100*time.Millisecond)}},
	} {
		for _, callers := range []int{1, 16, 64} {
			b.Run(cfg.name+"/callers="+strconv.Itoa(callers), func(b *testing.B) {
				store, err := redisstore.New(client, append([]redisstore.Option{redisstore.WithKeyPrefix(redistest.KeyPrefix(b, client))}, cfg.opts...)...)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = store.Close() })
				l := slidelogtest.NewLimiter(b, store, slidelog.PerDay(1_000_000_000))
				var (
					next atomic.Uint64
					mu   sync.Mutex
					lat  []time.Duration
				)
				call := func(own *[]time.Duration) bool {
					start := time.Now()
					_, err := l.Allow(b.Context(), "k"+strconv.FormatUint(next.Add(1)%10_000, 10))
					*own = append(*own, time.Since(start))
					if err != nil {
						b.Error(err)
						return false
					}
					return true
				}
				b.ReportAllocs()
				cpu := cpuTime()
				if callers == 1 {
					for b.Loop() {
						if !call(&lat) {
							return
						}
					}
				} else {
					b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0)))
					b.RunParallel(func(pb *testing.PB) {
						var own []time.Duration
						for pb.Next() {
							if !call(&own) {
								break
							}
						}
						mu.Lock()
						lat = append(lat, own...)
						mu.Unlock()
					})
				}
				b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
				if len(lat) > 0 {
					slices.Sort(lat)
					b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
				}
				if st := store.ReplicaAckStats(); st.Unacknowledged > 0 {
					b.ReportMetric(float64(st.Unacknowledged), "unacked")
				}
			})
		}
	}
}

// cpuTime is this process's CPU time, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
