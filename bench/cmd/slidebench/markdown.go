package main

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/slidelog/slidelog/bench/contender"
)

// renderMarkdown renders docs/benchmarks.md from a run, with analysis,
// the hand-written part of "What a decision costs", kept as it is.
func renderMarkdown(r *Results, gb []goBench, charts map[string]string, analysis string) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	e := r.Env

	p("# Benchmarks\n\n")
	p("slidelog side by side with its Go peers, on the same Redis servers in one run, and the in-process\n")
	p("limiters in memory. This file and the charts in `docs/img/` are generated: run `make bench-report`\n")
	p("to measure again and rewrite them (`make bench` measures and prints without touching the docs),\n")
	p("all but the analysis at the head of \"What a decision costs\", written by hand between two markers\n")
	p("and kept as it is.\n")
	p("The harness is `bench/cmd/slidebench` and the `go test` benchmarks are in `bench/contender`, a\n")
	p("module of its own, so none of the peers enters the `go.mod` of slidelog or of its adapters.\n\n")
	p("Numbers are from **one run on one small machine** where the client and every Redis process share\n")
	p("two cores: absolute rates are low and a cell can move by 10–20%% between runs; read the ratios.\n\n")

	p("## Reproduce\n\n")
	p("```sh\n")
	p("make bench-report              # measure (about 6 minutes) and rewrite this file and docs/img/\n")
	p("make bench                     # measure only: tables on stdout, results in bench/results/\n")
	p("scripts/bench.sh render        # rewrite this file from bench/results/ without measuring\n")
	p("```\n\n")
	p("Redis comes from `SLIDELOG_REDIS_ADDR` and `SLIDELOG_CLUSTER_ADDRS`, or else from the rig of\n")
	p("`make cluster-up` (started and stopped by the script when it is not up). `SLIDEBENCH_DURATION`\n")
	p("sets the time per Redis cell, `SLIDEBENCH_ARGS` passes flags to `slidebench run` (for example\n")
	p("`-callers 1,64 -only cluster`, or `-rtt 0,200us,1ms -rtt-callers 64` for the round-trip sweep),\n")
	p("`SLIDEBENCH_CORE=committed` measures core as committed instead\n")
	p("of the working tree. Keys are prefixed `slidebench:<run>:` and deleted; nothing is flushed.\n\n")
	writeCost(&b, r, gb, &analysis)
	p("## Setup\n\n")
	p("| | |\n|---|---|\n")
	p("| Date | %s |\n", e.Date.Format("2006-01-02 15:04 MST"))
	p("| Machine | %s, %d cores (`nproc`), GOMAXPROCS %d |\n", e.CPU, e.NumCPU, e.GOMAXPROCS)
	if e.LoadStart != "" {
		p("| Load average (1, 5, 15 min) | %s at the start, %s at the end (other work on the machine shows here) |\n", e.LoadStart, orDash(e.LoadEnd))
	}
	p("| Go | %s |\n", e.GoVersion)
	p("| Redis | %s; standalone at %s; Cluster of %s (seeds %s), all on this machine |\n", e.RedisVersion, e.Standalone, e.ClusterNodes, strings.Join(e.Cluster, ", "))
	p("| Client | go-redis %s, the same plain options for every contender: `redis.ClusterOptions{Addrs, PoolSize: %d}` (standalone: `redis.Options{Addr, PoolSize}`), not slidelog's recommended options |\n", e.GoRedis, poolSize)
	p("| Redis priority | normal: scripts/bench.sh sets the servers' nice value to 0 before measuring |\n")
	p("| Peers | %s |\n", strings.Join(e.PeerVersions, ", "))
	p("| slidelog core | %s |\n", orDash(e.CoreRevision))
	p("| Command | `%s` |\n", e.Command)
	p("| Cells | %v warm-up, then %v measured per Redis cell and %v per in-memory cell, in %d interleaved rounds (the contenders of one scenario and concurrency take turns, in a shuffled order each round); limit %d per %v |\n",
		e.Warmup, e.CellDuration, e.MemoryCell, max(e.Rounds, 1), e.Limit, e.Window)
	p("| Harness run time | %v (plus the `go test` benchmarks) |\n\n", e.ElapsedTotal)

	writeTargets(&b, r, gb)

	for _, sc := range []string{"many-keys", "flood"} {
		switch sc {
		case "many-keys":
			p("## Redis: many keys\n\n")
			p("Each caller picks one of %s keys at random for every decision, limit %d per minute: nearly\n", fmtCount(e.Keys), e.Limit)
			p("every request is admitted, so each decision writes. Two rows are baselines, not limiters:\n")
			p("`EVALSHA round trip` runs the smallest keyed script (`return 1`), the floor under any\n")
			p("script-based limiter; `slidelog script, plain EVALSHA` runs slidelog's own script\n")
			p("(`core/redisstore/common.lua`) with one plain EVALSHA per call on the same keys, so the distance\n")
			p("between it and `slidelog` is what the library around the script costs or saves.\n")
			p("`slidelog, pipelining off` is slidelog with `WithAutoPipelining(0)`.\n\n")
		case "flood":
			p("## Redis: one flooded key\n\n")
			p("Every caller hammers one key whose limit was spent before the measurement: every decision is\n")
			p("a denial, the credential-stuffing case. `slidelog, deny cache off` is slidelog with\n")
			p("`WithDenyCache(0)`.\n\n")
		}
		for _, topo := range []string{"standalone", "cluster"} {
			if !hasTopology(r, topo) {
				continue
			}
			p("### %s\n\n", topoTitle(topo))
			writeCellTable(&b, r, topo, sc, true)
			p("![Latency percentiles, %s, %s](%s)\n\n", topoTitle(topo), sc, charts["latency-"+topo+"-"+sc])
		}
	}
	writeRTT(&b, r, charts["rtt"])
	p("## Throughput by concurrency\n\n")
	for _, topo := range []string{"standalone", "cluster"} {
		if id := "throughput-" + topo; charts[id] != "" {
			p("![Decisions per second by callers, %s](%s)\n\n", topoTitle(topo), charts[id])
		}
	}

	if hasTopology(r, "memory") {
		p("## In memory\n\n")
		p("The same harness on the in-process limiters (limit %d per minute). `x/time/rate` is used the\n", e.Limit)
		p("usual way, one token bucket per key in a `sync.Map`; httprate through `OnLimit`, as its middleware\n")
		p("calls it. At these speeds the two clock reads around each call are part of the latency.\n\n")
		p("**many keys (%s keys, %d/min)**: in memory the peers decide millions of times a second, and 10,000\n", fmtCount(e.MemKeys), e.Limit)
		p("keys would all be over their limit within the warm-up, so the keys are more.\n\n")
		writeCellTable(&b, r, "memory", "many-keys", false)
		p("**%s**\n\n", scenarioTitles["flood"])
		writeCellTable(&b, r, "memory", "flood", false)
		if c := charts["throughput-memory"]; c != "" {
			p("![Decisions per second by callers, in memory](%s)\n\n", c)
		}
	}
	if len(gb) > 0 {
		writeGoBench(&b, gb)
	}
	if len(r.Accuracy) > 0 {
		writeAccuracy(&b, r.Accuracy, charts["accuracy"])
	}
	if len(r.Overload) > 0 {
		writeOverload(&b, r.Overload)
	}
	if len(r.Sizing) > 0 {
		writeSizing(&b, r)
	}
	if len(r.Memory) > 0 {
		p("## Redis memory per entry\n\n")
		p("One slidelog log filled to its limit, then `MEMORY USAGE key SAMPLES 0` (Redis %s, default\n", e.RedisVersion)
		p("`zset-max-listpack-entries` 128).\n\n")
		p("| Limit | Entries | Bytes | Bytes per entry | Encoding |\n|---:|---:|---:|---:|---|\n")
		for _, m := range r.Memory {
			p("| %d | %d | %d | %.1f | %s |\n", m.Limit, m.Entries, m.Bytes, m.PerEntry, m.Encoding)
		}
		p("\n")
	}
	writeMethod(&b, r)
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

