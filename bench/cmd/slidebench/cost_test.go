package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/slidelog/slidelog/bench/contender"
)

// TestWriteCost checks the cost tables: every contender's row with its
// replicas' CPU per decision ("—" when a run did not measure it), and the
// decisions/s target beside the ratio of the script alone, the floor.
func TestWriteCost(t *testing.T) {
	cell := func(name string, perSec, client, redis, replicas float64) Cell {
		const n = 1000
		return Cell{Topology: "cluster", Scenario: "many-keys", Callers: 16, Contender: name, Decisions: n,
			PerSec: perSec, P50: 700, P99: 4000, ClientCPUUsec: client * n, RedisCPUUsec: redis * n,
			ReplicaCPUUsec: replicas * n, RedisCommands: 4 * n}
	}
	r := &Results{Cells: []Cell{
		cell(contender.Slidelog, 17000, 29, 46, 16),
		cell(contender.RedisRate, 20000, 25, 42, 14),
		cell(contender.SlidelogScript, 19000, 26, 43, 0),
	}}
	var b strings.Builder
	writeCost(&b, r, nil)
	wantLines(t, b.String(),
		"| slidelog | 17.0k | 0.85× | 700 µs | 4.00 ms | 29 µs | 46 µs | 16 µs | 4.00 |",
		"| redis_rate v10 | 20.0k | — | 700 µs | 4.00 ms | 25 µs | 42 µs | 14 µs | 4.00 |",
		"| slidelog script, plain EVALSHA | 19.0k | 0.95× | 700 µs | 4.00 ms | 26 µs | 43 µs | — | 4.00 |",
		"| Decisions/s, 16 callers | 17.0k | 20.0k | 0.85× | ≥ 1.00× | **not met** |",
		"| Decisions/s, 16 callers, the script alone | 19.0k | 20.0k | 0.95× | – | – |",
		"| Client CPU / decision, 16 callers | 29 µs | 25 µs | 1.16× | ≤ 1.25× | **met** |",
	)
}

