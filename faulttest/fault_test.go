package faulttest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/prommetrics"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest"
	"go.uber.org/goleak"
)

// TestMain checks that no goroutine outlives the suite. The in-process
// toxiproxy stops its links' goroutines asynchronously after Stop, so
// those are not counted here; slidelog's own goroutines are checked per
// fault (checkGoroutines).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2/toxics.(*ToxicStub).Run"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).read"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).write"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).RemoveToxic.func1"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*Proxy).server"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*Proxy).freeBlocker"),
	)
}

const (
	limit   = 20
	window  = time.Second
	nkeys   = 60
	workers = 8
	pace    = 2 * time.Millisecond
	// hang is how long a decision may take before the suite calls it a
	// hang: far above any latency the limiter should show (those go to
	// the report), far below the client's own timeouts chained together.
	hang = 2 * time.Second
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

// env is one limiter, with the default options, on its own client of the
// fault cluster, optionally through a TCP proxy per node.
type env struct {
	t      *testing.T
	c      *cluster
	client *redis.ClusterClient
	store  *redisstore.Store
	l      *slidelog.Limiter
	reg    *prometheus.Registry
	keys   []string
	nodeOf map[string]string
	// refusals records the cannot-serve replies (CLUSTERDOWN, LOADING,
	// MASTERDOWN, TRYAGAIN) the client's node clients got, with the node
	// that sent each, for a failure's message.
	refusals refusalLog
}

// refusalLog records replies by which a node said it cannot serve, as a
// go-redis hook on every node client sees them.
type refusalLog struct {
	mu  sync.Mutex
	got []string
}

// watch adds to every node client of c a hook that records its
// cannot-serve replies.
func (rl *refusalLog) watch(c *redis.ClusterClient) {
	c.OnNewNode(func(n *redis.Client) {
		n.AddHook(refusalHook{rl: rl, addr: n.Options().Addr})
	})
}

func (rl *refusalLog) note(addr string, cmds ...redis.Cmder) {
	for _, cmd := range cmds {
		err := cmd.Err()
		if err == nil {
			continue
		}
		for _, p := range []string{"CLUSTERDOWN", "LOADING", "MASTERDOWN", "TRYAGAIN"} {
			if strings.HasPrefix(err.Error(), p) {
				rl.mu.Lock()
				rl.got = append(rl.got, fmt.Sprintf("%s %s from %s", time.Now().Format("15:04:05.000"), err, addr))
				rl.mu.Unlock()
				break
			}
		}
	}
}

// String returns the first replies recorded, one per line.
func (rl *refusalLog) String() string {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if len(rl.got) == 0 {
		return "no node answered CLUSTERDOWN, LOADING, MASTERDOWN or TRYAGAIN"
	}
	return fmt.Sprintf("%d cannot-serve replies, the first: %s", len(rl.got), strings.Join(rl.got[:min(20, len(rl.got))], "; "))
}

type refusalHook struct {
	rl   *refusalLog
	addr string
}

func (h refusalHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h refusalHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.rl.note(h.addr, cmd)
		return err
	}
}

func (h refusalHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.rl.note(h.addr, cmds...)
		return err
	}
}

func newEnv(t *testing.T, c *cluster, p slidelog.Policy, opts ...slidelog.Option) *env {
	return newEnvVia(t, c, nil, p, opts...)
}

// newEnvWith is newEnv with options for the store.
func newEnvWith(t *testing.T, c *cluster, p slidelog.Policy, storeOpts []redisstore.Option, opts ...slidelog.Option) *env {
	return newEnvViaWith(t, c, nil, p, storeOpts, opts...)
}

// newEnvVia is newEnv with the client dialling every node through px.
func newEnvVia(t *testing.T, c *cluster, px *proxies, p slidelog.Policy, opts ...slidelog.Option) *env {
	return newEnvViaWith(t, c, px, p, nil, opts...)
}

