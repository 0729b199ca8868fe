package main

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/slidelog/slidelog/bench/contender"
)

// renderMarkdown renders docs/benchmarks.md from a run: the hand-written
// analysis, kept as it is between its markers, then the run's setup and
// its tables.
func renderMarkdown(r *Results, gb []goBench, charts map[string]string, analysis string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Benchmarks\n\n%s\n%s%s\n\n", analysisBegin, analysis, analysisEnd)
	writeSetup(&b, r.Env)
	writeCost(&b, r, gb)
	writeTargets(&b, r, gb)
	writeRedisCells(&b, r, charts)
	writeRTT(&b, r, charts["rtt"])
	writeThroughputCharts(&b, charts)
	writeMemoryCells(&b, r, charts["throughput-memory"])
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
	writeMemoryUsage(&b, r.Memory)
	return b.String()
}

// writeSetup writes the machine, the versions, the command and the
// parameters of the run.
func writeSetup(b *strings.Builder, e Env) {
	row := func(name, format string, a ...any) { fmt.Fprintf(b, "| %s | %s |\n", name, fmt.Sprintf(format, a...)) }
	b.WriteString("## Setup\n\n| | |\n|---|---|\n")
	row("Date", "%s", e.Date.Format("2006-01-02 15:04 MST"))
	row("Machine", "%s, %d cores (`nproc`), GOMAXPROCS %d", e.CPU, e.NumCPU, e.GOMAXPROCS)
	if e.LoadStart != "" {
		row("Load average (1, 5, 15 min), start / end", "%s / %s", e.LoadStart, orDash(e.LoadEnd))
	}
	row("Go", "%s", e.GoVersion)
	row("Redis", "%s; standalone %s; Cluster of %s, seeds %s", e.RedisVersion, e.Standalone, e.ClusterNodes, strings.Join(e.Cluster, ", "))
	row("Client", "go-redis %s; `redis.ClusterOptions{Addrs, PoolSize: %d}`, standalone `redis.Options{Addr, PoolSize}`", e.GoRedis, poolSize)
	row("Peers", "%s", strings.Join(e.PeerVersions, ", "))
	row("slidelog core", "%s", orDash(e.CoreRevision))
	row("Command", "`%s`", e.Command)
	row("Warm-up per cell", "%v", e.Warmup)
	row("Measured per cell, Redis / memory", "%v / %v", e.CellDuration, e.MemoryCell)
	row("Rounds per cell", "%d", max(e.Rounds, 1))
	row("Limit", "%d per %v", e.Limit, e.Window)
	row("Keys, Redis / memory", "%s / %s", fmtCount(e.Keys), fmtCount(e.MemKeys))
	row("Harness run time", "%v", e.ElapsedTotal)
	if len(e.SkippedReason) > 0 {
		row("Left out", "%s", strings.Join(e.SkippedReason, "; "))
	}
	b.WriteString("\n")
}

// writeRedisCells writes the Redis tables, by scenario and topology,
// each with its latency chart.
func writeRedisCells(b *strings.Builder, r *Results, charts map[string]string) {
	for _, sc := range []struct{ id, title string }{{"many-keys", "Redis: many keys"}, {"flood", "Redis: one flooded key"}} {
		fmt.Fprintf(b, "## %s\n\n", sc.title)
		for _, topo := range []string{"standalone", "cluster"} {
			if !hasTopology(r, topo) {
				continue
			}
			fmt.Fprintf(b, "### %s\n\n", topoTitle(topo))
			writeCellTable(b, r, topo, sc.id, true)
			fmt.Fprintf(b, "![Latency percentiles, %s, %s](%s)\n\n", topoTitle(topo), sc.id, charts["latency-"+topo+"-"+sc.id])
		}
	}
}

func writeThroughputCharts(b *strings.Builder, charts map[string]string) {
	b.WriteString("## Throughput by concurrency\n\n")
	for _, topo := range []string{"standalone", "cluster"} {
		if c := charts["throughput-"+topo]; c != "" {
			fmt.Fprintf(b, "![Decisions per second by callers, %s](%s)\n\n", topoTitle(topo), c)
		}
	}
}

// writeMemoryCells writes the in-process limiters' tables and chart.
func writeMemoryCells(b *strings.Builder, r *Results, chart string) {
	if !hasTopology(r, "memory") {
		return
	}
	fmt.Fprintf(b, "## In memory\n\n### Many keys (%s keys, %d/min)\n\n", fmtCount(r.Env.MemKeys), r.Env.Limit)
	writeCellTable(b, r, "memory", "many-keys", false)
	fmt.Fprintf(b, "### One flooded key (far over %d/min)\n\n", r.Env.Limit)
	writeCellTable(b, r, "memory", "flood", false)
	if chart != "" {
		fmt.Fprintf(b, "![Decisions per second by callers, in memory](%s)\n\n", chart)
	}
}

// writeMemoryUsage writes the Redis memory of one full log per limit.
func writeMemoryUsage(b *strings.Builder, ms []Memory) {
	if len(ms) == 0 {
		return
	}
	b.WriteString("## Redis memory per entry\n\n| Limit | Entries | Bytes | Bytes per entry | Encoding |\n|---:|---:|---:|---:|---|\n")
	for _, m := range ms {
		fmt.Fprintf(b, "| %d | %d | %d | %.1f | %s |\n", m.Limit, m.Entries, m.Bytes, m.PerEntry, m.Encoding)
	}
	b.WriteString("\n")
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
	p("| Runs per benchmark (`-count`), the median ns/op shown |\n|---:|\n| %d |\n\n", gb[0].runs)
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
		p("### Benchmark%s\n\n", group)
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
	p("| Limit | Requests per burst |\n|---|---:|\n| %d per %v | %d |\n\n", a0.Limit, a0.Window, attackBurst)
	p("![Admitted requests in every rolling window under the boundary attack](%s)\n\n", chart)
	p("| Limiter | Requests sent | Admitted | Most admitted in any rolling %v | × limit | Limit |\n|---|---:|---:|---:|---:|---:|\n", a0.Window)
	for _, a := range acc {
		p("| %s | %d | %d | **%d** | %.2fx | %d |\n", accuracyLabel(a.Contender), a.Sent, len(a.Admitted), a.MaxInWin,
			float64(a.MaxInWin)/float64(a.Limit), a.Limit)
	}
	p("\n")
}