func writeCellTable(b *strings.Builder, r *Results, topo, scenario string, redis bool) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	names := contender.Memory
	base := contender.GoLimiter
	if redis {
		names = contender.RedisAll
		base = contender.RedisRate
	}
	p("| Contender | Callers | Decisions/s | vs %s | p50 | p99 | p99.9 | Admitted |", base)
	if redis {
		p(" Commands / decision | Commands / round trip |")
	}
	p(" Errors |\n|---|---:|---:|---:|---:|---:|---:|---:|")
	if redis {
		p("---:|---:|")
	}
	p("---:|\n")
	for _, callers := range callerList(r) {
		ref, _ := find(r, topo, scenario, callers, base)
		for _, name := range names {
			c, ok := find(r, topo, scenario, callers, name)
			if !ok {
				continue
			}
			label := name
			if name == contender.Slidelog || name == contender.SlidelogMemory {
				label = "**" + name + "**"
			}
			if c.Errors > 0 && c.Decisions == 0 {
				label += " (no decision)"
			}
			p("| %s | %d | %s | %s | %s | %s | %s | %.1f%% |", label, callers, fmtRate(c.PerSec), fmtRatio(ratio(c.PerSec, ref.PerSec)),
				fmtMicros(c.P50), fmtMicros(c.P99), fmtMicros(c.P999), 100*float64(c.Allowed)/math.Max(float64(c.Decisions), 1))
			if redis {
				p(" %.3f | %.2f |", float64(c.Commands)/math.Max(float64(c.Decisions), 1), float64(c.Commands)/math.Max(float64(c.RoundTrips), 1))
			}
			errs := fmt.Sprint(c.Errors)
			if c.Errors > 0 {
				errs += " (" + strings.ReplaceAll(c.FirstErr, "|", "/") + ")"
			}
			p(" %s |\n", errs)
		}
	}
	p("\n")
}

