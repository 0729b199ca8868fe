package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"

	"github.com/slidelog/slidelog/bench/contender"
)

// scalingConfig is the configuration of `slidebench scaling`.
type scalingConfig struct {
	base    int
	masters []int
	callers int
	keys    int
	limit   int
	cell    time.Duration
	warmup  time.Duration
	rounds  int
	memFill []int
	out     string
	doc     string
	in      string
}

func scalingMain(args []string) error {
	fs := newFlagSet("scaling")
	var cfg scalingConfig
	var masters, fill string
	fs.IntVar(&cfg.base, "base", 7800, "first loopback port; the cluster of n masters uses base+10*i .. base+10*i+n-1 (and +10000 for the bus)")
	fs.StringVar(&masters, "masters", "1,2,3,6", "comma-separated numbers of masters")
	fs.IntVar(&cfg.callers, "callers", 64, "concurrent callers")
	fs.IntVar(&cfg.keys, "keys", 10000, "keys the callers pick from at random")
	fs.IntVar(&cfg.limit, "limit", 100, "requests per minute per key")
	fs.DurationVar(&cfg.cell, "d", 8*time.Second, "measured time per contender per cluster")
	fs.DurationVar(&cfg.warmup, "warmup", time.Second, "unmeasured warm-up per contender per cluster")
	fs.IntVar(&cfg.rounds, "rounds", 4, "rounds per cluster: contenders take turns, each turn 1/rounds of -d")
	fs.StringVar(&fill, "mem-limits", "10,100,1000,10000", "limits at which a full slidelog log's MEMORY USAGE is measured (empty: skip)")
	fs.StringVar(&cfg.out, "out", "results/scaling.json", "results file to write")
	fs.StringVar(&cfg.doc, "doc", "", "markdown file whose scaling-* markers get the tables (empty: print them)")
	fs.StringVar(&cfg.in, "in", "", "render the tables from this results file instead of measuring")
	recordTo := fs.String("record", "recorded", "with -doc, keep the results the tables are rendered from in this directory (empty: do not)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var err error
	if cfg.masters, err = intList(masters); err != nil || len(cfg.masters) == 0 {
		return fmt.Errorf("bad -masters %q", masters)
	}
	if fill != "" {
		if cfg.memFill, err = intList(fill); err != nil {
			return fmt.Errorf("bad -mem-limits %q", fill)
		}
	}
	if cfg.callers < 1 || cfg.keys < 1 || cfg.limit < 1 || cfg.rounds < 1 {
		return errors.New("-callers, -keys, -limit and -rounds must be at least 1")
	}
	var res *ScalingResults
	if cfg.in != "" {
		if res, err = readScaling(cfg.in); err != nil {
			return err
		}
	} else {
		// Stop the servers on ^C and SIGTERM too: the run returns at its
		// next turn and its deferred stops run.
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if res, err = runScaling(ctx, cfg); err != nil {
			return err
		}
		if err := os.MkdirAll(dirOf(cfg.out), 0o755); err != nil {
			return err
		}
		if err := writeJSON(cfg.out, res); err != nil {
			return err
		}
		fmt.Printf("wrote %s\n", cfg.out)
	}
	if cfg.doc == "" {
		fmt.Print(scalingRunTable(res), "\n", scalingMemoryTable(res), "\n", scalingSizingTable(res))
		return nil
	}
	if err := writeScalingDoc(cfg.doc, res); err != nil {
		return err
	}
	fmt.Printf("wrote the tables into %s\n", cfg.doc)
	src := cfg.in
	if src == "" {
		src = cfg.out
	}
	return record(*recordTo, recordedFile{src, "scaling.json"})
}

func intList(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad number %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// ScalingResults is what `slidebench scaling` measured.
type ScalingResults struct {
	Env     ScalingEnv       `json:"env"`
	Cells   []ScalingCell    `json:"cells"`
	Memory  []ScalingMemory  `json:"memory"`
	Migrate []ScalingMigrate `json:"migrate"`
}

// ScalingEnv describes the run.
type ScalingEnv struct {
	Date         time.Time `json:"date"`
	Command      string    `json:"command"`
	CPU          string    `json:"cpu"`
	NumCPU       int       `json:"num_cpu"`
	GoVersion    string    `json:"go_version"`
	RedisVersion string    `json:"redis_version"`
	CoreRevision string    `json:"core_revision"`
	Callers      int       `json:"callers"`
	Keys         int       `json:"keys"`
	Limit        int       `json:"limit"`
	Cell         Duration  `json:"cell"`
	Rounds       int       `json:"rounds"`
	LoadStart    string    `json:"load_start"`
	LoadEnd      string    `json:"load_end"`
}

// ScalingCell is one contender on a cluster of Masters masters.
type ScalingCell struct {
	Masters   int     `json:"masters"`
	Contender string  `json:"contender"`
	Decisions int64   `json:"decisions"`
	Allowed   int64   `json:"allowed"`
	Errors    int64   `json:"errors"`
	FirstErr  string  `json:"first_error,omitempty"`
	Seconds   float64 `json:"seconds"`
	PerSec    float64 `json:"per_sec"`
	P50       float64 `json:"p50_us"`
	P99       float64 `json:"p99_us"`
	// CommandUsec is the time Redis spent executing the contender's
	// scripts (usec of EVALSHA and EVAL in INFO commandstats, all masters,
	// after CONFIG RESETSTAT), per decision, in µs.
	CommandUsec float64 `json:"command_usec_per_decision"`
	// CPUUsec is the Redis processes' CPU time (used_cpu_user +
	// used_cpu_sys deltas of INFO cpu, all masters) per decision, in µs:
	// the commands plus reading, parsing and answering the connections.
	CPUUsec float64 `json:"cpu_usec_per_decision"`
	// RedisCores is the Redis CPU time over the wall time: how many cores
	// the masters kept busy together; BusiestCore the busiest master's.
	RedisCores  float64 `json:"redis_cores"`
	BusiestCore float64 `json:"busiest_master_cores"`
	// ClientCores is this process's CPU time over the wall time (the
	// callers, go-redis, the limiter).
	ClientCores float64 `json:"client_cores"`
	// ScriptCalls counts the script calls (EVALSHA, EVAL) per decision,
	// InnerCalls the commands those scripts ran per decision.
	ScriptCalls float64 `json:"script_calls_per_decision"`
	// PerRoundTrip is decisions per round trip (single commands and
	// pipelines the Cluster client's node clients sent).
	PerRoundTrip float64 `json:"decisions_per_round_trip"`
	InnerCalls   float64 `json:"script_inner_calls_per_decision"`
}

// ScalingMemory is the Redis memory of one full key.
type ScalingMemory struct {
	Contender string  `json:"contender"`
	Limit     int     `json:"limit"`
	Entries   int64   `json:"entries"`
	Bytes     int64   `json:"memory_usage_bytes"`
	PerEntry  float64 `json:"bytes_per_entry"`
	Encoding  string  `json:"encoding"`
	// UsedPerKey is the growth of used_memory per key over Keys such keys:
	// MEMORY USAGE plus what it leaves out (the expires entry, the
	// Cluster's slot bookkeeping, allocator rounding).
	UsedPerKey float64 `json:"used_memory_per_key"`
	Keys       int     `json:"keys"`
}

func runScaling(ctx context.Context, cfg scalingConfig) (*ScalingResults, error) {
	res := &ScalingResults{Env: ScalingEnv{
		Date: time.Now().UTC(), CPU: cpuModel(), NumCPU: runtime.NumCPU(), GoVersion: runtime.Version(),
		Callers: cfg.callers, Keys: cfg.keys, Limit: cfg.limit, Cell: Duration(cfg.cell), Rounds: cfg.rounds,
		LoadStart: loadAverage(), Command: os.Getenv("SLIDEBENCH_COMMAND"),
	}}
	if res.Env.Command == "" {
		res.Env.Command = strings.Join(os.Args, " ")
	}
	res.Env.CoreRevision = coreRevision()
	for i, n := range cfg.masters {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		cells, err := scalingCluster(ctx, cfg, cfg.base+10*i, n, res)
		if err != nil {
			return nil, fmt.Errorf("%d masters: %w", n, err)
		}
		res.Cells = append(res.Cells, cells...)
	}
	res.Env.LoadEnd = loadAverage()
	return res, nil
}

// scalingCluster starts a cluster of n masters, measures every contender
// on it, and stops it. On the first cluster it also measures the bytes of
// full keys, and on the first of two masters or more the MIGRATE of full
// keys, into res.
func scalingCluster(ctx context.Context, cfg scalingConfig, base, n int, res *ScalingResults) (_ []ScalingCell, err error) {
	env := &res.Env
	fmt.Printf("starting a cluster of %d masters on ports %d-%d\n", n, base, base+n-1)
	cl, err := startCluster(ctx, base, n)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, cl.stop()) }()
	if env.RedisVersion == "" {
		if info, err := cl.nodes[0].Info(ctx, "server").Result(); err == nil {
			env.RedisVersion = infoField(info, "redis_version")
		}
	}
	// A plain go-redis Cluster client, as a user writes it, with a hook
	// on each node's client counting commands and round trips.
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.seeds()})
	cmds, trips := new(atomic.Int64), new(atomic.Int64)
	client.OnNewNode(func(node *redis.Client) { node.AddHook(commandCounter{cmds, trips}) })
	defer func() { err = errors.Join(err, client.Close()) }()
	if err := waitFor(ctx, 10*time.Second, func() error {
		return client.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return c.Ping(ctx).Err() })
	}); err != nil {
		return nil, err
	}

	if res.Memory == nil {
		if res.Memory, err = measureScalingMemory(ctx, client, cl.nodes, cfg.memFill); err != nil {
			return nil, fmt.Errorf("memory: %w", err)
		}
	}

	names := []string{contender.Slidelog, contender.RedisRate}
	limiters := make([]contender.Limiter, len(names))
	defer func() {
		for _, l := range limiters {
			if l != nil {
				err = errors.Join(err, l.Close())
			}
		}
	}()
	for i, name := range names {
		if name == contender.Slidelog {
			limiters[i], err = newDefaultSlidelog(client, cfg.limit, time.Minute)
		} else {
			limiters[i], err = contender.NewRedis(ctx, name, client, "", cfg.limit, time.Minute)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	// Every turn draws from its own 10,000 keys, so that no key reaches
	// its limit within a turn at the rates seen here: every decision is
	// an admission made by Redis, the same work for any number of masters.
	turn := 0
	keyset := func() func(worker int) func() string {
		turn++
		keys := make([]string, cfg.keys)
		for i := range keys {
			keys[i] = "t" + strconv.Itoa(turn) + ":user-" + strconv.Itoa(i)
		}
		seed := uint64(time.Now().UnixNano())
		return func(w int) func() string {
			rng := rand.New(rand.NewPCG(uint64(w), seed))
			return func() string { return keys[rng.IntN(len(keys))] }
		}
	}
	for _, l := range limiters {
		run(ctx, l, cfg.callers, keyset(), cfg.warmup, false)
	}
	acc := make([]scalingAcc, len(names))
	for r := range cfg.rounds {
		for k := range names {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			i := (k + r) % len(names)
			if err := acc[i].turn(ctx, cl.nodes, limiters[i], cfg.callers, keyset(), cfg.cell/time.Duration(cfg.rounds), trips); err != nil {
				return nil, fmt.Errorf("%s: %w", names[i], err)
			}
		}
	}
	cells := make([]ScalingCell, len(names))
	for i, name := range names {
		cells[i] = acc[i].cell(n, name)
		c := cells[i]
		fmt.Printf("%d masters  %-16s %9.0f/s  p50 %7.1fµs  p99 %8.1fµs  Redis %5.1f µs/decision in scripts, %5.1f µs CPU; Redis %.2f cores (busiest master %.2f), client %.2f cores; %.2f script calls/decision (%.1f commands inside), %.1f decisions/round trip, allowed %.1f%%, %d errors\n",
			n, name, c.PerSec, c.P50, c.P99, c.CommandUsec, c.CPUUsec, c.RedisCores, c.BusiestCore, c.ClientCores, c.ScriptCalls, c.InnerCalls, c.PerRoundTrip,
			100*float64(c.Allowed)/float64(max(c.Decisions, 1)), c.Errors)
	}
	if res.Migrate == nil && n >= 2 {
		if res.Migrate, err = measureMigrate(ctx, client, cl.nodes, cl.ports, cfg.memFill); err != nil {
			return nil, fmt.Errorf("migrate: %w", err)
		}
	}
	return cells, nil
}

// newDefaultSlidelog is slidelog as its package doc sets it up, with no
// option: redisstore.New(client) and slidelog.New(store, policy). A
// decision made by the failure mode counts as an error.
func newDefaultSlidelog(client redis.UniversalClient, limit int, window time.Duration) (contender.Limiter, error) {
	store, err := redisstore.New(client)
	if err != nil {
		return nil, err
	}
	l, err := slidelog.New(store, slidelog.Policy{Name: "bench", Limit: limit, Window: window})
	if err != nil {
		return nil, errors.Join(err, store.Close())
	}
	return defaultSlidelog{l: l, store: store}, nil
}

type defaultSlidelog struct {
	l     *slidelog.Limiter
	store *redisstore.Store
}

func (s defaultSlidelog) Allow(ctx context.Context, key string) (bool, error) {
	res, err := s.l.Allow(ctx, key)
	if err == nil && res.Source != redisstore.Source && res.Source != slidelog.SourceDenyCache {
		return false, fmt.Errorf("%w (%v)", contender.ErrFailureMode, res.Source)
	}
	return res.Allowed, err
}

func (s defaultSlidelog) Close() error { return errors.Join(s.l.Close(), s.store.Close()) }

// scalingAcc adds up one contender's turns on one cluster.
type scalingAcc struct {
	stats      workerStats
	elapsed    time.Duration
	cmdUsec    float64
	cmdCalls   int64
	innerCalls int64
	cpu        float64
	perMaster  []float64
	client     float64
	trips      int64
}

// turn measures one turn: CONFIG RESETSTAT and INFO cpu on every master,
// the callers for d, then INFO commandstats and INFO cpu again.
func (a *scalingAcc) turn(ctx context.Context, nodes []*redis.Client, l contender.Limiter, callers int, keyOf func(int) func() string, d time.Duration, trips *atomic.Int64) error {
	cpu0 := make([]float64, len(nodes))
	for i, n := range nodes {
		if err := n.ConfigResetStat(ctx).Err(); err != nil {
			return err
		}
		var err error
		if cpu0[i], err = redisCPU(ctx, n); err != nil {
			return err
		}
	}
	self0, trips0 := selfCPU(), trips.Load()
	st, elapsed := run(ctx, l, callers, keyOf, d, true)
	a.client += selfCPU() - self0
	a.trips += trips.Load() - trips0
	if a.perMaster == nil {
		a.perMaster = make([]float64, len(nodes))
	}
	for i, n := range nodes {
		cpu1, err := redisCPU(ctx, n)
		if err != nil {
			return err
		}
		a.cpu += cpu1 - cpu0[i]
		a.perMaster[i] += cpu1 - cpu0[i]
		info, err := n.Info(ctx, "commandstats").Result()
		if err != nil {
			return err
		}
		scripts, usec, inner := commandStats(info)
		a.cmdCalls += scripts
		a.cmdUsec += usec
		a.innerCalls += inner
	}
	a.stats.add(&st)
	a.elapsed += elapsed
	return nil
}

func (a *scalingAcc) cell(masters int, name string) ScalingCell {
	st, secs := &a.stats, a.elapsed.Seconds()
	d := float64(max(st.decisions, 1))
	c := ScalingCell{
		Masters: masters, Contender: name, Decisions: st.decisions, Allowed: st.allowed, Errors: st.errors,
		Seconds: secs, PerSec: float64(st.decisions) / secs,
		P50: st.hist.quantile(0.50) / 1e3, P99: st.hist.quantile(0.99) / 1e3,
		CommandUsec: a.cmdUsec / d, CPUUsec: a.cpu * 1e6 / d,
		ScriptCalls: float64(a.cmdCalls) / d, InnerCalls: float64(a.innerCalls) / d,
		PerRoundTrip: d / float64(max(a.trips, 1)),
		RedisCores:   a.cpu / secs, BusiestCore: slices.Max(a.perMaster) / secs, ClientCores: a.client / secs,
	}
	if st.firstErr != nil {
		c.FirstErr = st.firstErr.Error()
	}
	return c
}

// redisCPU returns used_cpu_user + used_cpu_sys of INFO cpu, in seconds.
func redisCPU(ctx context.Context, n *redis.Client) (float64, error) {
	info, err := n.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	f := infoSection(info)
	user, err1 := strconv.ParseFloat(f["used_cpu_user"], 64)
	sys, err2 := strconv.ParseFloat(f["used_cpu_sys"], 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("INFO cpu: %w", err)
	}
	return user + sys, nil
}

// scriptCommands are the top-level commands of the limiters here: each
// decision is one script call. INFO commandstats also lists the commands
// a script runs (ZADD, HSET...) under their own names, and a script's
// usec already includes theirs.
var scriptCommands = []string{"evalsha", "eval", "evalsha_ro", "eval_ro", "fcall", "fcall_ro"}

// adminCommands are the commands of INFO commandstats that are neither
// the limiters' scripts nor run by them: this harness's INFO and CONFIG,
// and the Cluster client's topology reads.
var adminCommands = []string{"info", "config", "cluster", "ping", "client", "command", "hello", "readonly", "memory", "select"}

// commandStats sums, in an INFO commandstats reply, the calls and µs of
// the script calls, and the calls of the commands those scripts ran.
func commandStats(info string) (scripts int64, usec float64, inner int64) {
	for k, v := range infoSection(info) {
		name, ok := strings.CutPrefix(k, "cmdstat_")
		if !ok {
			continue
		}
		base, _, _ := strings.Cut(name, "|")
		calls, us := statFields(v)
		switch {
		case slices.Contains(scriptCommands, base):
			scripts += calls
			usec += us
		case !slices.Contains(adminCommands, base):
			inner += calls
		}
	}
	return scripts, usec, inner
}

// statFields reads calls and usec from one INFO commandstats value,
// "calls=3,usec=120,usec_per_call=40.00,...".
func statFields(v string) (calls int64, usec float64) {
	for kv := range strings.SplitSeq(v, ",") {
		field, val, _ := strings.Cut(kv, "=")
		switch field {
		case "calls":
			calls, _ = strconv.ParseInt(val, 10, 64)
		case "usec":
			usec, _ = strconv.ParseFloat(val, 64)
		}
	}
	return calls, usec
}

// measureScalingMemory fills one slidelog key to each limit (window one
// hour, so nothing expires meanwhile) and reads MEMORY USAGE of its keys
// (the log, its costs and its state); then it writes memKeys keys at the
// smallest limit, and memKeys redis_rate keys, and divides the growth of
// used_memory by their number.
func measureScalingMemory(ctx context.Context, client *redis.ClusterClient, nodes []*redis.Client, limits []int) ([]ScalingMemory, error) {
	if len(limits) == 0 {
		return nil, nil
	}
	const memKeys = 2000
	store, err := redisstore.New(client, redisstore.WithKeyPrefix("mem:"))
	if err != nil {
		return nil, err
	}
	defer func() { _ = store.Close() }()
	var out []ScalingMemory
	for _, limit := range limits {
		l, err := slidelog.New(store, slidelog.Policy{Name: "mem", Limit: limit, Window: time.Hour}, slidelog.WithName("mem-"+strconv.Itoa(limit)))
		if err != nil {
			return out, err
		}
		identity := "full"
		if err := fillKeys(ctx, l, []string{identity}, limit); err != nil {
			_ = l.Close()
			return out, err
		}
		key := store.LogKey(l.Name(), identity)
		m := ScalingMemory{Contender: contender.Slidelog, Limit: limit}
		if m.Entries, err = client.ZCard(ctx, key).Result(); err != nil {
			_ = l.Close()
			return out, err
		}
		if m.Bytes, err = logMemoryUsage(ctx, client, key); err != nil {
			_ = l.Close()
			return out, err
		}
		m.Encoding, _ = client.ObjectEncoding(ctx, key).Result()
		m.PerEntry = float64(m.Bytes) / float64(max(m.Entries, 1))
		if limit == slices.Min(limits) {
			keys := make([]string, memKeys)
			for i := range keys {
				keys[i] = "many-" + strconv.Itoa(i)
			}
			before, err := usedMemory(ctx, nodes)
			if err != nil {
				_ = l.Close()
				return out, err
			}
			if err := fillKeys(ctx, l, keys, limit); err != nil {
				_ = l.Close()
				return out, err
			}
			after, err := usedMemory(ctx, nodes)
			if err != nil {
				_ = l.Close()
				return out, err
			}
			m.Keys, m.UsedPerKey = memKeys, float64(after-before)/memKeys
		}
		if err := l.Close(); err != nil {
			return out, err
		}
		fmt.Printf("memory  slidelog limit %5d: %d entries, MEMORY USAGE %d B (%.1f B/entry, %s)", limit, m.Entries, m.Bytes, m.PerEntry, m.Encoding)
		if m.Keys > 0 {
			fmt.Printf(", used_memory %.0f B/key over %d keys", m.UsedPerKey, m.Keys)
		}
		fmt.Println()
		out = append(out, m)
	}

	// redis_rate's GCRA: one string per key, whatever the limit.
	rr, err := contender.NewRedis(ctx, contender.RedisRate, client, "mem:", 1000, time.Hour)
	if err != nil {
		return out, err
	}
	if _, err := rr.Allow(ctx, "full"); err != nil {
		return out, err
	}
	m := ScalingMemory{Contender: contender.RedisRate, Limit: 1000, Entries: 1}
	if m.Bytes, err = client.MemoryUsage(ctx, "rate:mem:full", 0).Result(); err != nil {
		return out, err
	}
	m.Encoding, _ = client.ObjectEncoding(ctx, "rate:mem:full").Result()
	m.PerEntry = float64(m.Bytes)
	before, err := usedMemory(ctx, nodes)
	if err != nil {
		return out, err
	}
	for i := range memKeys {
		if _, err := rr.Allow(ctx, "many-"+strconv.Itoa(i)); err != nil {
			return out, err
		}
	}
	after, err := usedMemory(ctx, nodes)
	if err != nil {
		return out, err
	}
	m.Keys, m.UsedPerKey = memKeys, float64(after-before)/memKeys
	fmt.Printf("memory  redis_rate: MEMORY USAGE %d B (%s), used_memory %.0f B/key over %d keys\n", m.Bytes, m.Encoding, m.UsedPerKey, m.Keys)
	out = append(out, m)
	return out, client.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return c.FlushAll(ctx).Err() })
}

