package redisstore_test

import (
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
)

// BenchmarkUnixSocketDecision is a decision on a redis-server of its own
// reached over a Unix socket, with go-redis's plain options, at 1, 16 and
// 64 callers: decisions per second (ns/op), this process's CPU per
// decision (cpu-µs/op, getrusage user+sys) and the server's
// (redis-cpu-µs/op, INFO cpu), the server at normal priority. A read on a Unix socket looks
// at the bytes waiting before it takes them (two system calls where TCP
// makes one), so that the store can tell an answer from a silent node
// there too:
//
//	cd core/redisstore && go test -run '^$' -bench UnixSocketDecision -benchtime 3s .
func BenchmarkUnixSocketDecision(b *testing.B) {
	sock := filepath.Join(b.TempDir(), "redis.sock")
	redistest.StartServer(b, redistest.ServerConfig{Args: []string{"--unixsocket", sock, "--unixsocketperm", "700"}})
	client := redis.NewClient(&redis.Options{Network: "unix", Addr: sock})
	b.Cleanup(func() { _ = client.Close() })
	store, err := redisstore.New(client)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = store.Close() })
	l := slidelogtest.NewLimiter(b, store, slidelog.PerDay(1_000_000_000))
	var next atomic.Uint64
	allow := func() bool {
		_, err := l.Allow(b.Context(), "k"+strconv.FormatUint(next.Add(1)%10_000, 10))
		if err != nil {
			b.Error(err)
		}
		return err == nil
	}
	for _, callers := range []int{1, 16, 64} {
		b.Run("callers="+strconv.Itoa(callers), func(b *testing.B) {
			b.ReportAllocs()
			cpu, rcpu := cpuTime(), mastersCPU(b, client)
			if callers == 1 {
				for b.Loop() {
					if !allow() {
						return
					}
				}
			} else {
				b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0)))
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if !allow() {
							return
						}
					}
				})
			}
			b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
			b.ReportMetric(float64((mastersCPU(b, client)-rcpu).Microseconds())/float64(b.N), "redis-cpu-µs/op")
		})
	}
}
