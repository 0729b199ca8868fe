package slidelog_test

import (
	"context"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/prommetrics"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
)

// TestClusterExactUnderLoadWithDefaults is the limiter as users get it on
// a healthy Cluster: three instances, each with its own client (two from
// slidelog.ClusterOptions, one from go-redis's plain options), hundreds of
// goroutines on a few dozen keys, every core busy with a CPU hog. Every
// decision must come from Redis (no failure mode, no breaker opening), and
// no rolling window may hold more than the limit.
func TestClusterExactUnderLoadWithDefaults(t *testing.T) {
	const limit, window, keysN, callersPerInstance = 50, time.Second, 30, 100
	prefix := redistest.KeyPrefix(t, redistest.ClusterClient(t))
	addrs := strings.Split(os.Getenv(redistest.EnvClusterAddrs), ",")
	policy := slidelog.Policy{Name: "p", Limit: limit, Window: window}

	clients := []*redis.ClusterClient{
		redis.NewClusterClient(redisstore.ClusterOptions(addrs...)),
		redis.NewClusterClient(redisstore.ClusterOptions(addrs...)),
		redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs}),
	}
	var limiters []*slidelog.Limiter
	var regs []*prometheus.Registry
	var openings []*openCounter
	for _, c := range clients {
		t.Cleanup(func() { _ = c.Close() })
		store, err := redisstore.New(c, redisstore.WithKeyPrefix(prefix))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = store.Close() })
		reg := prometheus.NewRegistry()
		opened := &openCounter{}
		openings = append(openings, opened)
		l, err := slidelog.New(store, policy, slidelog.WithObserver(prommetrics.New(reg)), slidelog.WithLogger(slog.New(opened)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		limiters = append(limiters, l)
		regs = append(regs, reg)
	}
	store0, err := redisstore.New(clients[0], redisstore.WithKeyPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store0.Close() })
	keys := clusterKeysOnEveryMaster(t, clients[0], store0, slidelog.Namespace(limiters[0]), keysN)

	cpuHogs(t, runtime.NumCPU()) // every core busy
	var mu sync.Mutex
	var admitted []admission
	var wg sync.WaitGroup
	for _, l := range limiters {
		wg.Go(func() {
			a := flood(t, l, keys, callersPerInstance, 4*time.Second)
			mu.Lock()
			admitted = append(admitted, a...)
			mu.Unlock()
		})
	}
	wg.Wait()

	peak := checkWindows(t, admitted, limit, window)
	if len(peak) != len(keys) {
		t.Errorf("admissions seen for %d keys, want %d", len(peak), len(keys))
	}
	for i, l := range limiters {
		for node, st := range slidelog.BreakerStates(l) {
			if st != "closed" {
				t.Errorf("instance %d: breaker of healthy node %s is %s", i, node, st)
			}
		}
		if n := metricValue(t, regs[i], prommetrics.MetricFallbackActivations); n != 0 {
			t.Errorf("instance %d: %v decisions by the failure mode on a healthy Cluster, want 0; by reason: %v", i, n, labelCounts(t, regs[i], prommetrics.MetricFallbackActivations, "reason"))
		}
		if n := openings[i].n.Load(); n != 0 {
			t.Errorf("instance %d: %v breaker openings on a healthy Cluster, want 0", i, n)
		}
	}
	t.Logf("%d admissions over %d keys from 3 instances x %d goroutines beside a CPU hog; peak per window %v", len(admitted), len(keys), callersPerInstance, maxOf(peak))
}

func maxOf(m map[string]int) int {
	n := 0
	for _, v := range m {
		n = max(n, v)
	}
	return n
}

// openCounter is a slog handler that counts the limiter's log records of
// a breaker opening.
type openCounter struct{ n atomic.Int64 }

func (h *openCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h *openCounter) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "to" && a.Value.String() == "open" {
			h.n.Add(1)
		}
		return true
	})
	return nil
}
func (h *openCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *openCounter) WithGroup(string) slog.Handler      { return h }

// labelCounts sums the counter name of reg by the value of label.
func labelCounts(t *testing.T, reg *prometheus.Registry, name, label string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label {
					out[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}
