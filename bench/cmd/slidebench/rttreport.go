package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/slidelog/slidelog/bench/contender"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// rttList returns the added round-trip latencies of the sweep, in order.
func rttList(r *Results) []Duration {
	var ds []Duration
	for _, c := range r.Cells {
		if c.Topology == rttTopology && !slices.Contains(ds, c.AddedRTT) {
			ds = append(ds, c.AddedRTT)
		}
	}
	slices.Sort(ds)
	return ds
}

func findRTT(r *Results, rtt Duration, name string) (Cell, bool) {
	for _, c := range r.Cells {
		if c.Topology == rttTopology && c.AddedRTT == rtt && c.Contender == name {
			return c, true
		}
	}
	return Cell{}, false
}

func rttLabel(d Duration) string {
	if d == 0 {
		return "0 (loopback)"
	}
	return fmt.Sprintf("%g ms", float64(d)/float64(time.Millisecond))
}

// rttChart draws decisions/s and p99 against the added round trip, one
// line per contender.
func rttChart(r *Results, path string) error {
	rtts := rttList(r)
	cats := make([]string, len(rtts))
	for i, d := range rtts {
		cats[i] = rttLabel(d)
	}
	var plots []*plot.Plot
	for _, panel := range []struct {
		title, y string
		v        func(Cell) float64
	}{
		{"decisions/s", "decisions/s (log scale)", func(c Cell) float64 { return c.PerSec }},
		{"p99 latency", "p99, µs (log scale)", func(c Cell) float64 { return c.P99 }},
	} {
		var ss []series
		for _, name := range contender.RTT {
			s := series{name: name}
			for i, d := range rtts {
				if c, ok := findRTT(r, d, name); ok && c.Decisions > 0 {
					s.xys = append(s.xys, plotter.XY{X: float64(i), Y: panel.v(c)})
				}
			}
			ss = append(ss, s)
		}
		p, err := categoryPlot(panel.title, "round-trip latency added to every Cluster node", panel.y, cats, ss)
		if err != nil {
			return err
		}
		plots = append(plots, p)
	}
	return figure(path, fmt.Sprintf("Redis Cluster with added round-trip latency, %d callers, %s keys", r.Env.RTTCallers, fmtCount(r.Env.Keys)),
		12*vg.Inch, 5.2*vg.Inch, present(r, rttTopology, "", contender.RTT), plots...)
}

// writeRTT writes the round-trip sweep: the table against added latency,
// the targets it checks, and the sizing figures.
func writeRTT(b *strings.Builder, r *Results, chart string) {
	rtts := rttList(r)
	if len(rtts) == 0 {
		return
	}
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	p("## Redis Cluster with real round trips\n\n")
	p("| Callers | Keys | Limit |\n|---:|---:|---|\n| %d | %s | %d per minute |\n\n", r.Env.RTTCallers, fmtCount(r.Env.Keys), r.Env.Limit)
	p("![Decisions per second and p99 against added round-trip latency](%s)\n\n", chart)
	p("| Added round trip | Contender | Decisions/s | vs redis_rate | p50 | p99 | Commands / round trip | Delay applied p50 / p99 | Errors |\n")
	p("|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, d := range rtts {
		ref, _ := findRTT(r, d, contender.RedisRate)
		for _, name := range contender.RTT {
			c, ok := findRTT(r, d, name)
			if !ok {
				continue
			}
			label := name
			if name == contender.Slidelog {
				label = "**" + name + "**"
			}
			applied := "–"
			if d > 0 {
				applied = fmt.Sprintf("%s / %s", fmtMicros(float64(c.AppliedP50)/1e3), fmtMicros(float64(c.AppliedP99)/1e3))
			}
			p("| %s | %s | %s | %s | %s | %s | %.2f | %s | %d |\n", rttLabel(d), label, fmtRate(c.PerSec), fmtRatio(ratio(c.PerSec, ref.PerSec)),
				fmtMicros(c.P50), fmtMicros(c.P99), float64(c.Commands)/math.Max(float64(c.RoundTrips), 1), applied, c.Errors)
		}
	}
	p("\n")

	writeTargetTable(b, "### Against the round-trip targets", cellRows(r, rttTargets(r)))

	p("### Sizing\n\n")
	p("| Added round trip | Contender | Command time µs / decision | Redis CPU µs / decision | Decisions/s per Redis core | Redis keys | Bytes per limited key | Entries per key | Bytes per entry |\n")
	p("|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, d := range rtts {
		for _, name := range contender.RTT {
			c, ok := findRTT(r, d, name)
			if !ok || c.Decisions == 0 {
				continue
			}
			dec := float64(c.Decisions)
			cpu := c.RedisCPUUsec / dec
			keys, perKey, perEntry, entries := "–", "–", "–", "–"
			if c.RedisKeys > 0 {
				limited := c.RedisKeys
				if c.ZSets > 0 {
					limited = c.ZSets
				}
				keys = fmtCount(int(c.RedisKeys))
				perKey = fmt.Sprintf("%.0f", float64(c.RedisBytes)/float64(limited))
				if c.Entries > 0 {
					entries = fmt.Sprintf("%.1f", float64(c.Entries)/float64(limited))
					perEntry = fmt.Sprintf("%.1f", float64(c.ZSetBytes)/float64(c.Entries))
				}
			}
			p("| %s | %s | %.1f | %.1f | %s | %s | %s | %s | %s |\n", rttLabel(d), name, c.RedisCmdUsec/dec, cpu,
				fmtRate(1e6/cpu), keys, perKey, entries, perEntry)
		}
	}
	p("\n")
}
