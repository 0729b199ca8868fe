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
// CPU and Redis commands per decision, and then issue 19's targets with
// met / not met and by how much. With analysis non-nil, the section opens
// with it between the analysis markers (see keptAnalysis).
func writeCost(b *strings.Builder, r *Results, gb []goBench, analysis *string) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	if !hasTopology(r, "cluster") {
		return
	}
	p("## What a decision costs (Cluster, many keys)\n\n")
	if analysis != nil {
		p("%s\n%s%s\n\n", analysisBegin, *analysis, analysisEnd)
	}
	p("Plain client options (`redis.ClusterOptions{Addrs, PoolSize}`), Redis at normal priority.\n")
	p("Client CPU per decision is this process's `getrusage` (user + system) over the measured slices\n")
	p("÷ decisions; Redis CPU per decision is `INFO cpu` `used_cpu_user + used_cpu_sys` summed over the\n")
	p("masters before and after each slice ÷ decisions; Redis commands per decision are `INFO\n")
	p("commandstats` calls on the masters after `CONFIG RESETSTAT` (commands inside scripts counted, the\n")
	p("`EVALSHA` itself not); the replicas' CPU per decision is `INFO cpu` summed over the replicas, what\n")
	p("applying the masters' writes costs them. CPU per decision does not depend on how client and Redis\n")
	p("share the machine; decisions/s does, and it follows the sum of all three, replicas included.\n")
	p("`slidelog script, plain EVALSHA` is slidelog's common-path script sent by go-redis's `Script.Run`\n")
	p("with no limiter around it: the floor of a slidelog decision on this set-up.\n\n")
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

	p("### Issue 19's targets\n\n")
	p("| Target | Wanted | Reached | |\n|---|---|---|---|\n")
	perDecision := func(v float64, c Cell) float64 { return v / math.Max(float64(c.Decisions), 1) }
	row := func(target, want string, got, limit float64, atMost bool, detail string) {
		met := got >= limit
		if atMost {
			met = got <= limit
		}
		by := ""
		if !met {
			by = fmt.Sprintf(", short by %.2fx", math.Abs(got-limit))
		}
		p("| %s | %s | %s%s | %s |\n", target, want, fmtRatio(got)+" "+detail, by, verdict(met))
	}
	for _, t := range []struct {
		callers int
		rate    float64
	}{{1, 0.8}, {16, 1.0}, {64, 1.3}} {
		s, ok1 := find(r, "cluster", "many-keys", t.callers, contender.Slidelog)
		rr, ok2 := find(r, "cluster", "many-keys", t.callers, contender.RedisRate)
		if !ok1 || !ok2 {
			continue
		}
		floor := ""
		if bare, ok := find(r, "cluster", "many-keys", t.callers, contender.SlidelogScript); ok {
			// What the script alone reaches, with no limiter around it.
			floor = fmt.Sprintf("; the script alone %s", fmtRatio(ratio(bare.PerSec, rr.PerSec)))
		}
		row(fmt.Sprintf("Decisions/s, %d caller(s)", t.callers), fmt.Sprintf("≥ %.1fx redis_rate", t.rate),
			ratio(s.PerSec, rr.PerSec), t.rate, false, fmt.Sprintf("(%s vs %s/s%s)", fmtRate(s.PerSec), fmtRate(rr.PerSec), floor))
		if t.callers == 1 {
			row("p50, 1 caller", "≤ 1.25x redis_rate", ratio(s.P50, rr.P50), 1.25, true, fmt.Sprintf("(%s vs %s)", fmtMicros(s.P50), fmtMicros(rr.P50)))
		}
		sc, rc := perDecision(s.ClientCPUUsec, s), perDecision(rr.ClientCPUUsec, rr)
		row(fmt.Sprintf("Client CPU / decision, %d caller(s)", t.callers), "≤ 1.25x redis_rate", ratio(sc, rc), 1.25, true,
			fmt.Sprintf("(%s vs %s)", fmtMicros(sc), fmtMicros(rc)))
		if t.callers == 1 || t.callers == 64 {
			want := 1.25
			if t.callers == 64 {
				want = 1.0
			}
			sr, rrc := perDecision(s.RedisCPUUsec, s), perDecision(rr.RedisCPUUsec, rr)
			row(fmt.Sprintf("Redis CPU / decision, %d caller(s)", t.callers), fmt.Sprintf("≤ %.2fx redis_rate", want), ratio(sr, rrc), want, true,
				fmt.Sprintf("(%s vs %s; commands %.2f vs %.2f)", fmtMicros(sr), fmtMicros(rrc),
					perDecision(float64(s.RedisCommands), s), perDecision(float64(rr.RedisCommands), rr)))
		}
	}
	for _, cs := range []string{"allow", "deny"} {
		s, ok1 := findGoBench(gb, "Memory/slidelog_memory/"+cs)
		g, ok2 := findGoBench(gb, "Memory/go-limiter_memory/"+cs)
		if !ok1 || !ok2 {
			continue
		}
		row("Memory store, Limiter.Allow, "+cs, "≤ 1.25x go-limiter's ns, 0 allocations", ratio(s.nsPerOp, g.nsPerOp), 1.25, true,
			fmt.Sprintf("(%s vs %s ns, %.0f allocations)", fmtNs(s.nsPerOp), fmtNs(g.nsPerOp), s.allocs))
	}
	p("\n")
}

// The markers around the hand-written part of "What a decision costs" in
// docs/benchmarks.md: the runs behind the figures, what changed and why
// a target is missed. slidebench report keeps what stands between them
// when it rewrites the file, and generates the rest.
const (
	analysisBegin = "<!-- analysis: written by hand; slidebench report keeps it -->"
	analysisEnd   = "<!-- /analysis -->"
)

// keptAnalysis returns what stands between the analysis markers of doc,
// from the line after the first to the line of the second, or "" when doc
// has no such pair.
func keptAnalysis(doc string) string {
	_, rest, ok := strings.Cut(doc, analysisBegin+"\n")
	if !ok {
		return ""
	}
	kept, _, ok := strings.Cut(rest, analysisEnd)
	if !ok {
		return ""
	}
	return kept
}
