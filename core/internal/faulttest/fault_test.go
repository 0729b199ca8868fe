package faulttest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	slidelog "github.com/slidelog/slidelog/core"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	deadline = 50 * time.Millisecond
	limit    = 20
	window   = time.Second
	nkeys    = 60
	workers  = 8
	pace     = 2 * time.Millisecond
)

type decision struct {
	key     string
	allowed bool
	src     slidelog.Source
	at      int64 // DecidedAt, microseconds
	start   time.Time
	took    time.Duration
	err     error
}

// env is one limiter on its own client of the fault cluster.
type env struct {
	t      *testing.T
	c      *cluster
	client *redis.ClusterClient
	store  *slidelog.RedisStore
	l      *slidelog.Limiter
	reg    *prometheus.Registry
	keys   []string
	nodeOf map[string]string
}

func newEnv(t *testing.T, c *cluster, p slidelog.Policy, opts ...slidelog.Option) *env {
	t.Helper()
	e := &env{t: t, c: c, reg: prometheus.NewRegistry(), nodeOf: make(map[string]string)}
	e.client = redis.NewClusterClient(slidelog.ClusterOptions(c.addrs()...))
	var err error
	e.store, err = slidelog.NewRedisStore(e.client, slidelog.WithKeyPrefix("fault:"+t.Name()+":"))
	if err != nil {
		t.Fatal(err)
	}
	opts = append([]slidelog.Option{slidelog.WithDecisionDeadline(deadline), slidelog.WithMetrics(e.reg)}, opts...)
	e.l, err = slidelog.New(e.store, p, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.l.Close(); _ = e.client.Close() })
	for i := range nkeys {
		k := "k-" + strconv.Itoa(i)
		e.keys = append(e.keys, k)
		m, err := e.client.MasterForKey(t.Context(), e.store.Key(e.l.Namespace(), k))
		if err != nil {
			t.Fatal(err)
		}
		e.nodeOf[k] = m.Options().Addr
	}
	return e
}

// load runs workers that call Allow on random keys until stop.
type load struct {
	mu   sync.Mutex
	ds   []decision
	stop chan struct{}
	wg   sync.WaitGroup
}

func (e *env) startLoad(ctxFn func() (context.Context, context.CancelFunc)) *load {
	if ctxFn == nil {
		ctxFn = func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }
	}
	ld := &load{stop: make(chan struct{})}
	for range workers {
		ld.wg.Go(func() {
			for {
				select {
				case <-ld.stop:
					return
				default:
				}
				key := e.keys[rand.IntN(len(e.keys))]
				ctx, cancel := ctxFn()
				start := time.Now()
				res, err := e.l.Allow(ctx, key)
				took := time.Since(start)
				cancel()
				ld.mu.Lock()
				ld.ds = append(ld.ds, decision{key: key, allowed: res.Allowed, src: res.Source, at: res.DecidedAt.UnixMicro(), start: start, took: took, err: err})
				ld.mu.Unlock()
				time.Sleep(pace)
			}
		})
	}
	return ld
}

func (ld *load) finish() []decision {
	close(ld.stop)
	ld.wg.Wait()
	return ld.ds
}

// report holds the figures of one scenario.
type report struct {
	decisions, errors, fallback, redis, cache int
	p99, max                                  time.Duration
	overAll, overRedis                        int
}

// overAdmission returns, summed over keys, by how much the most admissions
// in any window of length w exceeded l (two-pointer scan over DecidedAt).
func overAdmission(ds []decision, l int, w time.Duration, keep func(decision) bool) int {
	byKey := make(map[string][]int64)
	for _, d := range ds {
		if d.err == nil && d.allowed && keep(d) {
			byKey[d.key] = append(byKey[d.key], d.at)
		}
	}
	over := 0
	for _, ats := range byKey {
		slices.Sort(ats)
		peak, j := 0, 0
		for i := range ats {
			for ats[i]-ats[j] >= w.Microseconds() {
				j++
			}
			peak = max(peak, i-j+1)
		}
		over += max(0, peak-l)
	}
	return over
}