func writeGoBench(b *strings.Builder, gb []goBench) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	p("## `go test` benchmarks\n\n")
	p("`bench/contender`, `b.Loop` for one goroutine and `b.RunParallel` for all cores, `b.ReportAllocs`.\n")
	p("`allow` spreads calls over 262,144 keys so that each is admitted (in memory, after one first\n")
	p("request per key, so that it measures admissions for keys already tracked); `deny` hammers one\n")
	p("key far over its limit. The Redis rows run one call at a time on the standalone server: their ns/op is a\n")
	p("round trip, their allocations are the client side of one decision.")
	if gb[0].runs > 1 {
		p(" Each number is the run with the median\n")
		p("ns/op of %d (`-count %d`).", gb[0].runs, gb[0].runs)
	}
	p("\n\n")
	for _, group := range []string{"Memory", "Redis"} {
		var names []string
		for _, x := range gb {
			g, rest, ok := strings.Cut(x.name, "/")
			if !ok || g != group {
				continue
			}
			name, _, _ := strings.Cut(rest, "/")
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
		if len(names) == 0 {
			continue
		}
		p("**Benchmark%s**\n\n", group)
		p("| Contender | allow ns/op | B/op | allocs/op | deny ns/op | B/op | allocs/op | allow-parallel ns/op | deny-parallel ns/op |\n")
		p("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, name := range names {
			label := name
			if strings.HasPrefix(name, "slidelog") {
				label = "**" + name + "**"
			}
			p("| %s", label)
			for _, cs := range []string{"allow", "deny"} {
				if x, ok := findGoBench(gb, group+"/"+name+"/"+cs); ok {
					p(" | %s | %.0f | %.0f", fmtNs(x.nsPerOp), x.bytes, x.allocs)
				} else {
					p(" | – | – | –")
				}
			}
			for _, cs := range []string{"allow-parallel", "deny-parallel"} {
				if x, ok := findGoBench(gb, group+"/"+name+"/"+cs); ok {
					p(" | %s", fmtNs(x.nsPerOp))
				} else {
					p(" | –")
				}
			}
			p(" |\n")
		}
		p("\n")
	}
}

func fmtNs(ns float64) string {
	if ns >= 1000 {
		return fmt.Sprintf("%.0f", ns)
	}
	return fmt.Sprintf("%.1f", ns)
}