// wantLines reports each line of wants that out lacks.
func wantLines(t *testing.T, out string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestTargets checks the rows of the targets tables against figures
// whose verdicts are known.
func TestTargets(t *testing.T) {
	r := fullResults()
	gb := []goBench{
		{name: "Memory/slidelog_memory/allow", nsPerOp: 130, allocs: 0},
		{name: "Memory/go-limiter_memory/allow", nsPerOp: 100, allocs: 0},
	}
	var b strings.Builder
	writeTargets(&b, r, gb)
	wantLines(t, b.String(),
		"| Redis Cluster, 64 callers, many keys: decisions/s ÷ redis_rate's | 30.0k | 20.0k | 1.50× | ≥ 2.00× | **not met** |",
		"| Redis Cluster, 64 callers, many keys: p99 ÷ redis_rate's | 4.00 ms | 5.00 ms | 0.80× | ≤ 1.00× | **met** |",
		"| Redis standalone, 64 callers, many keys: decisions/s ÷ redis_rate's | 30.0k | 20.0k | 1.50× | – | – |",
		"| Redis Cluster, 64 callers, one flooded key: Redis commands per decision | 0.50% | – | 0.50% | ≤ 1.00% | **met** |",
		"| Memory store, `allow`, one goroutine: ns/op ÷ go-limiter's | 130.0 | 100.0 | 1.30× | ≤ 1.00× | **not met** |",
		"| Memory store, `allow`, one goroutine: allocations per decision | 0 | 0 | 0 | ≤ 1 | **met** |",
		"| Bytes per entry, limit 100 (listpack) | 21.5 B | – | 21.5 B | ≤ 22.0 B | **met** |",
	)
}

// fullResults is a run with a cell in every table the report writes.
func fullResults() *Results {
	r := &Results{Env: Env{Date: time.Date(2026, 12, 4, 13, 0, 0, 0, time.UTC), Keys: 10000, MemKeys: 262144, Limit: 100,
		Window: Duration(time.Minute), RTTCallers: 64, Command: "slidebench run", SkippedReason: []string{"accuracy: no standalone"}}}
	for _, topo := range []string{"cluster", "standalone"} {
		for _, sc := range []string{"many-keys", "flood"} {
			for _, callers := range []int{1, 64} {
				for _, name := range contender.RedisAll {
					c := Cell{Topology: topo, Scenario: sc, Callers: callers, Contender: name, Decisions: 1000, Allowed: 900,
						PerSec: 20000, P50: 1000, P99: 5000, P999: 9000, Mean: 1500, Commands: 1000, RoundTrips: 1000,
						ClientCPUUsec: 25000, RedisCPUUsec: 40000, ReplicaCPUUsec: 10000, RedisCommands: 3000}
					if name == contender.Slidelog {
						c.PerSec, c.P99, c.Commands = 30000, 4000, 5
					}
					r.Cells = append(r.Cells, c)
				}
			}
		}
	}
	for _, d := range []Duration{0, Duration(time.Millisecond)} {
		for _, name := range contender.RTT {
			r.Cells = append(r.Cells, Cell{Topology: rttTopology, Scenario: "many-keys", Callers: 64, Contender: name, AddedRTT: d,
				Decisions: 1000, PerSec: 10000, P50: 3000, P99: 9000, Commands: 1000, RoundTrips: 200, RedisCmdUsec: 30000,
				RedisCPUUsec: 40000, RedisKeys: 100, RedisBytes: 50000, ZSets: 100, ZSetBytes: 30000, Entries: 1000})
		}
	}
	for _, name := range contender.Memory {
		for _, sc := range []string{"many-keys", "flood"} {
			r.Cells = append(r.Cells, Cell{Topology: "memory", Scenario: sc, Callers: 1, Contender: name, Decisions: 1000, PerSec: 1e6,
				P50: 0.5, P99: 2, P999: 10, Commands: -1, RoundTrips: -1})
		}
	}
	acc := func(span Duration) []Accuracy {
		return []Accuracy{{Contender: contender.Slidelog, Limit: 100, Window: Duration(2 * time.Second), Admitted: make([]float64, 100),
			Sent: 600, MaxInWin: 100, Span: span}}
	}
	r.Accuracy, r.Overload = acc(0), acc(Duration(20*time.Second))
	r.Sizing = []Sizing{
		{Case: quotaCases[0].name, Model: sizingGCRA, Store: "redis", BytesPerKey: 120, UsecPerDecision: 9},
		{Case: quotaCases[0].name, Model: "P = W/100 (36s)", Precision: Duration(36 * time.Second), Store: "redis", Keys: 16,
			Decisions: 4800, BytesPerKey: 1200, UsecPerDecision: 30, Parts: map[string]float64{":b": 1000, ":r": 200}},
	}
	r.Memory = []Memory{{Limit: 100, Entries: 100, Bytes: 2150, PerEntry: 21.5, Encoding: "listpack"}}
	return r
}

// fullGoBench is go test output with both groups of benchmarks.
func fullGoBench() []goBench {
	return parseGoBench(`BenchmarkMemory/slidelog_memory/allow-2 1000 130 ns/op 0 B/op 0 allocs/op
BenchmarkMemory/go-limiter_memory/allow-2 1000 100 ns/op 0 B/op 0 allocs/op
BenchmarkRedis/slidelog/allow-2 1000 150000 ns/op 3000 B/op 60 allocs/op`)
}

// TestRenderKeepsAnalysis checks that rewriting docs/benchmarks.md keeps
// its hand-written analysis byte for byte, before the generated part,
// and that rendering again from the rendered file changes nothing.
func TestRenderKeepsAnalysis(t *testing.T) {
	page, err := os.ReadFile("../../../docs/benchmarks.md")
	if err != nil {
		t.Fatal(err)
	}
	r, gb := fullResults(), fullGoBench()
	for _, analysis := range []string{keptAnalysis(string(page)), "Measured by hand.\n\n- **Not met**, and why.\n", ""} {
		out := renderMarkdown(r, gb, nil, analysis)
		if got := keptAnalysis(out); got != analysis {
			t.Errorf("keptAnalysis of the rendered page = %q, want %q", got, analysis)
		}
		want := analysisBegin + "\n" + analysis + analysisEnd + "\n"
		if i, j := strings.Index(out, want), strings.Index(out, "## Setup"); i < 0 || j < i {
			t.Errorf("the analysis is not kept between its markers before the generated part:\n%s", out)
		}
		if again := renderMarkdown(r, gb, nil, keptAnalysis(out)); again != out {
			t.Errorf("rendering the rendered page again changed it")
		}
	}
	if keptAnalysis(string(page)) == "" {
		t.Error("docs/benchmarks.md has no hand-written analysis between its markers")
	}
	if got := keptAnalysis("# Benchmarks\n\nno markers\n"); got != "" {
		t.Errorf("keptAnalysis without markers = %q, want \"\"", got)
	}
}

// TestGeneratedHasNoProse checks that what slidebench writes, outside the
// hand-written analysis, is headings, tables and charts: every other
// line is blank or a marker.
func TestGeneratedHasNoProse(t *testing.T) {
	r := fullResults()
	charts := map[string]string{"rtt": "img/rtt.png", "accuracy": "img/a.png", "throughput-memory": "img/m.png",
		"throughput-cluster": "img/c.png", "latency-cluster-flood": "img/f.png"}
	page := renderMarkdown(r, fullGoBench(), charts, "Any prose at all, written by hand.\n")
	head, _, tail, ok := cutBlock(page, analysisBegin, analysisEnd)
	if !ok {
		t.Fatal("no analysis block")
	}
	scaling := &ScalingResults{
		Cells:   []ScalingCell{{Masters: 1, Contender: "slidelog", PerSec: 1000, CPUUsec: 40}},
		Memory:  []ScalingMemory{{Contender: "slidelog", Limit: 100, Entries: 100, Bytes: 2300, PerEntry: 23, Keys: 10, UsedPerKey: 2400}},
		Migrate: []ScalingMigrate{{Limit: 1000, Bytes: 94000, WallMs: 1.5}},
	}
	generated := map[string]string{"benchmarks.md": head + tail, "bucketed-sizing": scalingSizingBlock(r)}
	for _, nb := range scalingBlocks(scaling) {
		generated[nb.name] = nb.body
	}
	for name, text := range generated {
		checkNoProse(t, name, text)
	}
}

// TestDocsGeneratedHaveNoProse checks the generated parts of the pages
// as committed: docs/benchmarks.md outside its analysis, and the
// generated blocks of docs/scaling.md.
func TestDocsGeneratedHaveNoProse(t *testing.T) {
	page, err := os.ReadFile("../../../docs/benchmarks.md")
	if err != nil {
		t.Fatal(err)
	}
	head, _, tail, ok := cutBlock(string(page), analysisBegin, analysisEnd)
	if !ok {
		t.Fatal("docs/benchmarks.md: no analysis block")
	}
	checkNoProse(t, "docs/benchmarks.md", head+tail)
	scaling, err := os.ReadFile("../../../docs/scaling.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"scaling-run", "scaling-memory", "scaling-sizing", "scaling-migrate", scalingSizingMarker} {
		_, body, _, ok := cutBlock(string(scaling), "<!-- "+name+":begin", "<!-- "+name+":end -->")
		if !ok {
			t.Errorf("docs/scaling.md: no %s block", name)
			continue
		}
		checkNoProse(t, "docs/scaling.md "+name, body)
	}
}

// checkNoProse reports every line of generated text that is not blank, a
// heading, a table row, a chart or a marker, and text with no table.
func checkNoProse(t *testing.T, name, text string) {
	t.Helper()
	tables := 0
	for line := range strings.Lines(text) {
		line = strings.TrimSuffix(line, "\n")
		switch {
		case strings.HasPrefix(line, "|"):
			tables++
		case line == "", strings.HasPrefix(line, "#"), strings.HasPrefix(line, "!["), line == analysisBegin, line == analysisEnd:
		default:
			t.Errorf("%s: generated line is neither a heading, a table row nor a chart: %q", name, line)
		}
	}
	if tables == 0 {
		t.Errorf("%s: no table", name)
	}
}
