package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/slidelog/slidelog/bench/contender"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
)

type runConfig struct {
	out        string
	standalone string
	cluster    []string
	cell       time.Duration
	memCell    time.Duration
	warmup     time.Duration
	keys       int
	memKeys    int
	rounds     int
	limit      int
	callers    []int
	only       string
	script     string
	skipMemory bool
	rtts       []time.Duration
	rttCallers int
	sizing     sizingConfig
}

func runMain(args []string) error {
	fs := newFlagSet("run")
	var cfg runConfig
	var clusterAddrs, callers, rtts string
	fs.StringVar(&cfg.out, "out", "results/latest.json", "results file to write")
	fs.StringVar(&cfg.standalone, "redis", os.Getenv("SLIDELOG_REDIS_ADDR"), "standalone Redis host:port (default $SLIDELOG_REDIS_ADDR)")
	fs.StringVar(&clusterAddrs, "cluster", os.Getenv("SLIDELOG_CLUSTER_ADDRS"), "comma-separated Redis Cluster seeds (default $SLIDELOG_CLUSTER_ADDRS)")
	fs.DurationVar(&cfg.cell, "d", 3*time.Second, "measured time per Redis cell")
	fs.DurationVar(&cfg.memCell, "md", time.Second, "measured time per in-memory cell")
	fs.DurationVar(&cfg.warmup, "warmup", 300*time.Millisecond, "unmeasured warm-up before each cell")
	fs.IntVar(&cfg.keys, "keys", 10000, "keys in the many-keys scenario on Redis")
	fs.IntVar(&cfg.memKeys, "mem-keys", 1<<18, "keys in the many-keys scenario in memory (enough that no key reaches the limit)")
	fs.IntVar(&cfg.limit, "limit", 100, "requests per minute per key")
	fs.IntVar(&cfg.rounds, "rounds", 6, "rounds per cell: contenders take turns, in a shuffled order, each round gets 1/rounds of the cell's time")
	fs.StringVar(&callers, "callers", "1,16,64", "comma-separated numbers of concurrent callers")
	fs.StringVar(&cfg.only, "only", "", "run only the cells whose topology/scenario/contender contains this")
	fs.StringVar(&cfg.script, "script", "../core/redisstore/common.lua", "slidelog's decision script for the common take (common.lua), run with plain EVALSHA as a baseline (empty: skip)")
	fs.BoolVar(&cfg.skipMemory, "skip-memory", false, "skip the in-memory cells")
	var cpuProfile string
	fs.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file, each slice's samples labelled contender=<name> (go tool pprof -tags, -tagfocus)")
	fs.StringVar(&rtts, "rtt", "0,200us,1ms", "comma-separated round-trip latencies added between client and Cluster nodes (in-process toxiproxy); empty: skip")
	fs.IntVar(&cfg.rttCallers, "rtt-callers", 64, "concurrent callers in the round-trip sweep")
	cfg.sizing.flags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if cfg.standalone == "" || clusterAddrs == "" {
		return errors.New("need both a standalone Redis (-redis or SLIDELOG_REDIS_ADDR) and a Cluster (-cluster or SLIDELOG_CLUSTER_ADDRS)")
	}
	for a := range strings.SplitSeq(clusterAddrs, ",") {
		if a = strings.TrimSpace(a); a != "" {
			cfg.cluster = append(cfg.cluster, a)
		}
	}
	for c := range strings.SplitSeq(callers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || n < 1 {
			return fmt.Errorf("bad -callers %q", callers)
		}
		cfg.callers = append(cfg.callers, n)
	}
	for r := range strings.SplitSeq(rtts, ",") {
		if r = strings.TrimSpace(r); r == "" {
			continue
		}
		d, err := time.ParseDuration(r)
		if r == "0" {
			d, err = 0, nil
		}
		if err != nil || d < 0 {
			return fmt.Errorf("bad -rtt %q", rtts)
		}
		cfg.rtts = append(cfg.rtts, d)
	}
	return runAll(cfg)
}

// poolSize is every contender's connection pool (per node on a
// Cluster): one connection per caller at the most callers the report
// runs, so that no contender waits for the pool.
const poolSize = 64

type topology struct {
	name      string
	newClient func() redis.UniversalClient
}

