package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/slidelog/slidelog/bench/contender"
)

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func readScaling(path string) (*ScalingResults, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r ScalingResults
	return &r, json.Unmarshal(b, &r)
}

// coreRevision is the last commit touching core/, as describeEnv reads it.
func coreRevision() string {
	out, err := exec.Command("git", "-C", "..", "log", "-1", "--format=%h %cs %s", "--", "core").Output()
	if err != nil {
		return ""
	}
	rev := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "-C", "..", "status", "--porcelain", "--", "core").Output(); err == nil && len(st) > 0 {
		rev += " (plus uncommitted changes in core/)"
	}
	return rev
}

// scalingSections are the generated blocks of the scaling doc, each
// rewritten from the results.
var scalingSections = []struct {
	name   string
	render func(*ScalingResults) string
}{
	{"scaling-run", scalingRunTable},
	{"scaling-memory", scalingMemoryTable},
	{"scaling-sizing", scalingSizingTable},
	{"scaling-migrate", scalingMigrateTable},
}

// writeScalingDoc rewrites the generated blocks of scalingSections in the
// markdown file path. It fails, writing nothing, when a block is missing.
func writeScalingDoc(path string, res *ScalingResults) error {
	return rewriteBlocks(path, scalingBlocks(res))
}

func scalingBlocks(res *ScalingResults) []namedBlock {
	var bs []namedBlock
	for _, s := range scalingSections {
		bs = append(bs, namedBlock{s.name, s.render(res)})
	}
	return bs
}

// replaceSections returns doc with the generated blocks of
// scalingSections rewritten.
func replaceSections(doc string, res *ScalingResults) (string, error) {
	for _, nb := range scalingBlocks(res) {
		var err error
		if doc, err = replaceBlock(doc, nb.name, nb.body); err != nil {
			return "", err
		}
	}
	return doc, nil
}

// scalingEnvTable is the scaling run's machine, versions and command.
func scalingEnvTable(e ScalingEnv) string {
	return fmt.Sprintf("| Measured | Machine | Load average, start / end | Redis | Go | slidelog core | Command |\n|---|---|---|---|---|---|---|\n"+
		"| %s | %s, %d cores | %s / %s | %s | %s | %s | `%s` |\n\n",
		e.Date.Format("2006-01-02"), e.CPU, e.NumCPU, e.LoadStart, e.LoadEnd, e.RedisVersion, e.GoVersion, e.CoreRevision, e.Command)
}