func summarize(ds []decision) report {
	r := report{decisions: len(ds)}
	var lat []time.Duration
	for _, d := range ds {
		lat = append(lat, d.took)
		switch {
		case d.err != nil:
			r.errors++
		case d.src == slidelog.SourceFallback:
			r.fallback++
		case d.src == slidelog.SourceRedis:
			r.redis++
		case d.src == slidelog.SourceDenyCache:
			r.cache++
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if len(lat) > 0 {
		r.p99 = lat[len(lat)*99/100]
		r.max = lat[len(lat)-1]
	}
	r.overAll = overAdmission(ds, limit, window, func(decision) bool { return true })
	r.overRedis = overAdmission(ds, limit, window, func(d decision) bool { return d.src == slidelog.SourceRedis })
	return r
}

func (r report) log(t *testing.T, name string, extra string) {
	t.Helper()
	share := 0.0
	if r.decisions > 0 {
		share = 100 * float64(r.fallback) / float64(r.decisions)
	}
	t.Logf("FAULT %-12s decisions=%d errors=%d redis=%d deny_cache=%d fallback=%d (%.1f%%) p99=%v max=%v over_admission_all=%d over_admission_redis=%d %s",
		name, r.decisions, r.errors, r.redis, r.cache, r.fallback, share, r.p99.Round(100*time.Microsecond), r.max.Round(100*time.Microsecond), r.overAll, r.overRedis, extra)
}

func firstErr(ds []decision) error {
	for _, d := range ds {
		if d.err != nil {
			return d.err
		}
	}
	return nil
}

// fallbackOn counts fallback decisions for keys on master addr (or, when
// not, on every other master).
func fallbackOn(ds []decision, nodeOf map[string]string, addr string, on bool) int {
	n := 0
	for _, d := range ds {
		if d.err == nil && d.src == slidelog.SourceFallback && (nodeOf[d.key] == addr) == on {
			n++
		}
	}
	return n
}

// recovery returns how long after t the first Redis decision of a key on
// addr was made, or -1.
func recovery(ds []decision, nodeOf map[string]string, addr string, t time.Time) time.Duration {
	best := time.Duration(-1)
	for _, d := range ds {
		if nodeOf[d.key] == addr && d.src == slidelog.SourceRedis && d.start.After(t) {
			if r := d.start.Add(d.took).Sub(t); best < 0 || r < best {
				best = r
			}
		}
	}
	return best
}

func TestFaults(t *testing.T) {
	c := startCluster(t)
	p := slidelog.Policy{Name: "p", Limit: limit, Window: window}

	t.Run("KillMaster", func(t *testing.T) {
		c.t = t
		e := newEnv(t, c, p)
		victim := c.byAddr(e.nodeOf[e.keys[0]])
		survivor := c.replicaOf(victim)
		ld := e.startLoad(nil)
		time.Sleep(time.Second)
		killed := time.Now()
		c.kill(victim)
		var promoted time.Time
		for time.Since(killed) < 15*time.Second {
			if c.ownsNoSlot(survivor, victim) {
				promoted = time.Now()
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if promoted.IsZero() {
			logb, _ := exec.Command("grep", "-i", "-E", "fail|vote|elect", survivor.dir+"/redis.log").CombinedOutput()
			out := string(logb)
			t.Fatalf("the replica was not promoted within 15 s; victim %s survivor %s:\n%s", victim.addr(), survivor.addr(), out)
		}
		time.Sleep(3 * time.Second)
		ds := ld.finish()
		r := summarize(ds)
		rec := recovery(ds, e.nodeOf, victim.addr(), promoted)
		r.log(t, "kill-9", fmt.Sprintf("promoted_after=%v back_on_redis_after_promotion=%v fallback_on_other_masters=%d",
			promoted.Sub(killed).Round(time.Millisecond), rec.Round(time.Millisecond), fallbackOn(ds, e.nodeOf, victim.addr(), false)))
		if r.errors != 0 {
			t.Errorf("%d errors, first %v; want 0", r.errors, firstErr(ds))
		}
		if r.max > deadline+150*time.Millisecond {
			t.Errorf("slowest decision %v, want within the deadline %v (+150 ms slack for -race on 2 cores)", r.max, deadline)
		}
		if n := fallbackOn(ds, e.nodeOf, victim.addr(), false); n*100 > r.decisions {
			t.Errorf("%d fallback decisions for keys on healthy masters, want under 1%%", n)
		}
		if rec < 0 || rec > 2*time.Second {
			t.Errorf("back on Redis %v after promotion, want within 2 s", rec)
		}
		c.restart(victim)
		c.waitHealthy(30 * time.Second)
	})

	t.Run("StopMaster", func(t *testing.T) {
		c.t = t
		e := newEnv(t, c, p)
		victim := c.byAddr(e.nodeOf[e.keys[0]])
		for range 20 { // warm the pools
			_, _ = e.l.Allow(t.Context(), e.keys[rand.IntN(nkeys)])
		}
		baseline := runtime.NumGoroutine()
		ld := e.startLoad(nil)
		time.Sleep(time.Second)
		c.signal(victim, syscall.SIGSTOP)
		time.Sleep(3 * time.Second) // past the node timeout (2 s): its replica takes over
		c.signal(victim, syscall.SIGCONT)
		time.Sleep(2 * time.Second)
		ds := ld.finish()
		r := summarize(ds)
		var after int
		for range 50 {
			if after = runtime.NumGoroutine(); after <= baseline+workers/2 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		r.log(t, "SIGSTOP", fmt.Sprintf("goroutines_before=%d after=%d fallback_on_other_masters=%d", baseline, after, fallbackOn(ds, e.nodeOf, victim.addr(), false)))
		if r.errors != 0 {
			t.Errorf("%d errors, first %v; want 0", r.errors, firstErr(ds))
		}
		if r.max > deadline+50*time.Millisecond {
			t.Errorf("slowest decision %v, want within the deadline %v (+50 ms slack)", r.max, deadline)
		}
		if n := fallbackOn(ds, e.nodeOf, victim.addr(), false); n != 0 {
			t.Errorf("%d fallback decisions for keys on healthy masters, want 0", n)
		}
		if after > baseline+workers/2 {
			t.Errorf("goroutines: %d after the load, %d before", after, baseline)
		}
		c.waitHealthy(30 * time.Second)
	})

	t.Run("ScriptFlush", func(t *testing.T) {
		c.t = t
		e := newEnv(t, c, p)
		ld := e.startLoad(nil)
		flushes := 0
		for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
			for _, n := range c.nodes {
				if _, err := c.cli(n, "SCRIPT", "FLUSH"); err == nil {
					flushes++
				}
			}
		}
		ds := ld.finish()
		r := summarize(ds)
		r.log(t, "SCRIPT-FLUSH", fmt.Sprintf("flushes=%d", flushes))
		// Fallbacks here are decisions that missed the deadline on a
		// loaded machine, not failures: bounded, and reported.
		if r.errors != 0 || r.fallback*100 > r.decisions || r.overRedis != 0 {
			t.Errorf("errors %d (first %v), fallback %d, over-admission by Redis %d; want 0, under 1%%, 0", r.errors, firstErr(ds), r.fallback, r.overRedis)
		}
	})

	t.Run("OutOfMemory", func(t *testing.T) {
		c.t = t
		e := newEnv(t, c, p)
		ld := e.startLoad(nil)
		time.Sleep(500 * time.Millisecond)
		masters := c.masters()
		for _, m := range masters {
			if _, err := c.cli(m, "CONFIG", "SET", "maxmemory", "1"); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(2 * time.Second)
		for _, m := range masters {
			_, _ = c.cli(m, "CONFIG", "SET", "maxmemory", "0")
		}
		time.Sleep(2 * time.Second)
		ds := ld.finish()
		r := summarize(ds)
		activations := testutil.ToFloat64(sumOf(t, e.reg, slidelog.MetricFallbackActivations))
		r.log(t, "OOM", fmt.Sprintf("fallback_activations_metric=%.0f", activations))
		if r.errors != 0 {
			t.Errorf("%d errors, first %v; want 0", r.errors, firstErr(ds))
		}
		// The script declares itself (#!lua, no allow-oom flag), so Redis
		// refuses it outright past maxmemory and the limiter falls back.
		if r.fallback == 0 {
			t.Errorf("no decision fell back while every master was out of memory; want OOM to reach the fallback")
		}
		if int(activations) != r.fallback {
			t.Errorf("fallback activations metric %v, fallback decisions %d: every one must be counted", activations, r.fallback)
		}
		for _, d := range ds {
			if d.err == nil && d.allowed && d.src != slidelog.SourceRedis && d.src != slidelog.SourceFallback {
				t.Fatalf("admission from %v: unaccounted", d.src)
			}
		}
	})

	t.Run("Cancellation", func(t *testing.T) {
		// Everything is admitted (a large limit, a long window), so every
		// entry in Redis is an admission or a cancelled call.
		c.t = t
		e := newEnv(t, c, slidelog.Policy{Name: "c", Limit: 100000, Window: time.Minute})
		for range 20 {
			_, _ = e.l.Allow(t.Context(), e.keys[rand.IntN(nkeys)])
		}
		baseline := runtime.NumGoroutine()
		ld := e.startLoad(func() (context.Context, context.CancelFunc) {
			if rand.IntN(2) == 0 {
				return context.WithTimeout(context.Background(), 10*time.Millisecond)
			}
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(time.Duration(rand.IntN(1500))*time.Microsecond, cancel)
			return ctx, cancel
		})
		time.Sleep(3 * time.Second)
		ds := ld.finish()
		r := summarize(ds)
		admitted, cancelled, other := 0, 0, 0
		for _, d := range ds {
			switch {
			case d.err == nil && d.allowed && d.src == slidelog.SourceRedis:
				admitted++
			case errors.Is(d.err, context.Canceled) || errors.Is(d.err, context.DeadlineExceeded):
				cancelled++
			case d.err != nil:
				other++
			}
		}
		entries := int64(0)
		for _, k := range e.keys {
			n, err := e.client.ZCard(t.Context(), e.store.Key(e.l.Namespace(), k)).Result()
			if err != nil {
				t.Fatal(err)
			}
			entries += n
		}
		admitted += 20 // the warm-up calls
		var after int
		for range 50 {
			if after = runtime.NumGoroutine(); after <= baseline+workers/2 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		r.log(t, "cancel", fmt.Sprintf("admitted=%d cancelled=%d other_errors=%d entries_in_redis=%d goroutines_before=%d after=%d", admitted, cancelled, other, entries, baseline, after))
		if other != 0 {
			t.Errorf("%d errors other than the caller's cancellation", other)
		}
		if entries < int64(admitted) || entries > int64(admitted+cancelled) {
			t.Errorf("%d entries in Redis for %d admissions and %d cancelled calls: a call was counted twice or lost", entries, admitted, cancelled)
		}
		if st := e.l.BreakerStates(); slices.Contains(mapValues(st), "open") {
			t.Errorf("breakers %v: cancellations must not open them", st)
		}
		if after > baseline+workers/2 {
			t.Errorf("goroutines: %d after the load, %d before", after, baseline)
		}
	})

	t.Run("ManualFailover", func(t *testing.T) {
		c.t = t
		e := newEnv(t, c, p)
		ld := e.startLoad(nil)
		time.Sleep(500 * time.Millisecond)
		for range 3 {
			m := c.masters()[0]
			r := c.replicaOf(m)
			if r == nil {
				t.Fatalf("master %d has no replica", m.port)
			}
			if out, err := c.cli(r, "CLUSTER", "FAILOVER"); err != nil || out != "OK" {
				t.Fatalf("CLUSTER FAILOVER on %d: %v %s", r.port, err, out)
			}
			for end := time.Now().Add(10 * time.Second); c.info(r, "INFO", "replication")["role"] != "master"; {
				if time.Now().After(end) {
					t.Fatal("failover did not complete in 10 s")
				}
				time.Sleep(50 * time.Millisecond)
			}
			c.waitHealthy(30 * time.Second)
			time.Sleep(500 * time.Millisecond)
		}
		ds := ld.finish()
		r := summarize(ds)
		r.log(t, "failover", "")
		if r.errors != 0 || r.overRedis != 0 {
			t.Errorf("errors %d (first %v), over-admission %d; want 0, 0", r.errors, firstErr(ds), r.overRedis)
		}
	})

	t.Run("Reshard", func(t *testing.T) {
		c.t = t
		e := newEnv(t, c, p)
		ld := e.startLoad(nil)
		time.Sleep(500 * time.Millisecond)
		to := c.nodeID(c.masters()[0])
		start := time.Now()
		out, err := exec.Command("redis-cli", "--cluster", "reshard", c.masters()[1].addr(), "--cluster-from", "all",
			"--cluster-to", to, "--cluster-slots", "1000", "--cluster-yes").CombinedOutput()
		if err != nil {
			t.Fatalf("reshard: %v\n%s", err, out)
		}
		took := time.Since(start)
		time.Sleep(500 * time.Millisecond)
		ds := ld.finish()
		r := summarize(ds)
		r.log(t, "reshard", fmt.Sprintf("slots=1000 reshard_took=%v", took.Round(time.Millisecond)))
		// Fallbacks here are decisions that missed the deadline on a
		// loaded machine, not failures: bounded, and reported.
		if r.errors != 0 || r.fallback*100 > r.decisions || r.overRedis != 0 {
			t.Errorf("errors %d (first %v), fallback %d, over-admission by Redis %d; want 0, under 1%%, 0", r.errors, firstErr(ds), r.fallback, r.overRedis)
		}
	})

	t.Run("AllDown", func(t *testing.T) {
		c.t = t
		e := newEnv(t, c, p, slidelog.WithFallbackMaxKeys(1000))
		ld := e.startLoad(nil)
		time.Sleep(500 * time.Millisecond)
		for _, n := range c.nodes {
			c.kill(n)
		}
		down := time.Now()
		// A flood of distinct identities while everything is down.
		for i := range 20000 {
			_, _ = e.l.Allow(t.Context(), "flood-"+strconv.Itoa(i))
		}
		fallbackKeys := testutil.ToFloat64(sumOf(t, e.reg, slidelog.MetricFallbackKeys))
		time.Sleep(10*time.Second - time.Since(down))
		during := len(ld.snapshot())
		for _, n := range c.nodes {
			c.restart(n)
		}
		up := time.Now()
		c.waitHealthy(60 * time.Second)
		healthy := time.Now()
		time.Sleep(3 * time.Second)
		ds := ld.finish()
		r := summarize(ds)
		downDs := ds[:during]
		errs := 0
		for _, d := range downDs {
			if d.err != nil || (d.start.After(down.Add(deadline)) && d.src == slidelog.SourceRedis) {
				errs++
			}
		}
		back := time.Duration(-1)
		for _, d := range ds[during:] {
			if d.src == slidelog.SourceRedis && d.start.After(up) {
				if b := d.start.Add(d.took).Sub(up); back < 0 || b < back {
					back = b
				}
			}
		}
		r.log(t, "all-down", fmt.Sprintf("down=10s fallback_keys_after_20000_identities=%.0f (bound 1000) restart_to_healthy=%v back_on_redis_after_restart=%v",
			fallbackKeys, healthy.Sub(up).Round(time.Millisecond), back.Round(time.Millisecond)))
		if r.errors != 0 || errs != 0 {
			t.Errorf("errors %d (first %v), non-fallback decisions while down %d; want 0", r.errors, firstErr(ds), errs)
		}
		if fallbackKeys > 1000 {
			t.Errorf("fallback holds %v keys, want at most 1000", fallbackKeys)
		}
		if back < 0 || back > healthy.Sub(up)+slidelog.DefaultBreakerOpenTimeout+2*time.Second {
			t.Errorf("back on Redis %v after the restart (healthy after %v), want within the open timeout + 2 s of healthy", back, healthy.Sub(up))
		}
	})
}

func (ld *load) snapshot() []decision {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	return slices.Clone(ld.ds)
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func sumOf(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sum"}, func() float64 { return sum })
}