func runAll(cfg runConfig) error {
	ctx := context.Background()
	began := time.Now()
	runID := "slidebench:" + strconv.FormatInt(began.UnixNano(), 36) + ":"
	topologies := []topology{
		// Plain go-redis options for every contender, as a user who
		// writes redis.ClusterOptions{Addrs, PoolSize} gets them: not
		// slidelog's recommended options.
		{"standalone", func() redis.UniversalClient {
			return redis.NewClient(&redis.Options{Addr: cfg.standalone, PoolSize: poolSize})
		}},
		{"cluster", func() redis.UniversalClient {
			return redis.NewClusterClient(&redis.ClusterOptions{Addrs: cfg.cluster, PoolSize: poolSize})
		}},
	}
	for _, topo := range topologies {
		c := topo.newClient()
		err := c.Ping(ctx).Err()
		_ = c.Close()
		if err != nil {
			return fmt.Errorf("%s Redis: %w", topo.name, err)
		}
	}
	res := &Results{Env: describeEnv(ctx, cfg, topologies, runID)}
	res.Env.Date = began.UTC()

	keys := make([]string, max(cfg.keys, cfg.memKeys))
	for i := range keys {
		keys[i] = "user-" + strconv.Itoa(i)
	}
	// In memory the peers decide millions of times a second: 10,000 keys
	// would all be over their limit within the warm-up, so the in-memory
	// many-keys scenario spreads over memKeys keys instead.
	randomKey := func(n int) func(w int) func() string {
		return func(w int) func() string {
			rng := rand.New(rand.NewPCG(uint64(w), uint64(began.UnixNano())))
			return func() string { return keys[rng.IntN(n)] }
		}
	}
	type scenario struct {
		name  string
		keyOf func(worker int) func() string
	}
	flood := scenario{"flood", func(int) func() string { return func() string { return "flooded" } }}
	scenarios := []scenario{{"many-keys", randomKey(cfg.keys)}, flood}
	memScenarios := []scenario{{"many-keys", randomKey(cfg.memKeys)}, flood}
	var scriptSrc string
	if cfg.script != "" {
		var err error
		if scriptSrc, err = contender.ReadScript(cfg.script); err != nil {
			return fmt.Errorf("baseline script: %w", err)
		}
	}
	cellNo := 0
	selected := func(parts ...string) bool {
		return cfg.only == "" || strings.Contains(strings.Join(parts, "/"), cfg.only)
	}

	for _, topo := range topologies {
		admin := topo.newClient()
		for _, sc := range scenarios {
			names := append([]string(nil), contender.Redis...)
			switch sc.name {
			case "many-keys":
				names = append(names, contender.SlidelogNoPipelining, contender.Article, contender.EvalSHA)
				if scriptSrc != "" {
					names = append(names, contender.SlidelogScript)
				}
			case "flood":
				names = append(names, contender.SlidelogNoDenyCache)
			}
			for _, callers := range cfg.callers {
				var group []*entry
				for _, name := range names {
					if !selected(topo.name, sc.name, name) {
						continue
					}
					cellNo++
					e, err := newRedisEntry(ctx, topo, name, runID+"c"+strconv.Itoa(cellNo)+":", sc.name, cfg, scriptSrc)
					if err != nil {
						_ = closeEntries(ctx, admin, group)
						_ = admin.Close()
						return fmt.Errorf("%s/%s/%s: %w", topo.name, sc.name, name, err)
					}
					group = append(group, e)
				}
				runGroup(group, admin, callers, sc.keyOf, cfg.warmup, cfg.cell, cfg.rounds)
				if err := closeEntries(ctx, admin, group); err != nil {
					_ = admin.Close()
					return err
				}
				for _, e := range group {
					cell := newCell(topo.name, sc.name, callers, e.name, e.stats, e.elapsed, e.commands, e.trips)
					cell.ClientCPUUsec, cell.RedisCPUUsec, cell.RedisCommands = e.clientCPU, e.redisCPU, e.served
					cell.ReplicaCPUUsec, cell.ExpiredKeys = e.replicaCPU, e.expired
					report(cell)
					res.Cells = append(res.Cells, cell)
				}
			}
		}
		if topo.name == "standalone" && selected(topo.name, "memory-usage", contender.Slidelog) {
			mu, err := measureMemoryUsage(ctx, topo, admin, runID+"mem:")
			if err != nil {
				fmt.Fprintf(os.Stderr, "memory usage on %s: %v\n", topo.name, err)
			}
			res.Memory = append(res.Memory, mu...)
		}
		_ = admin.Close()
	}

	if len(cfg.rtts) > 0 && slices.ContainsFunc(contender.RTT, func(name string) bool { return selected(rttTopology, "many-keys", name) }) {
		if err := runRTT(ctx, cfg, runID, randomKey(cfg.keys), &cellNo, res); err != nil {
			return fmt.Errorf("round-trip sweep: %w", err)
		}
	}

	if !cfg.skipMemory {
		for _, sc := range memScenarios {
			for _, callers := range cfg.callers {
				var group []*entry
				for _, name := range contender.Memory {
					if !selected("memory", sc.name, name) {
						continue
					}
					l, err := contender.NewMemory(name, cfg.limit, time.Minute)
					if err != nil {
						return err
					}
					group = append(group, &entry{name: name, l: l, commands: -1, trips: -1})
				}
				runGroup(group, nil, callers, sc.keyOf, cfg.warmup, cfg.memCell, cfg.rounds)
				for _, e := range group {
					if err := e.l.Close(); err != nil {
						return err
					}
					cell := newCell("memory", sc.name, callers, e.name, e.stats, e.elapsed, -1, -1)
					cell.ClientCPUUsec = e.clientCPU
					report(cell)
					res.Cells = append(res.Cells, cell)
				}
			}
		}
	}

	if selected("standalone", "accuracy") {
		client := topologies[0].newClient()
		acc, err := boundaryAttack(ctx, client, runID+"acc:")
		if derr := deleteKeys(ctx, client, runID+"acc:"); derr != nil {
			err = errors.Join(err, derr)
		}
		err = errors.Join(err, client.Close())
		if err != nil {
			return fmt.Errorf("accuracy: %w", err)
		}
		res.Accuracy = acc
		for _, a := range acc {
			fmt.Printf("accuracy  %-20s limit %d per %v: at most %d admitted in any rolling window (%d of %d sent)\n",
				a.Contender, a.Limit, a.Window, a.MaxInWin, len(a.Admitted), a.Sent)
		}
	}
	if err := runBucketedExtras(ctx, cfg, topologies[0], runID, res, selected); err != nil {
		return err
	}

	res.Env.ElapsedTotal = Duration(time.Since(began).Round(time.Second))
	res.Env.LoadEnd = loadAverage()
	if err := os.MkdirAll(dirOf(cfg.out), 0o755); err != nil {
		return err
	}
	if err := writeResults(cfg.out, res); err != nil {
		return err
	}
	fmt.Printf("wrote %s (%v)\n", cfg.out, res.Env.ElapsedTotal)
	return nil
}

