package main

import (
	"fmt"
	"math"
	"strings"

	"github.com/slidelog/slidelog/bench/contender"
)

// A target is one row of a targets table: slidelog's figure, the same
// figure of a reference where the target is relative, the value compared
// (their ratio, or slidelog's figure itself) and what an issue asked of it.
type target struct {
	name      string
	slidelog  string // slidelog's figure, formatted
	reference string // the reference's figure, formatted; "–" for an absolute target
	measured  float64
	format    func(float64) string // formats measured and want
	want      float64
	atMost    bool // met when measured ≤ want, else when measured ≥ want
	counts    bool // false: a figure shown beside the targets, with no verdict
}

func (t target) wanted() string {
	switch {
	case !t.counts:
		return "–"
	case t.atMost:
		return "≤ " + t.format(t.want)
	}
	return "≥ " + t.format(t.want)
}

func (t target) verdict() string {
	switch {
	case !t.counts:
		return "–"
	case t.atMost:
		return verdict(t.measured <= t.want)
	}
	return verdict(t.measured >= t.want)
}

// writeTargetTable writes heading and one row per target; nothing when
// there are no rows.
func writeTargetTable(b *strings.Builder, heading string, rows []target) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "%s\n\n| Target | slidelog | reference | measured | wanted | |\n|---|---:|---:|---:|---:|---|\n", heading)
	for _, t := range rows {
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s |\n", t.name, t.slidelog, t.reference, t.format(t.measured), t.wanted(), t.verdict())
	}
	b.WriteString("\n")
}

// A place is where a cell was measured.
type place struct {
	topo, scenario string
	callers        int
	rtt            Duration
}

func findAt(r *Results, at place, name string) (Cell, bool) {
	for _, c := range r.Cells {
		if c.Topology == at.topo && c.Scenario == at.scenario && c.Callers == at.callers && c.AddedRTT == at.rtt && c.Contender == name {
			return c, true
		}
	}
	return Cell{}, false
}

// A measure is one measured quantity of a cell.
type measure struct {
	value  func(Cell) float64
	format func(float64) string
}

func perDecision(v float64, c Cell) float64 { return v / math.Max(float64(c.Decisions), 1) }

var (
	figPerSec    = measure{func(c Cell) float64 { return c.PerSec }, fmtRate}
	figP50       = measure{func(c Cell) float64 { return c.P50 }, fmtMicros}
	figP99       = measure{func(c Cell) float64 { return c.P99 }, fmtMicros}
	figMean      = measure{func(c Cell) float64 { return c.Mean }, fmtMicros}
	figClientCPU = measure{func(c Cell) float64 { return perDecision(c.ClientCPUUsec, c) }, fmtMicros}
	figRedisCPU  = measure{func(c Cell) float64 { return perDecision(c.RedisCPUUsec, c) }, fmtMicros}
	// figCommands is the client's Redis commands per decision.
	figCommands = measure{func(c Cell) float64 { return perDecision(float64(c.Commands), c) }, fmtPercent}
)

func fmtPercent(v float64) string { return fmt.Sprintf("%.2f%%", 100*v) }

// A cellTarget compares a figure of contender of's cell with ref's at
// the same place, or, with ref "", states the figure itself.
type cellTarget struct {
	name           string
	at             place
	of, ref        string
	fig            measure
	want           float64
	atMost, counts bool
}

func (t cellTarget) row(r *Results) (target, bool) {
	c, ok := findAt(r, t.at, t.of)
	if !ok {
		return target{}, false
	}
	v := t.fig.value(c)
	row := target{name: t.name, slidelog: t.fig.format(v), reference: "–", measured: v, format: t.fig.format,
		want: t.want, atMost: t.atMost, counts: t.counts}
	if t.ref == "" {
		return row, true
	}
	ref, ok := findAt(r, t.at, t.ref)
	if !ok || ref.Decisions == 0 {
		return target{}, false
	}
	row.reference = t.fig.format(t.fig.value(ref))
	row.measured, row.format = ratio(v, t.fig.value(ref)), fmtRatio
	return row, true
}