func newEnvViaWith(t *testing.T, c *cluster, px *proxies, p slidelog.Policy, storeOpts []redisstore.Option, opts ...slidelog.Option) *env {
	t.Helper()
	e := &env{t: t, c: c, reg: prometheus.NewRegistry(), nodeOf: make(map[string]string)}
	o := redisstore.ClusterOptions(c.addrs()...)
	if px != nil {
		o.Dialer = px.dial
	}
	e.client = redis.NewClusterClient(o)
	e.refusals.watch(e.client)
	var err error
	e.store, err = redisstore.New(e.client, append([]redisstore.Option{redisstore.WithKeyPrefix("fault:" + t.Name() + ":")}, storeOpts...)...)
	if err != nil {
		t.Fatal(err)
	}
	// Named as masterOf computes its keys (the default name of a limiter on
	// Redis also carries the program's path).
	opts = append([]slidelog.Option{slidelog.WithName(p.String()), slidelog.WithObserver(prommetrics.New(e.reg))}, opts...)
	e.l, err = slidelog.New(e.store, p, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.l.Close(); _ = e.client.Close() })
	for i := range nkeys {
		k := "k-" + strconv.Itoa(i)
		e.keys = append(e.keys, k)
		m, err := e.client.MasterForKey(t.Context(), e.store.LogKey(e.l.Name(), k))
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

func (ld *load) snapshot() []decision {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	return slices.Clone(ld.ds)
}

// report holds the figures of one scenario.
type report struct {
	decisions, errors, fallback, redis, cache int
	// fallbackHealthy counts failure-mode decisions for keys of nodes the
	// scenario did not touch.
	fallbackHealthy int
	// p99 and max are over the decisions of the faulted node's keys made
	// while the fault lasted (all decisions when no one node is faulted).
	p99, max           time.Duration
	overAll, overRedis int
	// overRedisKey is the most by which one key's fullest window of Redis
	// admissions passed the limit; overRedisHealthy sums the excess over
	// the keys of nodes the scenario did not touch.
	overRedisKey, overRedisHealthy int
}

// overAdmission returns, summed over keys, by how much the most admissions
// in any window of length w exceeded l, by DecidedAt
// (slidelogtest.CheckWindows).
func overAdmission(ds []decision, l int, w time.Duration, keep func(decision) bool) int {
	var as []slidelogtest.Admission
	for _, d := range ds {
		if d.err == nil && d.allowed && keep(d) {
			as = append(as, slidelogtest.Admission{Key: d.key, Start: time.UnixMicro(d.at)})
		}
	}
	_, over := slidelogtest.CheckWindows(as, l, w)
	excess := 0
	for _, o := range over {
		excess += o.Units - l
	}
	return excess
}

// excessByKey returns, for every key whose fullest window of the
// admissions kept by keep (by DecidedAt) passed l, by how much.
func excessByKey(ds []decision, l int, w time.Duration, keep func(decision) bool) map[string]int {
	var as []slidelogtest.Admission
	for _, d := range ds {
		if d.err == nil && d.allowed && keep(d) {
			as = append(as, slidelogtest.Admission{Key: d.key, Start: time.UnixMicro(d.at)})
		}
	}
	_, over := slidelogtest.CheckWindows(as, l, w)
	out := make(map[string]int, len(over))
	for _, o := range over {
		out[o.Key] = max(out[o.Key], o.Units-l)
	}
	return out
}

// peakWindow returns the most admissions kept by keep in any window of
// length w of one key, counting only windows that start at or after from
// (zero: all): slidelogtest.CheckWindows's fullest window over the
// admissions decided from then on.
func peakWindow(ds []decision, w time.Duration, from time.Time, keep func(decision) bool) int {
	var as []slidelogtest.Admission
	for _, d := range ds {
		at := time.UnixMicro(d.at)
		if d.err == nil && d.allowed && keep(d) && !at.Before(from) {
			as = append(as, slidelogtest.Admission{Key: d.key, Start: at})
		}
	}
	fullest, _ := slidelogtest.CheckWindows(as, 0, w)
	peak := 0
	for _, f := range fullest {
		peak = max(peak, f.Units)
	}
	return peak
}

// summarize computes the report of ds. faulted names the node whose keys
// the fault affects ("" for none or all); from and to bound the fault.
func summarize(ds []decision, nodeOf map[string]string, faulted string, from, to time.Time) report {
	r := report{decisions: len(ds)}
	var lat []time.Duration
	for _, d := range ds {
		switch {
		case d.err != nil:
			r.errors++
		case d.src == redisstore.Source:
			r.redis++
		case d.src == slidelog.SourceDenyCache:
			r.cache++
		default:
			r.fallback++
			if faulted != "" && nodeOf[d.key] != faulted {
				r.fallbackHealthy++
			}
		}
		if (faulted == "" || nodeOf[d.key] == faulted) && !d.start.Before(from) && d.start.Before(to) {
			lat = append(lat, d.took)
		}
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		r.p99 = lat[len(lat)*99/100]
		r.max = lat[len(lat)-1]
	}
	r.overAll = overAdmission(ds, limit, window, func(decision) bool { return true })
	r.overRedis = overAdmission(ds, limit, window, func(d decision) bool { return d.src == redisstore.Source })
	for key, excess := range excessByKey(ds, limit, window, func(d decision) bool { return d.src == redisstore.Source }) {
		r.overRedisKey = max(r.overRedisKey, excess)
		if faulted != "" && nodeOf[key] != faulted {
			r.overRedisHealthy += excess
		}
	}
	return r
}

// faultReport collects the table rows make faults writes into
// docs/operations.md (SLIDELOG_FAULT_REPORT names the file).
var faultReport struct {
	mu       sync.Mutex
	rows     []string
	failover []string // rows of the failover durability table
}

func (r report) log(t *testing.T, name, extra string, regs ...*prometheus.Registry) {
	t.Helper()
	if len(regs) > 0 && r.fallback > 0 {
		extra += "; failure mode by reason: " + reasons(t, regs...)
	}
	share := 0.0
	if r.decisions > 0 {
		share = 100 * float64(r.fallback) / float64(r.decisions)
	}
	t.Logf("FAULT %-14s decisions=%d errors=%d redis=%d deny_cache=%d failure_mode=%d (%.1f%%) failure_mode_on_healthy_nodes=%d p99=%v max=%v over_admission_all=%d over_admission_redis=%d %s",
		name, r.decisions, r.errors, r.redis, r.cache, r.fallback, share, r.fallbackHealthy, r.p99.Round(100*time.Microsecond), r.max.Round(100*time.Microsecond), r.overAll, r.overRedis, extra)
	faultReport.mu.Lock()
	defer faultReport.mu.Unlock()
	faultReport.rows = append(faultReport.rows, fmt.Sprintf("| %s | %d | %d | %d (%.1f%%) | %d | %v | %v | %d | %d | %s |",
		name, r.decisions, r.errors, r.fallback, share, r.fallbackHealthy, r.p99.Round(100*time.Microsecond), r.max.Round(100*time.Microsecond), r.overRedis, r.overAll, extra))
}

// writeFaultReport writes the collected rows as a markdown table.
func writeFaultReport(t *testing.T) {
	path := os.Getenv("SLIDELOG_FAULT_REPORT")
	if path == "" {
		return
	}
	var b strings.Builder
	b.WriteString("| fault | decisions | errors | failure mode (share) | failure mode, keys of healthy nodes | p99 (faulted keys) | slowest | over-admission, Redis | over-admission, all | notes |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, row := range faultReport.rows {
		b.WriteString(row + "\n")
	}
	if len(faultReport.failover) > 0 {
		fmt.Fprintf(&b, "\nFailover durability (%d keys, limit %d per %v offered %d/s each, FailClosed; the replica misses the master's last %v of writes, then the master fails; an independent checker counts, per key, admissions whose calls all began and ended within one window):\n\n",
			failKeys, failLimit, failWindow, failRate, failGap)
		b.WriteString("| configuration | fault | runs | admissions | admissions in the gap | admissions lost | keys with a window over the limit | fullest window | errors | notes |\n")
		b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
		// The failover runs end in any order (they run in parallel).
		slices.Sort(faultReport.failover)
		for _, row := range faultReport.failover {
			b.WriteString(row + "\n")
		}
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Errorf("write fault report: %v", err)
	}
}

// check asserts what must hold whatever the machine's load: no errors, no
// over-admission by Redis, no failure-mode decision for keys of nodes the
// fault did not touch, and no decision that hangs.
func (r report) check(t *testing.T, ds []decision) {
	t.Helper()
	r.checkWithLoss(t, ds, 0)
}

// checkWithLoss is check for a fault that fails a master over: Redis may
// then over-admit what the old master recorded and did not replicate (or
// recorded after waking as a stale master), at most lost (one window's
// worth, the limit) in any window of each of its keys, and nothing for
// the keys of the other nodes.
func (r report) checkWithLoss(t *testing.T, ds []decision, lost int) {
	t.Helper()
	for _, p := range r.problems(ds, lost) {
		t.Error(p)
	}
}

// problems lists what checkWithLoss fails on.
func (r report) problems(ds []decision, lost int) []string {
	var out []string
	if r.errors != 0 {
		out = append(out, fmt.Sprintf("%d errors, first %v; want 0", r.errors, firstErr(ds)))
	}
	if r.overRedisKey > lost {
		out = append(out, fmt.Sprintf("Redis over-admitted %d in one window of a key; want at most %d", r.overRedisKey, lost))
	}
	if r.overRedisHealthy != 0 {
		out = append(out, fmt.Sprintf("Redis over-admitted %d on keys of healthy nodes; want 0", r.overRedisHealthy))
	}
	if r.fallbackHealthy != 0 {
		out = append(out, fmt.Sprintf("%d failure-mode decisions for keys of healthy nodes; want 0", r.fallbackHealthy))
	}
	for _, d := range ds {
		if d.took > hang {
			out = append(out, fmt.Sprintf("a decision took %v (%v): a hang; started %v key %q", d.took, d.src, d.start.Format("15:04:05.000"), d.key))
			break
		}
	}
	return out
}

func firstErr(ds []decision) error {
	for _, d := range ds {
		if d.err != nil {
			return d.err
		}
	}
	return nil
}

// recovery returns how long after t the first Redis decision of a key on
// addr was made, or -1.
func recovery(ds []decision, nodeOf map[string]string, addr string, t time.Time) time.Duration {
	best := time.Duration(-1)
	for _, d := range ds {
		if nodeOf[d.key] == addr && d.src == redisstore.Source && d.start.After(t) {
			if r := d.start.Add(d.took).Sub(t); best < 0 || r < best {
				best = r
			}
		}
	}
	return best
}

// requireRecovery fails the test unless keys of addr were decided by Redis
// again after t.
func requireRecovery(t *testing.T, ds []decision, nodeOf map[string]string, addr string, t0 time.Time) time.Duration {
	t.Helper()
	rec := recovery(ds, nodeOf, addr, t0)
	if rec < 0 {
		t.Errorf("keys of %s never went back to Redis after the fault ended", addr)
	}
	return rec
}

// ourGoroutines counts the goroutines running slidelog's code (not the
// test's, go-redis's idle pool or the proxy's).
func ourGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "github.com/slidelog/slidelog/core.") {
			count++
		}
	}
	return count
}