// entry is one contender in a group measured together: the same
// scenario and number of callers, in interleaved rounds.
type entry struct {
	name   string
	l      contender.Limiter
	client redis.UniversalClient // nil in memory
	prefix string
	cmds   *atomic.Int64
	rts    *atomic.Int64

	stats    workerStats
	elapsed  time.Duration
	commands int64
	trips    int64
	// Measured per slice: this process's CPU (getrusage, user + system),
	// the masters' CPU (INFO cpu) and the commands they ran for the
	// decisions (INFO commandstats), in µs and calls.
	clientCPU, redisCPU, replicaCPU float64
	served                          int64
	expired                         int64 // keys the masters expired during the slices
}

func newRedisEntry(ctx context.Context, topo topology, name, prefix, scenario string, cfg runConfig, scriptSrc string) (*entry, error) {
	e := &entry{name: name, client: topo.newClient(), prefix: prefix, cmds: new(atomic.Int64), rts: new(atomic.Int64)}
	// Count what reaches Redis: on a Cluster, at each node's client, which
	// sees every command and every per-node pipeline the ClusterClient
	// sends (retries after MOVED included).
	counter := commandCounter{e.cmds, e.rts}
	if cc, ok := e.client.(*redis.ClusterClient); ok {
		cc.OnNewNode(func(node *redis.Client) { node.AddHook(counter) })
	} else {
		e.client.AddHook(counter)
	}
	var err error
	if name == contender.SlidelogScript {
		e.l, err = contender.NewScript(e.client, scriptSrc, prefix, cfg.limit, time.Minute)
	} else {
		e.l, err = contender.NewRedis(ctx, name, e.client, prefix, cfg.limit, time.Minute)
	}
	if err != nil {
		_ = e.client.Close()
		return nil, err
	}
	if scenario == "flood" {
		// Spend the key's limit first: what is measured is all denials.
		for range cfg.limit + 1 {
			if _, err := e.l.Allow(ctx, "flooded"); err != nil {
				_ = e.l.Close()
				_ = e.client.Close()
				return nil, err
			}
		}
	}
	return e, nil
}