func writeAccuracy(b *strings.Builder, acc []Accuracy, chart string) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	a0 := acc[0]
	p("## Accuracy: the boundary attack\n\n")
	p("The article's attack, against the standalone Redis, on slidelog (exact, and bucketed with the\n")
	p("non-default `Policy.Precision` at W/100 and W/10), ulule/limiter's fixed window and redis_rate's GCRA\n")
	p("at once, all at %d requests per %v (a short window, so that the attack takes seconds; its\n", a0.Limit, a0.Window)
	p("shape does not depend on the window's length). One request at 0 s opens the fixed window; a burst\n")
	p("of %d requests lands 200 ms before that window ends, another %d requests 50 ms after the next\n", attackBurst, attackBurst)
	p("window starts, and a last burst a window later. The chart counts, at every instant, the requests each\n")
	p("limiter admitted in the rolling window that ends there. slidelog's decision times are the Redis\n")
	p("server's (`Result.DecidedAt`, the clock its guarantee is about); the peers', which do not report\n")
	p("one, are the middle of each round trip as the client measured it.\n\n")
	p("![Admitted requests in every rolling window under the boundary attack](%s)\n\n", chart)
	p("| Limiter | Requests sent | Admitted | Most admitted in any rolling %v | × limit | Limit |\n|---|---:|---:|---:|---:|---:|\n", a0.Window)
	for _, a := range acc {
		p("| %s | %d | %d | **%d** | %.2fx | %d |\n", accuracyLabel(a.Contender), a.Sent, len(a.Admitted), a.MaxInWin,
			float64(a.MaxInWin)/float64(a.Limit), a.Limit)
	}
	p("\n")
}

func writeMethod(b *strings.Builder, r *Results) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	p("## Method\n\n")
	p("- Every contender gets its own go-redis client (same options for all) per cell, and its own key\n")
	p("  prefix; the cells run one after the other, contenders interleaved at each concurrency. Every\n")
	p("  key is deleted after its cell; nothing else on the servers is touched.\n")
	p("- A caller is a goroutine calling `Allow` in a loop; decisions/s is the decisions made divided by\n")
	p("  the wall time until the last caller returned; latency is per call, from a log-linear\n")
	p("  histogram (under 1%% error). Errors are counted apart and are not decisions.\n")
	p("- Commands are counted by a go-redis hook on the contender's client, on a Cluster on each\n")
	p("  node's client (a pipeline to one node counts each command in it and one round trip), during\n")
	p("  the measured part only.\n")
	p("- Peer settings, all for %d per minute: redis_rate `Limit{Rate: %d, Burst: %d, Period: 1m}` (GCRA, as\n", r.Env.Limit, r.Env.Limit, r.Env.Limit)
	p("  `redis_rate.PerMinute`); ulule/limiter `Rate{Limit: %d, Period: 1m}` with its Redis store (fixed\n", r.Env.Limit)
	p("  window); throttled `GCRARateLimiterCtx` with `RateQuota{PerDuration(%d, 1m), MaxBurst: %d}` on its\n", r.Env.Limit, r.Env.Limit-1)
	p("  go-redis v9 store; go-limiter `memorystore` with `Tokens: %d, Interval: 1m`; httprate\n", r.Env.Limit)
	p("  `NewRateLimiter(%d, 1m)` (sliding-window counter); x/time/rate `Every(1m/%d)`, burst %d.\n", r.Env.Limit, r.Env.Limit, r.Env.Limit)
	p("- slidelog runs with its default options, as users get them (automatic pipelining, deny cache,\n")
	p("  fallback, 100 ms stall timeout). The peers have no local fallback, so a decision slidelog's\n")
	p("  failure mode made would count as an error, never as a decision; every decision counted comes\n")
	p("  from Redis or from the deny cache.\n")
	p("- Only slidelog is exact. GCRA and token buckets admit up to a burst plus the rate in a window,\n")
	p("  the fixed window up to twice its limit across a boundary, httprate's sliding counter an\n")
	p("  estimate; they do less work per decision, which is the cost the targets ask slidelog to hide.\n\n")
	if len(r.Env.SkippedReason) > 0 {
		p("Left out: %s.\n\n", strings.Join(r.Env.SkippedReason, "; "))
	}
}