// checkGoroutines waits up to 10 s for slidelog's goroutines to come back
// to baseline (plus a few), fails the test if they do not, and returns
// their count.
func checkGoroutines(t *testing.T, baseline int) int {
	t.Helper()
	var after int
	for range 100 {
		if after = ourGoroutines(); after <= baseline+workers/2 {
			return after
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("goroutines: %d after the load, %d before", after, baseline)
	return after
}

// proxies puts an in-process toxiproxy in front of one node; clients
// reach that node's address through it by their Dialer, and every other
// node directly, so that the proxy's own goroutines (a network inside
// the test process) cannot delay the replies of healthy nodes.
type proxies struct {
	byAddr map[string]*toxiproxy.Proxy
}

func newProxies(t *testing.T, addrs ...string) *proxies {
	t.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	px := &proxies{byAddr: make(map[string]*toxiproxy.Proxy)}
	for _, addr := range addrs {
		p := toxiproxy.NewProxy(srv, "node-"+addr, "127.0.0.1:0", addr)
		if err := p.Start(); err != nil {
			t.Fatalf("proxy for %s: %v", addr, err)
		}
		t.Cleanup(p.Stop)
		px.byAddr[addr] = p
	}
	return px
}

func (px *proxies) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if p, ok := px.byAddr[addr]; ok {
		addr = p.Listen
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// masterOf returns the address of the master that holds key of the
// limiter named name, as newEnv's store will name it.
func masterOf(t *testing.T, c *cluster, name, key string) string {
	t.Helper()
	client := redis.NewClusterClient(redisstore.ClusterOptions(c.addrs()...))
	defer client.Close()
	store, err := redisstore.New(client, redisstore.WithKeyPrefix("fault:"+t.Name()+":"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := client.MasterForKey(t.Context(), store.LogKey(name, key))
	if err != nil {
		t.Fatal(err)
	}
	return m.Options().Addr
}

// toxic adds a toxic to the proxy of addr; the returned func removes it.
func (px *proxies) toxic(t *testing.T, addr, json string) func() {
	t.Helper()
	p := px.byAddr[addr]
	w, err := p.Toxics.AddToxicJson(strings.NewReader(json))
	if err != nil {
		t.Fatalf("toxic %s: %v", json, err)
	}
	return func() {
		if err := p.Toxics.RemoveToxic(context.Background(), w.Name); err != nil {
			t.Errorf("remove toxic %s: %v", w.Name, err)
		}
	}
}

func TestFaults(t *testing.T) {
	c := startCluster(t)
	p := slidelog.Policy{Name: "p", Limit: limit, Window: window}
	t.Cleanup(func() { writeFaultReport(t) })

	t.Run("KillMaster", func(t *testing.T) {
		c.t = t
		e := newEnv(t, c, p)
		victim := c.byAddr(e.nodeOf[e.keys[0]])
		survivor := c.replicaOf(victim)
		baseline := ourGoroutines()
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
			logb, _ := exec.Command("grep", "-i", "-E", "fail|vote|elect", survivor.Dir+"/redis.log").CombinedOutput()
			t.Fatalf("the replica was not promoted within 15 s; victim %s survivor %s:\n%s", victim.Addr, survivor.Addr, logb)
		}
		time.Sleep(3 * time.Second)
		ds := ld.finish()
		r := summarize(ds, e.nodeOf, victim.Addr, killed, promoted)
		r.checkWithLoss(t, ds, limit)
		if t.Failed() {
			t.Logf("victim %s; %s", victim.Addr, &e.refusals)
		}
		rec := requireRecovery(t, ds, e.nodeOf, victim.Addr, promoted)
		after := checkGoroutines(t, baseline)
		r.log(t, "kill -9", fmt.Sprintf("promoted after %v, back on Redis %v after promotion; slidelog goroutines %d before, %d after",
			promoted.Sub(killed).Round(time.Millisecond), rec.Round(time.Millisecond), baseline, after), e.reg)
		c.restart(victim)
		c.waitHealthy(30 * time.Second)
	})

	for _, tc := range []struct {
		name     string
		stop     time.Duration
		failover bool
	}{
		{"StopMaster", 1500 * time.Millisecond, false},        // under the node timeout
		{"StopMasterFailover", 3000 * time.Millisecond, true}, // past it: the replica takes over
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.t = t
			e := newEnv(t, c, p)
			victim := c.byAddr(e.nodeOf[e.keys[0]])
			for range 20 { // warm the pools
				_, _ = e.l.Allow(t.Context(), e.keys[rand.IntN(nkeys)])
			}
			baseline := ourGoroutines()
			ld := e.startLoad(nil)
			time.Sleep(time.Second)
			stopped := time.Now()
			c.signal(victim, syscall.SIGSTOP)
			time.Sleep(tc.stop)
			c.signal(victim, syscall.SIGCONT)
			resumed := time.Now()
			time.Sleep(2 * time.Second)
			ds := ld.finish()
			r := summarize(ds, e.nodeOf, victim.Addr, stopped, resumed)
			lost, name := 0, "SIGSTOP"
			if tc.failover {
				lost, name = limit, "SIGSTOP, failover"
			}
			r.checkWithLoss(t, ds, lost)
			if t.Failed() {
				t.Logf("victim %s; %s", victim.Addr, &e.refusals)
			}
			rec := requireRecovery(t, ds, e.nodeOf, victim.Addr, resumed)
			after := checkGoroutines(t, baseline)
			r.log(t, name, fmt.Sprintf("%v stopped; back on Redis %v after SIGCONT; slidelog goroutines %d before, %d after", tc.stop, rec.Round(time.Millisecond), baseline, after), e.reg)
			c.waitHealthy(30 * time.Second)
		})
	}

	// Three instances (their own clients) share the keys; one master is
	// stopped for 1.5 s (under the node timeout: no failover). The
	// fallbacks of all three admit meanwhile, and write back what they
	// admitted when the node answers again. Bound on any rolling window:
	// L (Redis, before the stop) + N * ceil(L/F) (the N fallbacks), F
	// being WithFallbackInstances.
	for _, instances := range []int{1, 3} {
		t.Run("ThreeInstancesStopMaster/FallbackInstances="+strconv.Itoa(instances), func(t *testing.T) {
			const n = 3
			c.t = t
			var opts []slidelog.Option
			if instances > 1 {
				opts = append(opts, slidelog.WithFallbackInstances(instances))
			}
			envs := make([]*env, n)
			for i := range envs {
				envs[i] = newEnv(t, c, p, opts...)
			}
			e := envs[0]
			victim := c.byAddr(e.nodeOf[e.keys[0]])
			loads := make([]*load, n)
			for i := range envs {
				loads[i] = envs[i].startLoad(nil)
			}
			time.Sleep(1500 * time.Millisecond)
			stopped := time.Now()
			c.signal(victim, syscall.SIGSTOP)
			time.Sleep(1500 * time.Millisecond)
			c.signal(victim, syscall.SIGCONT)
			resumed := time.Now()
			time.Sleep(2 * time.Second)
			var ds []decision
			for _, ld := range loads {
				ds = append(ds, ld.finish()...)
			}
			r := summarize(ds, e.nodeOf, victim.Addr, stopped, resumed)
			r.check(t, ds)
			requireRecovery(t, ds, e.nodeOf, victim.Addr, resumed)
			fallbackLimit := (limit + instances - 1) / instances
			bound := limit + n*fallbackLimit
			all := peakWindow(ds, window, time.Time{}, func(decision) bool { return true })
			// Windows that start once the pre-stop Redis admissions have
			// left: only the fallbacks' admissions and, after recovery,
			// Redis's, which count the written-back ones.
			recovering := peakWindow(ds, window, stopped.Add(window), func(decision) bool { return true })
			r.log(t, fmt.Sprintf("3 instances, SIGSTOP 1.5 s, WithFallbackInstances(%d)", instances),
				fmt.Sprintf("most admissions in any window %d (L=%d, N=3, stated bound L+N*ceil(L/F) = %d); in windows without pre-stop admissions %d (max(L, N*ceil(L/F)) = %d once written back)",
					all, limit, bound, recovering, max(limit, n*fallbackLimit)), envs[0].reg, envs[1].reg, envs[2].reg)
			if all > bound {
				t.Errorf("a window held %d admissions, above the stated bound %d", all, bound)
			}
		})
	}

	t.Run("BusyScript", func(t *testing.T) {
		c.t = t
		e := newEnv(t, c, p)
		victim := c.byAddr(e.nodeOf[e.keys[0]])
		if _, err := c.cli(victim, "CONFIG", "SET", "busy-reply-threshold", "100"); err != nil {
			t.Fatal(err)
		}
		ld := e.startLoad(nil)
		time.Sleep(time.Second)
		busy := exec.Command(c.cliBin, "-p", strconv.Itoa(victim.Port), "EVAL", "local i = 0 while true do i = i + 1 end", "0")
		if err := busy.Start(); err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		time.Sleep(time.Second) // under the node timeout: no failover
		var killed time.Time
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			if out, err := c.cli(victim, "SCRIPT", "KILL"); err == nil && out == "OK" {
				killed = time.Now()
				break
			}
		}
		_ = busy.Wait()
		if killed.IsZero() {
			t.Fatal("SCRIPT KILL did not succeed within 5 s")
		}
		time.Sleep(2 * time.Second)
		ds := ld.finish()
		r := summarize(ds, e.nodeOf, victim.Addr, began, killed)
		r.check(t, ds)
		rec := requireRecovery(t, ds, e.nodeOf, victim.Addr, killed)
		r.log(t, "busy script", fmt.Sprintf("1 s busy (busy-reply-threshold 100 ms), then SCRIPT KILL; back on Redis %v after", rec.Round(time.Millisecond)), e.reg)
		_, _ = c.cli(victim, "CONFIG", "SET", "busy-reply-threshold", "5000")
		c.waitHealthy(30 * time.Second)
	})

	for _, tc := range []struct {
		name, toxic, note string
	}{
		{"proxy latency", `{"name":"slow","type":"latency","stream":"downstream","attributes":{"latency":300}}`, "+300 ms on every reply"},
		{"proxy blackhole", `{"name":"hole","type":"timeout","stream":"downstream","attributes":{"timeout":0}}`, "replies held until the toxic goes"},
		{"proxy reset", `{"name":"reset","type":"reset_peer","stream":"upstream","attributes":{"timeout":0}}`, "connections reset"},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			c.t = t
			victim := masterOf(t, c, p.Name, "k-0")
			px := newProxies(t, victim)
			e := newEnvVia(t, c, px, p)
			if got := e.nodeOf[e.keys[0]]; got != victim {
				t.Fatalf("k-0 is on %s, the proxy stands before %s", got, victim)
			}
			baseline := ourGoroutines()
			ld := e.startLoad(nil)
			time.Sleep(time.Second)
			began := time.Now()
			remove := px.toxic(t, victim, tc.toxic)
			time.Sleep(2 * time.Second)
			remove()
			ended := time.Now()
			time.Sleep(2 * time.Second)
			ds := ld.finish()
			r := summarize(ds, e.nodeOf, victim, began, ended)
			r.check(t, ds)
			rec := requireRecovery(t, ds, e.nodeOf, victim, ended)
			after := checkGoroutines(t, baseline)
			r.log(t, tc.name, fmt.Sprintf("2 s, %s; back on Redis %v after; slidelog goroutines %d before, %d after", tc.note, rec.Round(time.Millisecond), baseline, after), e.reg)
		})
	}

	t.Run("ScriptFlush", func(t *testing.T) {
		c.t = t
		e := newEnv(t, c, p)
		ld := e.startLoad(nil)
		began := time.Now()
		flushes := 0
		for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
			for _, n := range c.nodes {
				if _, err := c.cli(n, "SCRIPT", "FLUSH"); err == nil {
					flushes++
				}
			}
		}
		ds := ld.finish()
		r := summarize(ds, e.nodeOf, "", began, time.Now())
		r.check(t, ds)
		r.log(t, "SCRIPT FLUSH", fmt.Sprintf("%d flushes in 3 s", flushes), e.reg)
		// NOSCRIPT is answered by EVAL in the same decision: no node fails.
		if r.fallback != 0 {
			t.Errorf("%d failure-mode decisions; SCRIPT FLUSH must cost none", r.fallback)
		}
	})

	t.Run("OutOfMemory", func(t *testing.T) {
		c.t = t
		e := newEnv(t, c, p)
		ld := e.startLoad(nil)
		time.Sleep(500 * time.Millisecond)
		masters := c.masters()
		began := time.Now()
		for _, m := range masters {
			if _, err := c.cli(m, "CONFIG", "SET", "maxmemory", "1"); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(2 * time.Second)
		for _, m := range masters {
			_, _ = c.cli(m, "CONFIG", "SET", "maxmemory", "0")
		}
		ended := time.Now()
		time.Sleep(2 * time.Second)
		ds := ld.finish()
		r := summarize(ds, e.nodeOf, "", began, ended)
		r.check(t, ds)
		activations := testutil.ToFloat64(sumOf(t, e.reg, prommetrics.MetricFallbackActivations))
		r.log(t, "OOM", fmt.Sprintf("every master at maxmemory 1 for 2 s; fallback activations metric %.0f", activations))
		// The script declares itself (#!lua, no allow-oom flag), so Redis
		// refuses it outright past maxmemory and the limiter falls back.
		if r.fallback == 0 {
			t.Errorf("no decision fell back while every master was out of memory; want OOM to reach the fallback")
		}
		if int(activations) != r.fallback {
			t.Errorf("fallback activations metric %v, fallback decisions %d: every one must be counted", activations, r.fallback)
		}
		for _, d := range ds {
			if d.err == nil && d.allowed && d.src != redisstore.Source && d.src != slidelog.SourceFallback {
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
		baseline := ourGoroutines()
		began := time.Now()
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
		r := summarize(ds, e.nodeOf, "", began, time.Now())
		admitted, cancelled, other := 0, 0, 0
		for _, d := range ds {
			switch {
			case d.err == nil && d.allowed && d.src == redisstore.Source:
				admitted++
			case errors.Is(d.err, context.Canceled) || errors.Is(d.err, context.DeadlineExceeded):
				cancelled++
			case d.err != nil:
				other++
			}
		}
		entries := int64(0)
		for _, k := range e.keys {
			n, err := e.client.ZCard(t.Context(), e.store.LogKey(e.l.Name(), k)).Result()
			if err != nil {
				t.Fatal(err)
			}
			entries += n
		}
		admitted += 20 // the warm-up calls
		r.overAll = overAdmission(ds, 100000, time.Minute, func(decision) bool { return true })
		r.overRedis = r.overAll
		after := checkGoroutines(t, baseline)
		r.log(t, "cancellation", fmt.Sprintf("callers cancel after 0-1.5 ms or time out at 10 ms; admitted %d, cancelled %d, entries in Redis %d; goroutines %d before, %d after", admitted, cancelled, entries, baseline, after))
		if other != 0 {
			t.Errorf("%d errors other than the caller's cancellation", other)
		}
		if r.fallback != 0 {
			t.Errorf("%d failure-mode decisions: a caller's cancellation is not a store failure", r.fallback)
		}
		if entries < int64(admitted) || entries > int64(admitted+cancelled) {
			t.Errorf("%d entries in Redis for %d admissions and %d cancelled calls: a call was counted twice or lost", entries, admitted, cancelled)
		}
		if open := openBreakers(t, e.reg); len(open) > 0 {
			t.Errorf("breakers of %v open: cancellations must not open them", open)
		}
	})

	t.Run("ManualFailover", func(t *testing.T) {
		c.t = t
		e := newEnv(t, c, p)
		ld := e.startLoad(nil)
		time.Sleep(500 * time.Millisecond)
		began := time.Now()
		for range 3 {
			m := c.masters()[0]
			r := c.replicaOf(m)
			if r == nil {
				t.Fatalf("master %d has no replica", m.Port)
			}
			if out, err := c.cli(r, "CLUSTER", "FAILOVER"); err != nil || out != "OK" {
				t.Fatalf("CLUSTER FAILOVER on %d: %v %s", r.Port, err, out)
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
		r := summarize(ds, e.nodeOf, "", began, time.Now())
		r.check(t, ds)
		r.log(t, "manual failover", "3 coordinated failovers (CLUSTER FAILOVER)", e.reg)
	})

	t.Run("Reshard", func(t *testing.T) {
		c.t = t
		e := newEnv(t, c, p)
		ld := e.startLoad(nil)
		time.Sleep(500 * time.Millisecond)
		to := c.nodeID(c.masters()[0])
		start := time.Now()
		out, err := exec.Command(c.cliBin, "--cluster", "reshard", c.masters()[1].Addr, "--cluster-from", "all",
			"--cluster-to", to, "--cluster-slots", "1000", "--cluster-yes").CombinedOutput()
		if err != nil {
			t.Fatalf("reshard: %v\n%s", err, out)
		}
		took := time.Since(start)
		time.Sleep(500 * time.Millisecond)
		ds := ld.finish()
		r := summarize(ds, e.nodeOf, "", start, start.Add(took))
		r.check(t, ds)
		r.log(t, "reshard", fmt.Sprintf("1000 slots moved live in %v", took.Round(time.Millisecond)), e.reg)
	})

	t.Run("AllDown", func(t *testing.T) {
		c.t = t
		e := newEnv(t, c, p, slidelog.WithFallbackMaxKeys(1000))
		baseline := ourGoroutines()
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
		fallbackKeys := testutil.ToFloat64(sumOf(t, e.reg, prommetrics.MetricFallbackKeys))
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
		r := summarize(ds, e.nodeOf, "", down, up)
		r.check(t, ds)
		back := time.Duration(-1)
		for _, d := range ds[during:] {
			if d.src == redisstore.Source && d.start.After(up) {
				if b := d.start.Add(d.took).Sub(up); back < 0 || b < back {
					back = b
				}
			}
		}
		after := checkGoroutines(t, baseline)
		r.log(t, "all down", fmt.Sprintf("10 s, 20,000 new identities meanwhile; fallback keys %.0f (bound 1000); healthy %v after restart, back on Redis %v after restart; slidelog goroutines %d before, %d after",
			fallbackKeys, healthy.Sub(up).Round(time.Millisecond), back.Round(time.Millisecond), baseline, after))
		if fallbackKeys > 1000 {
			t.Errorf("fallback holds %v keys, want at most 1000", fallbackKeys)
		}
		if back < 0 {
			t.Errorf("never back on Redis after the restart")
		}
	})

	// The failover runs take most of the suite's time, each a window or
	// more of paced load: the Cluster's two (which fail the one Cluster's
	// masters over, so one at a time: cluster) run beside the Sentinel's
	// two, which start Sentinel sets of their own, up to go test's
	// -parallel at once (make test gives 4: all at once), after the rows
	// above.
	var cluster sync.Mutex
	// Failover durability: the "before" (no acknowledgement by replicas).
	t.Run("Failover", func(t *testing.T) {
		t.Parallel()
		cluster.Lock()
		defer cluster.Unlock()
		for _, r := range failoverRows(t, c, "no replica acknowledgement") {
			// The harness must make the new master miss writes, or the
			// runs with acknowledgement prove nothing.
			if r.lost == 0 {
				t.Errorf("%s: no admission lost without acknowledgement; the replica did not miss the gap's writes", r.mode)
			}
			if r.overPeak > 2*failLimit {
				t.Errorf("%s: a window held %d admissions; the stated bound is one window's worth lost, %d", r.mode, r.overPeak, 2*failLimit)
			}
		}
	})
	// The same on Sentinel (1 master, 1 replica, 3 sentinels of their own,
	// a plain redis.NewFailoverClient): kill -9 of the master and a
	// planned SENTINEL FAILOVER, each with the replica lagging.
	t.Run("FailoverSentinel", func(t *testing.T) {
		t.Parallel()
		for _, r := range sentinelRows(t, "no replica acknowledgement") {
			if r.lost == 0 {
				t.Errorf("%s: no admission lost without acknowledgement; the replica did not miss the gap's writes", r.mode)
			}
			if r.overPeak > 2*failLimit {
				t.Errorf("%s: a window held %d admissions; the stated bound is one window's worth lost, %d", r.mode, r.overPeak, 2*failLimit)
			}
		}
	})
	// And the "after": WithReplicaAck keeps what replicas did not
	// acknowledge and writes it back to the new master.
	t.Run("FailoverReplicaAck", func(t *testing.T) {
		t.Parallel()
		cluster.Lock()
		defer cluster.Unlock()
		for _, r := range failoverRows(t, c, "WithReplicaAck(1, 50ms)", redisstore.WithReplicaAck(1, 50*time.Millisecond)) {
			if r.gapAdmits == 0 {
				t.Errorf("%s: no admission in the gap; the run proves nothing", r.mode)
			}
			if r.overKeys != 0 || r.lost != 0 {
				t.Errorf("%s: %d keys with a window over the limit (fullest %d, limit %d), %d admissions lost; want 0 with WithReplicaAck",
					r.mode, r.overKeys, r.overPeak, failLimit, r.lost)
			}
		}
	})
	t.Run("FailoverSentinelReplicaAck", func(t *testing.T) {
		t.Parallel()
		for _, r := range sentinelRows(t, "WithReplicaAck(1, 50ms)", redisstore.WithReplicaAck(1, 50*time.Millisecond)) {
			if r.gapAdmits == 0 {
				t.Errorf("%s: no admission in the gap; the run proves nothing", r.mode)
			}
			if r.overKeys != 0 || r.lost != 0 {
				t.Errorf("%s: %d keys with a window over the limit (fullest %d, limit %d), %d admissions lost; want 0 with WithReplicaAck",
					r.mode, r.overKeys, r.overPeak, failLimit, r.lost)
			}
		}
	})
}

// openBreakers returns the nodes whose breaker gauge in reg says open.
func openBreakers(t *testing.T, reg *prometheus.Registry) []string {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var open []string
	for _, f := range families {
		if f.GetName() != prommetrics.MetricBreakerState {
			continue
		}
		for _, m := range f.GetMetric() {
			if m.GetGauge().GetValue() == float64(slidelog.BreakerOpen) {
				for _, lp := range m.GetLabel() {
					if lp.GetName() == "node" {
						open = append(open, lp.GetValue())
					}
				}
			}
		}
	}
	return open
}

// reasons returns the failure-mode activations of the registries by
// reason, as "reason=n ..." for the report.
func reasons(t *testing.T, regs ...*prometheus.Registry) string {
	t.Helper()
	counts := map[string]float64{}
	for _, reg := range regs {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != prommetrics.MetricFallbackActivations {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "reason" {
						counts[l.GetValue()] += m.GetCounter().GetValue()
					}
				}
			}
		}
	}
	var parts []string
	for _, r := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s=%.0f", r, counts[r]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
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