// runGroup warms every entry up, then measures them in rounds, each
// round giving every entry total/rounds in turn, so that a change in the
// machine's load is shared. Each round takes the entries in an order of
// its own (a shuffle with a fixed seed, the same in every run): a slice
// is measured right after another entry's, and what that one leaves
// behind (its garbage to collect, its idle goroutines' wake-ups) lands in
// the next slice's figures. With a fixed rotation an entry would always
// follow the same one; one caller's cells moved by up to 25% with it.
func runGroup(group []*entry, admin redis.UniversalClient, callers int, keyOf func(int) func() string, warmup, total time.Duration, rounds int) {
	ctx := context.Background()
	for _, e := range group {
		if warmup > 0 {
			run(ctx, e.l, callers, keyOf, warmup, false)
		}
	}
	rounds = max(rounds, 1)
	order := rand.New(rand.NewPCG(uint64(len(group)), uint64(callers)))
	for range rounds {
		for _, k := range order.Perm(len(group)) {
			e := group[k]
			var redis0, replicas0 float64
			if admin != nil {
				redis0 = startRedisSlice(ctx, admin)
				replicas0 = replicaCPU(ctx, admin)
			}
			expired0 := expiredKeys(ctx, admin)
			cpu0 := selfCPU()
			var st workerStats
			var elapsed time.Duration
			var cmds, rts int64
			// Label the slice's goroutines with the contender, for -cpuprofile.
			pprof.Do(ctx, pprof.Labels("contender", e.name), func(context.Context) {
				st, elapsed, cmds, rts = drive(e.l, callers, keyOf, 0, total/time.Duration(rounds), e.cmds, e.rts)
			})
			e.clientCPU += (selfCPU() - cpu0) * 1e6
			if admin != nil {
				redis1, served := endRedisSlice(ctx, admin)
				e.redisCPU += redis1 - redis0
				e.replicaCPU += replicaCPU(ctx, admin) - replicas0
				e.expired += expiredKeys(ctx, admin) - expired0
				e.served += served
			}
			e.stats.add(&st)
			e.elapsed += elapsed
			e.commands += cmds
			e.trips += rts
		}
	}
}

// startRedisSlice resets the masters' command statistics (CONFIG
// RESETSTAT) and returns their CPU time so far (INFO cpu, user + system,
// summed over the masters), in microseconds.
func startRedisSlice(ctx context.Context, admin redis.UniversalClient) float64 {
	return sumNodes(ctx, func(ctx context.Context, fn func(context.Context, *redis.Client) error) error {
		return redistest.EachMaster(ctx, admin, fn)
	}, func(ctx context.Context, c *redis.Client) (float64, error) {
		_ = c.ConfigResetStat(ctx).Err()
		return cpuUsec(ctx, c)
	})
}

// replicaCPU returns the replicas' CPU time so far (INFO cpu, user +
// system, summed over them), in microseconds; 0 on a single server. A
// replica that does not answer adds nothing.
func replicaCPU(ctx context.Context, admin redis.UniversalClient) float64 {
	c, ok := admin.(*redis.ClusterClient)
	if !ok {
		return 0
	}
	return sumNodes(ctx, c.ForEachSlave, cpuUsec)
}

// expiredKeys returns how many keys the masters have expired so far (INFO
// stats expired_keys, summed over them).
func expiredKeys(ctx context.Context, admin redis.UniversalClient) int64 {
	if admin == nil {
		return 0
	}
	return int64(sumNodes(ctx, func(ctx context.Context, fn func(context.Context, *redis.Client) error) error {
		return redistest.EachMaster(ctx, admin, fn)
	}, func(ctx context.Context, c *redis.Client) (float64, error) {
		info, err := c.Info(ctx, "stats").Result()
		if err != nil {
			return 0, err
		}
		return strconv.ParseFloat(infoField(info, "expired_keys"), 64)
	}))
}

