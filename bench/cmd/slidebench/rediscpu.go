package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/slidelog/slidelog/bench/contender"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
)

// rediscpuConfig is the configuration of slidebench rediscpu.
type rediscpuConfig struct {
	standalone string
	cluster    []string
	topology   string
	decisions  int
	keys       int
	callers    int
	limit      int
	window     time.Duration
	precision  time.Duration
	rounds     int
}

// rediscpuMain measures the Redis CPU each contender costs per decision:
// it resets every master's statistics (CONFIG RESETSTAT), runs a number of
// decisions over many keys, and reads INFO commandstats back. Contenders
// take turns in rounds so that they share the machine's noise.
func rediscpuMain(args []string) error {
	fs := newFlagSet("rediscpu")
	var cfg rediscpuConfig
	var clusterAddrs string
	fs.StringVar(&cfg.standalone, "redis", os.Getenv("SLIDELOG_REDIS_ADDR"), "standalone Redis host:port (default $SLIDELOG_REDIS_ADDR)")
	fs.StringVar(&clusterAddrs, "cluster", os.Getenv("SLIDELOG_CLUSTER_ADDRS"), "comma-separated Redis Cluster seeds (default $SLIDELOG_CLUSTER_ADDRS)")
	fs.StringVar(&cfg.topology, "topology", "both", "standalone, cluster or both")
	fs.IntVar(&cfg.decisions, "n", 200_000, "decisions per contender (split over the rounds)")
	fs.IntVar(&cfg.keys, "keys", 10_000, "keys, picked at random per decision")
	fs.IntVar(&cfg.callers, "callers", 64, "concurrent callers")
	fs.IntVar(&cfg.limit, "limit", 100, "requests per window per key")
	fs.DurationVar(&cfg.window, "window", time.Minute, "window")
	fs.DurationVar(&cfg.precision, "precision", time.Second, "precision of the bucketed slidelog row (0: no such row)")
	fs.IntVar(&cfg.rounds, "rounds", 4, "rounds: contenders take turns, each round runs n/rounds decisions")
	if err := fs.Parse(args); err != nil {
		return err
	}
	for a := range strings.SplitSeq(clusterAddrs, ",") {
		if a = strings.TrimSpace(a); a != "" {
			cfg.cluster = append(cfg.cluster, a)
		}
	}
	var topologies []topology
	if cfg.topology == "standalone" || cfg.topology == "both" {
		if cfg.standalone == "" {
			return errors.New("need a standalone Redis (-redis or SLIDELOG_REDIS_ADDR)")
		}
		topologies = append(topologies, topology{"standalone", func() redis.UniversalClient {
			return redis.NewClient(&redis.Options{Addr: cfg.standalone, ContextTimeoutEnabled: true})
		}})
	}
	if cfg.topology == "cluster" || cfg.topology == "both" {
		if len(cfg.cluster) == 0 {
			return errors.New("need a Cluster (-cluster or SLIDELOG_CLUSTER_ADDRS)")
		}
		topologies = append(topologies, topology{"cluster", func() redis.UniversalClient {
			return redis.NewClusterClient(&redis.ClusterOptions{Addrs: cfg.cluster, ContextTimeoutEnabled: true, MaxRedirects: 8})
		}})
	}
	if len(topologies) == 0 {
		return fmt.Errorf("bad -topology %q", cfg.topology)
	}
	runID := "slidebench:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":cpu:"
	for _, topo := range topologies {
		if err := rediscpuTopology(context.Background(), cfg, topo, runID+topo.name+":"); err != nil {
			return fmt.Errorf("%s: %w", topo.name, err)
		}
	}
	return nil
}

// cpuEntry is one contender of the rediscpu measurement.
type cpuEntry struct {
	name      string
	l         contender.Limiter
	decisions int64
	usec      int64 // every command's time on the masters
	scripts   int64 // EVALSHA and EVAL calls
	scriptUs  int64 // their time
	allowed   int64
	failed    int64            // decisions that did not reach Redis (the failure mode)
	commands  map[string]int64 // calls per command, the scripts' own included
}