// fillKeys admits limit requests on each of keys, 16 callers at a time.
func fillKeys(ctx context.Context, l *slidelog.Limiter, keys []string, limit int) error {
	var next atomic.Int64
	total := int64(len(keys) * limit)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= total {
					return
				}
				res, err := l.Allow(ctx, keys[i%int64(len(keys))])
				if err == nil && (!res.Allowed || res.Source != redisstore.Source) {
					err = fmt.Errorf("fill: allowed %v by %v", res.Allowed, res.Source)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// logMemoryUsage is the MEMORY USAGE (every element counted) of a log's
// keys: the sorted set, its costs (absent while every cost is 1) and its
// state hash.
func logMemoryUsage(ctx context.Context, client redis.UniversalClient, key string) (int64, error) {
	var total int64
	for _, k := range []string{key, key + ":c", key + ":s"} {
		n, err := client.MemoryUsage(ctx, k, 0).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return 0, fmt.Errorf("MEMORY USAGE %s: %w", k, err)
		}
		total += n
	}
	return total, nil
}

// usedMemory sums used_memory over nodes.
func usedMemory(ctx context.Context, nodes []*redis.Client) (int64, error) {
	var total int64
	for _, n := range nodes {
		info, err := n.Info(ctx, "memory").Result()
		if err != nil {
			return 0, err
		}
		v, err := strconv.ParseInt(infoField(info, "used_memory"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("INFO memory: %w", err)
		}
		total += v
	}
	return total, nil
}