// sumNodes sums value over the nodes forEach visits (concurrently); a
// node whose value fails adds nothing.
func sumNodes(ctx context.Context, forEach func(context.Context, func(context.Context, *redis.Client) error) error,
	value func(context.Context, *redis.Client) (float64, error)) float64 {
	var mu sync.Mutex
	var total float64
	_ = forEach(ctx, func(ctx context.Context, c *redis.Client) error {
		v, err := value(ctx, c)
		if err != nil {
			return err
		}
		mu.Lock()
		total += v
		mu.Unlock()
		return nil
	})
	return total
}

// endRedisSlice returns the masters' CPU time so far, in microseconds,
// and the commands they ran since startRedisSlice for the decisions: every
// command INFO commandstats counts, those inside scripts included, but
// not the script calls themselves (EVAL, EVALSHA) nor the statistics,
// topology and replication commands.
func endRedisSlice(ctx context.Context, admin redis.UniversalClient) (float64, int64) {
	var mu sync.Mutex
	var total float64
	var served int64
	_ = redistest.EachMaster(ctx, admin, func(ctx context.Context, c *redis.Client) error {
		cpu, err := cpuUsec(ctx, c)
		if err != nil {
			return err
		}
		info, err := c.Info(ctx, "commandstats").Result()
		if err != nil {
			return err
		}
		n := servedCommands(info)
		mu.Lock()
		total += cpu
		served += n
		mu.Unlock()
		return nil
	})
	return total, served
}

// servedCommands sums the calls of INFO commandstats but those of script
// calls and of the commands that are not decisions' work.
func servedCommands(info string) int64 {
	var n int64
	for line := range strings.SplitSeq(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		name = strings.TrimPrefix(name, "cmdstat_")
		base, _, _ := strings.Cut(name, "|")
		switch base {
		case "eval", "evalsha", "eval_ro", "evalsha_ro", "script", "config", "info", "cluster", "replconf", "hello", "ping", "client", "command", "exists", "scan", "del", "unlink", "memory", "type", "publish":
			continue
		}
		for kv := range strings.SplitSeq(rest, ",") {
			if k, v, _ := strings.Cut(kv, "="); k == "calls" {
				c, _ := strconv.ParseInt(v, 10, 64)
				n += c
			}
		}
	}
	return n
}

// closeEntries closes the limiters and clients of group and deletes the
// keys they wrote.
func closeEntries(ctx context.Context, admin redis.UniversalClient, group []*entry) error {
	var errs []error
	for _, e := range group {
		errs = append(errs, e.l.Close())
		if e.client != nil {
			errs = append(errs, deleteKeys(ctx, admin, e.prefix), e.client.Close())
		}
	}
	return errors.Join(errs...)
}

func newCell(topo, scenario string, callers int, name string, st workerStats, elapsed time.Duration, cmds, trips int64) Cell {
	c := Cell{
		Topology: topo, Scenario: scenario, Callers: callers, Contender: name,
		Decisions: st.decisions, Allowed: st.allowed, Errors: st.errors,
		Seconds: elapsed.Seconds(), PerSec: float64(st.decisions) / elapsed.Seconds(),
		P50: st.hist.quantile(0.50) / 1e3, P99: st.hist.quantile(0.99) / 1e3, P999: st.hist.quantile(0.999) / 1e3,
		Commands: cmds, RoundTrips: trips,
	}
	if st.hist.n > 0 {
		c.Mean = st.hist.sum / float64(st.hist.n) / 1e3
	}
	if st.firstErr != nil {
		c.FirstErr = st.firstErr.Error()
	}
	return c
}

func report(c Cell) {
	cmds := ""
	if c.Commands >= 0 && c.Decisions > 0 {
		cmds = fmt.Sprintf("  %.3f cmd/decision  %.2f cmd/round trip", float64(c.Commands)/float64(c.Decisions),
			float64(c.Commands)/float64(max(c.RoundTrips, 1)))
	}
	errs := ""
	if c.Errors > 0 {
		errs = fmt.Sprintf("  %d errors (%s)", c.Errors, c.FirstErr)
	}
	cpu := ""
	if d := float64(max(c.Decisions, 1)); c.ClientCPUUsec > 0 {
		cpu = fmt.Sprintf("  client CPU %.1fµs", c.ClientCPUUsec/d)
		if c.RedisCPUUsec > 0 {
			cpu += fmt.Sprintf("  Redis CPU %.1fµs  replicas %.1fµs  Redis cmds %.2f /decision  expired %d", c.RedisCPUUsec/d, c.ReplicaCPUUsec/d, float64(c.RedisCommands)/d, c.ExpiredKeys)
		}
	}
	fmt.Printf("%-10s %-9s %3d callers  %-30s %10.0f/s  p50 %8.1fµs  p99 %8.1fµs  p99.9 %8.1fµs  allowed %5.1f%%%s%s%s\n",
		c.Topology, c.Scenario, c.Callers, c.Contender, c.PerSec, c.P50, c.P99, c.P999,
		100*float64(c.Allowed)/float64(max(c.Decisions, 1)), cmds, cpu, errs)
}