// scalingRunTable is decisions/s against the number of masters, and the
// decisions/s projected from the Redis CPU per decision.
func scalingRunTable(res *ScalingResults) string {
	var b strings.Builder
	e := res.Env
	b.WriteString(scalingEnvTable(e))
	fmt.Fprintf(&b, "| Callers | Keys | Limit | Measured per row | Turns |\n|---:|---:|---|---:|---:|\n| %d | %s | %d per minute | %v | %d |\n\n",
		e.Callers, fmtCount(e.Keys), e.Limit, e.Cell, e.Rounds)
	b.WriteString("| masters | contender | decisions/s | vs 1 master | p50 | p99 | Redis µs/decision in the script | Redis CPU µs/decision | Redis cores busy (busiest master) | client cores | decisions per round trip | errors |\n")
	b.WriteString("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	first := map[string]float64{}
	for _, c := range res.Cells {
		if _, ok := first[c.Contender]; !ok {
			first[c.Contender] = c.PerSec
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %.2fx | %s | %s | %.1f | %.1f | %.2f (%.2f) | %.2f | %.1f | %d |\n",
			c.Masters, c.Contender, fmtRate(c.PerSec), c.PerSec/first[c.Contender], fmtMicros(c.P50), fmtMicros(c.P99),
			c.CommandUsec, c.CPUUsec, c.RedisCores, c.BusiestCore, c.ClientCores, c.PerRoundTrip, c.Errors)
	}
	b.WriteString("\n| masters | contender | projected decisions/s, optimistic | projected decisions/s, conservative |\n|---:|---|---:|---:|\n")
	one := map[string]float64{}
	for _, c := range res.Cells {
		if c.CPUUsec <= 0 {
			continue
		}
		if _, ok := one[c.Contender]; !ok {
			one[c.Contender] = c.CPUUsec
		}
		n := float64(c.Masters)
		fmt.Fprintf(&b, "| %d | %s | %s | %s |\n", c.Masters, c.Contender, fmtRate(n*1e6/one[c.Contender]), fmtRate(n*1e6/c.CPUUsec))
	}
	return b.String()
}

// scalingMemoryTable is the bytes of full keys.
func scalingMemoryTable(res *ScalingResults) string {
	var b strings.Builder
	b.WriteString(scalingEnvTable(res.Env))
	b.WriteString("| contender | limit | entries | MEMORY USAGE of the key(s) | bytes per entry | encoding | used_memory growth per key |\n")
	b.WriteString("|---|---:|---:|---:|---:|---|---:|\n")
	for _, m := range res.Memory {
		used := "-"
		if m.Keys > 0 {
			used = fmt.Sprintf("%.0f B (over %d keys)", m.UsedPerKey, m.Keys)
		}
		limit := strconv.Itoa(m.Limit)
		perEntry := fmt.Sprintf("%.1f", m.PerEntry)
		if m.Contender == contender.RedisRate {
			limit, perEntry = "any", "-"
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d B | %s | %s | %s |\n", m.Contender, limit, m.Entries, m.Bytes, perEntry, m.Encoding, used)
	}
	return b.String()
}

// scalingMigrateTable is what moving one full key to another master cost.
func scalingMigrateTable(res *ScalingResults) string {
	var b strings.Builder
	b.WriteString(scalingEnvTable(res.Env))
	b.WriteString("| limit | key bytes (MEMORY USAGE) | MIGRATE, wall | MIGRATE on the source master | RESTORE on the target master |\n")
	b.WriteString("|---:|---:|---:|---:|---:|\n")
	for _, m := range res.Migrate {
		fmt.Fprintf(&b, "| %d | %d B | %.2f ms | %.2f ms | %.2f ms |\n", m.Limit, m.Bytes, m.WallMs, m.SourceMs, m.TargetMs)
	}
	return b.String()
}

// sizingCase is one row of the sizing table.
type sizingCase struct {
	keys   float64
	limit  int
	window time.Duration
	rate   float64 // decisions/s, all keys together
}

var sizingCases = []sizingCase{
	{100_000, 100, time.Minute, 5_000},
	{1_000_000, 100, time.Minute, 50_000},
	{100_000, 1_000, time.Hour, 20_000},
	{100_000, 10_000, time.Hour, 20_000},
	{1_000_000, 10, time.Second, 200_000},
	{10_000, 10_000, time.Minute, 100_000},
}

// Planning assumptions of the sizing table.
const (
	// masterBusy is the share of its one core a master is planned to use,
	// leaving room for failover, resharding and bursts.
	masterBusy = 0.5
	// masterMemory is the dataset a master is planned to hold, so that a
	// replica's full sync and a reshard stay short.
	masterMemory = 10 << 30
)

// scalingSizingTable projects the measured per-key, per-entry and
// per-decision figures onto sizingCases.
func scalingSizingTable(res *ScalingResults) string {
	full := map[int]ScalingMemory{}
	var extra float64 // what MEMORY USAGE leaves out, per key
	for _, m := range res.Memory {
		if m.Contender != contender.Slidelog {
			continue
		}
		full[m.Limit] = m
		if m.Keys > 0 {
			extra = max(0, m.UsedPerKey-float64(m.Bytes))
		}
	}
	var cpu float64
	for _, c := range res.Cells {
		if c.Contender == contender.Slidelog && c.Masters == res.Cells[0].Masters {
			cpu = c.CPUUsec
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| Bytes MEMORY USAGE leaves out, per key | Redis CPU per decision (1 master, slidelog) | Planned share of a master's core | Planned memory per master |\n|---:|---:|---:|---:|\n| %.0f B | %.1f µs | %.0f%% | %d GB |\n\n",
		extra, cpu, 100*masterBusy, masterMemory>>30)
	b.WriteString("| keys | limit per window | decisions/s | Redis memory, every key full | Redis memory, traffic bound | Redis CPU (cores) | masters for CPU | masters for memory (full / traffic) |\n")
	b.WriteString("|---:|---|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range sizingCases {
		m, ok := full[s.limit]
		if !ok || cpu == 0 {
			continue
		}
		perKey := float64(m.Bytes) + extra
		worst := s.keys * perKey
		entries := math.Min(s.keys*float64(s.limit), s.rate*s.window.Seconds())
		traffic := math.Min(worst, entries*m.PerEntry+s.keys*extra)
		cores := s.rate * cpu / 1e6
		fmt.Fprintf(&b, "| %s | %s per %s | %s | %s | %s | %.2f | %d | %d / %d |\n",
			compact(s.keys), compact(float64(s.limit)), shortDuration(s.window), fmtRate(s.rate),
			bytesString(worst), bytesString(traffic), cores, int(math.Ceil(cores/masterBusy)),
			int(math.Ceil(worst/masterMemory)), int(math.Ceil(traffic/masterMemory)))
	}
	return b.String()
}

func shortDuration(d time.Duration) string {
	switch d {
	case time.Second:
		return "second"
	case time.Minute:
		return "minute"
	case time.Hour:
		return "hour"
	case 24 * time.Hour:
		return "day"
	}
	return d.String()
}

func bytesString(v float64) string {
	switch {
	case v >= 1<<30:
		return fmt.Sprintf("%.1f GB", v/(1<<30))
	case v >= 1<<20:
		return fmt.Sprintf("%.0f MB", v/(1<<20))
	}
	return fmt.Sprintf("%.0f KB", v/(1<<10))
}