func rediscpuTopology(ctx context.Context, cfg rediscpuConfig, topo topology, prefix string) error {
	client := topo.newClient()
	defer client.Close()
	if err := client.Ping(ctx).Err(); err != nil {
		return err
	}
	window := cfg.window
	var entries []*cpuEntry
	for _, name := range []string{contender.Slidelog, contender.RedisRate} {
		l, err := contender.NewRedis(ctx, name, client, prefix+strconv.Itoa(len(entries))+":", cfg.limit, window)
		if err != nil {
			return err
		}
		entries = append(entries, &cpuEntry{name: name, l: l, commands: map[string]int64{}})
	}
	if cfg.precision > 0 {
		store, err := redisstore.New(client, redisstore.WithKeyPrefix(prefix+"b:"))
		if err != nil {
			return err
		}
		l, err := slidelog.New(store, slidelog.Policy{Name: "bench", Limit: cfg.limit, Window: window, Precision: cfg.precision}, slidelog.WithName("bench"))
		if err != nil {
			return err
		}
		entries = append(entries, &cpuEntry{name: "slidelog precision " + cfg.precision.String(), l: bucketed{l}, commands: map[string]int64{}})
	}
	defer func() {
		for _, e := range entries {
			_ = e.l.Close()
		}
		_ = deleteKeys(context.Background(), client, prefix)
	}()
	per := max(1, cfg.decisions/max(1, cfg.rounds))
	for range cfg.rounds {
		for _, e := range entries {
			if err := redistest.EachMaster(ctx, client, func(ctx context.Context, c *redis.Client) error {
				return c.ConfigResetStat(ctx).Err()
			}); err != nil {
				return err
			}
			allowed, failed, err := driveN(ctx, e.l, cfg.keys, cfg.callers, per)
			if err != nil {
				return fmt.Errorf("%s: %w", e.name, err)
			}
			e.failed += failed
			var mu sync.Mutex
			if err := redistest.EachMaster(ctx, client, func(ctx context.Context, c *redis.Client) error {
				info, err := c.Info(ctx, "commandstats").Result()
				if err != nil {
					return err
				}
				usec, scripts, scriptUs := parseCommandStats(info, e.commands, &mu)
				mu.Lock()
				e.usec += usec
				e.scripts += scripts
				e.scriptUs += scriptUs
				mu.Unlock()
				return nil
			}); err != nil {
				return err
			}
			e.decisions += int64(per) - failed
			e.allowed += allowed
		}
	}
	fmt.Printf("%s: %d keys, %d callers, limit %d per %v, %d decisions per contender in %d rounds\n",
		topo.name, cfg.keys, cfg.callers, cfg.limit, window, entries[0].decisions, cfg.rounds)
	for _, e := range entries {
		perCall := 0.0
		if e.scripts > 0 {
			perCall = float64(e.scriptUs) / float64(e.scripts)
		}
		fmt.Printf("  %-28s %6.2f µs script time per decision  (%6.2f µs per script call, %.3f calls per decision; all commands incl. those inside scripts %6.2f µs)  %.1f%% admitted, %d decisions by the failure mode left out\n",
			e.name, float64(e.scriptUs)/float64(e.decisions), perCall, float64(e.scripts)/float64(e.decisions), float64(e.usec)/float64(e.decisions),
			100*float64(e.allowed)/float64(e.decisions), e.failed)
		names := slices.Sorted(maps.Keys(e.commands))
		var b strings.Builder
		for _, n := range names {
			fmt.Fprintf(&b, " %s %.2f", n, float64(e.commands[n])/float64(e.decisions))
		}
		fmt.Printf("  %-28s commands per decision:%s\n", "", b.String())
	}
	return nil
}

// bucketed adapts a slidelog limiter to contender.Limiter.
type bucketed struct{ l *slidelog.Limiter }

func (b bucketed) Allow(ctx context.Context, key string) (bool, error) {
	res, err := b.l.Allow(ctx, key)
	if err == nil && res.Source != redisstore.Source && res.Source != slidelog.SourceDenyCache {
		return false, fmt.Errorf("%w (%v)", contender.ErrFailureMode, res.Source)
	}
	return res.Allowed, err
}

func (b bucketed) Close() error { return b.l.Close() }

// driveN makes n decisions on l from callers goroutines, each on a key
// picked at random among keys, and returns how many were admitted and how
// many slidelog made by its failure mode (they cost Redis nothing).
func driveN(ctx context.Context, l contender.Limiter, keys, callers, n int) (int64, int64, error) {
	var next, allowed, failed atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, callers)
	for w := range callers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for next.Add(1) <= int64(n) {
				ok, err := l.Allow(ctx, "user-"+strconv.Itoa(rng.IntN(keys)))
				if errors.Is(err, contender.ErrFailureMode) {
					failed.Add(1)
					continue
				}
				if err != nil {
					errs[w] = err
					return
				}
				if ok {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return allowed.Load(), failed.Load(), errors.Join(errs...)
}

// parseCommandStats sums INFO commandstats: the time of every command,
// and the calls and time of EVALSHA and EVAL; it adds each command's
// calls to commands under mu. The statistics commands themselves (config,
// info) are left out.
func parseCommandStats(info string, commands map[string]int64, mu *sync.Mutex) (usec, scripts, scriptUs int64) {
	for line := range strings.SplitSeq(info, "\n") {
		line = strings.TrimSpace(line)
		name, rest, ok := strings.Cut(line, ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		name = strings.TrimPrefix(name, "cmdstat_")
		if name == "config" || name == "info" || strings.HasPrefix(name, "config|") {
			continue
		}
		var calls, us int64
		for kv := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "calls":
				calls, _ = strconv.ParseInt(v, 10, 64)
			case "usec":
				us, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		usec += us
		mu.Lock()
		commands[strings.ToUpper(name)] += calls
		mu.Unlock()
		if name == "evalsha" || name == "eval" {
			scripts += calls
			scriptUs += us
		}
	}
	return usec, scripts, scriptUs
}