// commandCounter is a go-redis hook counting the commands a client sends,
// pipelined ones one by one.
type commandCounter struct{ n, trips *atomic.Int64 }

func (c commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		c.trips.Add(1)
		return next(ctx, cmd)
	}
}

func (c commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		c.trips.Add(1)
		return next(ctx, cmds)
	}
}

// deleteKeys unlinks every key containing prefix, on every master. Keys
// go one UNLINK each, pipelined, since a Cluster node refuses a
// multi-key UNLINK across slots.
func deleteKeys(ctx context.Context, client redis.UniversalClient, prefix string) error {
	del := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, "*"+prefix+"*", 1000).Iterator()
		pipe := c.Pipeline()
		for iter.Next(ctx) {
			pipe.Unlink(ctx, iter.Val())
			if pipe.Len() == 500 {
				if _, err := pipe.Exec(ctx); err != nil {
					return err
				}
			}
		}
		if pipe.Len() > 0 {
			if _, err := pipe.Exec(ctx); err != nil {
				return err
			}
		}
		return iter.Err()
	}
	return redistest.EachMaster(ctx, client, del)
}

func describeEnv(ctx context.Context, cfg runConfig, topologies []topology, runID string) Env {
	env := Env{
		NumCPU: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version(),
		Standalone: cfg.standalone, Cluster: cfg.cluster,
		CellDuration: Duration(cfg.cell), MemoryCell: Duration(cfg.memCell), Warmup: Duration(cfg.warmup),
		Rounds: cfg.rounds, Keys: cfg.keys, MemKeys: cfg.memKeys, Limit: cfg.limit, Window: Duration(time.Minute),
		Command: os.Getenv("SLIDEBENCH_COMMAND"), RunIDPrefix: runID, RTTCallers: cfg.rttCallers,
	}
	if env.Command == "" {
		env.Command = strings.Join(os.Args, " ")
	}
	env.CPU = cpuModel()
	if out, err := exec.Command("nproc").Output(); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(out))); err == nil {
			env.NumCPU = n
		}
	}
	env.LoadStart = loadAverage()
	if out, err := exec.Command("git", "-C", "..", "log", "-1", "--format=%h %cs %s", "--", "core").Output(); err == nil {
		env.CoreRevision = strings.TrimSpace(string(out))
		if st, err := exec.Command("git", "-C", "..", "status", "--porcelain", "--", "core").Output(); err == nil && len(st) > 0 {
			env.CoreRevision += " (plus uncommitted changes in core/)"
		}
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			switch d.Path {
			case "github.com/redis/go-redis/v9":
				env.GoRedis = d.Version
			case "github.com/go-redis/redis_rate/v10", "github.com/ulule/limiter/v3",
				"github.com/throttled/throttled/v2", "github.com/go-chi/httprate",
				"github.com/sethvargo/go-limiter", "golang.org/x/time":
				env.PeerVersions = append(env.PeerVersions, d.Path+" "+d.Version)
			}
		}
	}
	c := topologies[0].newClient()
	if info, err := c.Info(ctx, "server").Result(); err == nil {
		env.RedisVersion = infoField(info, "redis_version")
	}
	_ = c.Close()
	cc := topologies[1].newClient()
	if nodes, err := cc.ClusterNodes(ctx).Result(); err == nil {
		masters, replicas := 0, 0
		for line := range strings.SplitSeq(strings.TrimSpace(nodes), "\n") {
			switch {
			case strings.Contains(line, "master"):
				masters++
			case strings.Contains(line, "slave"):
				replicas++
			}
		}
		env.ClusterNodes = fmt.Sprintf("%d masters + %d replicas", masters, replicas)
	}
	_ = cc.Close()
	return env
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// loadAverage returns the 1-, 5- and 15-minute load averages of
// /proc/loadavg, to tell what else was running.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func infoField(info, field string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

func dirOf(path string) string {
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		return path[:i]
	}
	return "."
}