func cellRows(r *Results, ts []cellTarget) []target {
	var rows []target
	for _, t := range ts {
		if row, ok := t.row(r); ok {
			rows = append(rows, row)
		}
	}
	return rows
}

// performanceTargets are the targets of the performance issue at the
// run's largest concurrency, most callers, with the figures shown beside
// them (counts false).
func performanceTargets(most int) []cellTarget {
	const s, rr = contender.Slidelog, contender.RedisRate
	var ts []cellTarget
	for _, topo := range []string{"cluster", "standalone"} {
		keys, flood, one := place{topo, "many-keys", most, 0}, place{topo, "flood", most, 0}, place{topo, "many-keys", 1, 0}
		at := fmt.Sprintf("%s, %d callers", topoTitle(topo), most)
		ts = append(ts,
			cellTarget{at + ", many keys: decisions/s ÷ redis_rate's", keys, s, rr, figPerSec, 2, false, topo == "cluster"},
			cellTarget{at + ", many keys: p99 ÷ redis_rate's", keys, s, rr, figP99, 1, true, topo == "cluster"},
			cellTarget{at + ", many keys: decisions/s ÷ slidelog's with pipelining off", keys, s, contender.SlidelogNoPipelining, figPerSec, 0, false, false},
			cellTarget{at + ", one flooded key: decisions/s ÷ redis_rate's", flood, s, rr, figPerSec, 10, false, true},
			cellTarget{at + ", one flooded key: Redis commands per decision", flood, s, "", figCommands, 0.01, true, true},
			cellTarget{at + ", one flooded key: decisions/s ÷ slidelog's with the deny cache off", flood, s, contender.SlidelogNoDenyCache, figPerSec, 0, false, false},
			cellTarget{topoTitle(topo) + ", 1 caller: p50 ÷ a plain EVALSHA of slidelog's script", one, s, contender.SlidelogScript, figP50, 1.1, true, true},
			cellTarget{topoTitle(topo) + ", 1 caller: mean ÷ a plain EVALSHA of slidelog's script", one, s, contender.SlidelogScript, figMean, 0, false, false},
			cellTarget{topoTitle(topo) + ", 1 caller: p50 ÷ a plain EVALSHA of `return 1`", one, s, contender.EvalSHA, figP50, 1.1, true, true},
			cellTarget{topoTitle(topo) + ", 1 caller: mean ÷ a plain EVALSHA of `return 1`", one, s, contender.EvalSHA, figMean, 0, false, false},
		)
	}
	return ts
}

// costTargets are issue 19's targets on the Cluster with many keys.
func costTargets() []cellTarget {
	const s, rr = contender.Slidelog, contender.RedisRate
	at := func(callers int) place { return place{"cluster", "many-keys", callers, 0} }
	return []cellTarget{
		{"Decisions/s, 1 caller", at(1), s, rr, figPerSec, 0.8, false, true},
		{"Decisions/s, 1 caller, the script alone", at(1), contender.SlidelogScript, rr, figPerSec, 0, false, false},
		{"p50, 1 caller", at(1), s, rr, figP50, 1.25, true, true},
		{"Client CPU / decision, 1 caller", at(1), s, rr, figClientCPU, 1.25, true, true},
		{"Redis CPU / decision, 1 caller", at(1), s, rr, figRedisCPU, 1.25, true, true},
		{"Decisions/s, 16 callers", at(16), s, rr, figPerSec, 1.0, false, true},
		{"Decisions/s, 16 callers, the script alone", at(16), contender.SlidelogScript, rr, figPerSec, 0, false, false},
		{"Client CPU / decision, 16 callers", at(16), s, rr, figClientCPU, 1.25, true, true},
		{"Decisions/s, 64 callers", at(64), s, rr, figPerSec, 1.3, false, true},
		{"Decisions/s, 64 callers, the script alone", at(64), contender.SlidelogScript, rr, figPerSec, 0, false, false},
		{"Client CPU / decision, 64 callers", at(64), s, rr, figClientCPU, 1.25, true, true},
		{"Redis CPU / decision, 64 callers", at(64), s, rr, figRedisCPU, 1.0, true, true},
	}
}

