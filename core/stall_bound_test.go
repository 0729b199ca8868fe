package slidelog_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
)

// stallBound is the bound docs/operations.md states for the slowest
// decision on a stopped node with a CPU hog beside it, at the default
// stall timeout: four stall timeouts of silence, plus two more for the
// monitor and the caller to be scheduled on a saturated machine.
const stallBound = 6 * slidelog.DefaultStallTimeout

// startRedis starts a redis-server of the test's own on a free port and
// returns its address and process.
func startRedis(t *testing.T) (string, *os.Process) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("SLIDELOG_REQUIRE_REDIS") != "" {
			t.Fatalf("redis-server not found: %v", err)
		}
		t.Skip("redis-server not found")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	require.Eventually(t, func() bool { return c.Ping(context.Background()).Err() == nil }, 5*time.Second, 20*time.Millisecond)
	return addr, cmd.Process
}

// cpuHogs starts n busy shell loops, killed when the test ends.
func cpuHogs(t *testing.T, n int) {
	t.Helper()
	for range n {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		require.NoError(t, cmd.Start())
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
}

// A stopped (SIGSTOP) Redis holds no decision longer than the stated
// bound (counted until the node resumes: a node that answers is waited
// for), half-open breaker probes included, with 60 goroutines deciding
// and two CPU hogs beside them (issue 18). The stall detector counts no
// ticks against the bound: a starved ticker drops them.
func TestStoppedNodeBoundWithCPUHog(t *testing.T) {
	if testing.Short() {
		t.Skip("takes about 6 s")
	}
	addr, proc := startRedis(t)
	client := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = client.Close() })
	store, err := redisstore.New(client)
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	l, err := slidelog.New(store, slidelog.PerSecond(1000))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	cpuHogs(t, 2)

	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var slowest time.Duration
	var slowestAt, stopped, resumed time.Time
	var slowestSrc slidelog.Source
	var decisions, fallback int
	var wg sync.WaitGroup
	for g := range 60 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				start := time.Now()
				res, err := l.Allow(ctx, "k"+strconv.Itoa((g*1000+i)%500))
				end := time.Now()
				mu.Lock()
				if !resumed.IsZero() && end.After(resumed) {
					// Held by a stopped node only until it resumed: a
					// node that answers is waited for.
					end = resumed
					if start.After(resumed) {
						end = start
					}
				}
				mu.Unlock()
				took := end.Sub(start)
				if err != nil {
					continue // the test's own cancellation
				}
				mu.Lock()
				if took > slowest {
					slowestAt, slowestSrc = start, res.Source
				}
				slowest = max(slowest, took)
				decisions++
				if res.Source == slidelog.SourceFallback {
					fallback++
				}
				mu.Unlock()
			}
		})
	}
	time.Sleep(500 * time.Millisecond)
	stopped = time.Now()
	require.NoError(t, proc.Signal(syscall.SIGSTOP))
	time.Sleep(3 * time.Second) // the breaker probes about every second meanwhile
	mu.Lock()
	resumed = time.Now()
	mu.Unlock()
	require.NoError(t, proc.Signal(syscall.SIGCONT))
	time.Sleep(500 * time.Millisecond)
	cancel()
	wg.Wait()
	t.Logf("%d decisions, %d by the fallback, slowest %v (bound %v), started %v after the stop, decided by %v", decisions, fallback, slowest, stallBound, slowestAt.Sub(stopped), slowestSrc)
	require.Positive(t, fallback, "no decision went to the failure mode while Redis was stopped")
	require.LessOrEqual(t, slowest, stallBound, "slowest decision")
}
