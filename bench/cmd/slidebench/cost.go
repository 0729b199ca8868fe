package main

import (
	"fmt"
	"math"
	"strings"

	"github.com/slidelog/slidelog/bench/contender"
)

// costContenders are the rows of the cost tables: slidelog with its
// default options, redis_rate, the design article's four-command script,
// and slidelog's common-path script by plain EVALSHA (when the run has
// it), the floor of what slidelog's decision costs with no limiter around
// it.
var costContenders = []string{contender.Slidelog, contender.RedisRate, contender.Article, contender.SlidelogScript}

// writeCost writes, per concurrency, what a decision costs each contender
// on the Cluster with many keys: decisions/s, p50/p99, client CPU, Redis
// CPU and Redis commands per decision, and then issue 19's targets.
func writeCost(b *strings.Builder, r *Results, gb []goBench) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	if !hasTopology(r, "cluster") {
		return
	}
	p("## What a decision costs: the tables (Cluster, many keys)\n\n")
	for _, callers := range callerList(r) {
		p("### %d caller(s)\n\n", callers)
		p("| Contender | Decisions/s | vs redis_rate | p50 | p99 | Client CPU / decision | Redis CPU / decision | Replicas' CPU / decision | Redis commands / decision |\n")
		p("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		rr, hasRR := find(r, "cluster", "many-keys", callers, contender.RedisRate)
		for _, name := range costContenders {
			c, ok := find(r, "cluster", "many-keys", callers, name)
			if !ok {
				continue
			}
			d := math.Max(float64(c.Decisions), 1)
			vs := "—"
			if hasRR && name != contender.RedisRate {
				vs = fmtRatio(ratio(c.PerSec, rr.PerSec))
			}
			replicas := "—"
			if c.ReplicaCPUUsec > 0 {
				replicas = fmtMicros(c.ReplicaCPUUsec / d)
			}
			p("| %s | %s | %s | %s | %s | %s | %s | %s | %.2f |\n", name, fmtRate(c.PerSec), vs, fmtMicros(c.P50), fmtMicros(c.P99),
				fmtMicros(c.ClientCPUUsec/d), fmtMicros(c.RedisCPUUsec/d), replicas, float64(c.RedisCommands)/d)
		}
		p("\n")
	}
	rows := append(cellRows(r, costTargets()), benchRows(gb, costBenchTargets)...)
	writeTargetTable(b, "### Issue 19's targets", rows)
}