// rttTargets are the round-trip sweep's targets.
func rttTargets(r *Results) []cellTarget {
	const s, rr = contender.Slidelog, contender.RedisRate
	var ts []cellTarget
	for _, d := range rttList(r) {
		at := place{rttTopology, "many-keys", r.Env.RTTCallers, d}
		if d == 0 {
			ts = append(ts, cellTarget{rttLabel(d) + ": decisions/s ÷ redis_rate's", at, s, rr, figPerSec, 1, false, true})
			continue
		}
		ts = append(ts,
			cellTarget{rttLabel(d) + ": decisions/s ÷ redis_rate's", at, s, rr, figPerSec, 2, false, true},
			cellTarget{rttLabel(d) + ": p99 ÷ redis_rate's", at, s, rr, figP99, 1, true, true})
	}
	return ts
}

// A benchTarget compares slidelog's memory-store go test benchmark with
// go-limiter's (ns/op), or states its allocations per decision.
type benchTarget struct {
	name   string
	bench  string // allow or deny
	allocs bool
	want   float64
}

var (
	performanceBenchTargets = []benchTarget{
		{"Memory store, `allow`, one goroutine: ns/op ÷ go-limiter's", "allow", false, 1},
		{"Memory store, `allow`, one goroutine: allocations per decision", "allow", true, 1},
		{"Memory store, `deny`, one goroutine: ns/op ÷ go-limiter's", "deny", false, 1},
		{"Memory store, `deny`, one goroutine: allocations per decision", "deny", true, 1},
	}
	costBenchTargets = []benchTarget{
		{"Memory store, Limiter.Allow, allow: ns/op ÷ go-limiter's", "allow", false, 1.25},
		{"Memory store, Limiter.Allow, allow: allocations per decision", "allow", true, 0},
		{"Memory store, Limiter.Allow, deny: ns/op ÷ go-limiter's", "deny", false, 1.25},
		{"Memory store, Limiter.Allow, deny: allocations per decision", "deny", true, 0},
	}
)

func benchRows(gb []goBench, ts []benchTarget) []target {
	var rows []target
	for _, t := range ts {
		s, ok1 := findGoBench(gb, "Memory/slidelog_memory/"+t.bench)
		g, ok2 := findGoBench(gb, "Memory/go-limiter_memory/"+t.bench)
		if !ok1 || !ok2 {
			continue
		}
		row := target{name: t.name, slidelog: fmtNs(s.nsPerOp), reference: fmtNs(g.nsPerOp), measured: ratio(s.nsPerOp, g.nsPerOp),
			format: fmtRatio, want: t.want, atMost: true, counts: true}
		if t.allocs {
			row.slidelog, row.reference, row.measured, row.format = fmtAllocs(s.allocs), fmtAllocs(g.allocs), s.allocs, fmtAllocs
		}
		rows = append(rows, row)
	}
	return rows
}

func fmtAllocs(v float64) string { return fmt.Sprintf("%.0f", v) }

// entryTargets are the bytes per entry the performance issue asks for,
// by limit.
var entryTargets = map[int]float64{100: 22, 2000: 100}

func entryRows(ms []Memory) []target {
	var rows []target
	for _, m := range ms {
		want, ok := entryTargets[m.Limit]
		if !ok {
			continue
		}
		rows = append(rows, target{name: fmt.Sprintf("Bytes per entry, limit %d (%s)", m.Limit, m.Encoding),
			slidelog: fmtBytesPerEntry(m.PerEntry), reference: "–", measured: m.PerEntry, format: fmtBytesPerEntry,
			want: want, atMost: true, counts: true})
	}
	return rows
}

func fmtBytesPerEntry(v float64) string { return fmt.Sprintf("%.1f B", v) }

// writeTargets writes the performance issue's targets against the run.
func writeTargets(b *strings.Builder, r *Results, gb []goBench) {
	most := 0
	for _, c := range callerList(r) {
		most = max(most, c)
	}
	rows := cellRows(r, performanceTargets(most))
	rows = append(rows, benchRows(gb, performanceBenchTargets)...)
	rows = append(rows, entryRows(r.Memory)...)
	writeTargetTable(b, "## Against the targets", rows)
}

func fmtCount(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
