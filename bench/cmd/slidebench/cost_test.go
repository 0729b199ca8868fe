package main

import (
	"strings"
	"testing"

	"github.com/slidelog/slidelog/bench/contender"
)

// TestWriteCost checks the cost tables: every contender's row with its
// replicas' CPU per decision ("—" when a run did not measure it), and the
// decisions/s target with the ratio of the script alone, the floor.
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
	writeCost(&b, r, nil, nil)
	out := b.String()
	for _, want := range []string{
		"| slidelog | 17.0k | 0.85× | 700 µs | 4.00 ms | 29 µs | 46 µs | 16 µs | 4.00 |",
		"| redis_rate v10 | 20.0k | — | 700 µs | 4.00 ms | 25 µs | 42 µs | 14 µs | 4.00 |",
		"| slidelog script, plain EVALSHA | 19.0k | 0.95× | 700 µs | 4.00 ms | 26 µs | 43 µs | — | 4.00 |",
		"0.85× (17.0k vs 20.0k/s; the script alone 0.95×), short by 0.15x | **not met** |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("cost tables lack %q:\n%s", want, out)
		}
	}
}

// TestRenderKeepsAnalysis checks that rewriting docs/benchmarks.md keeps
// the hand-written analysis of "What a decision costs" as it was, and
// that rendering again from the rendered file changes nothing.
func TestRenderKeepsAnalysis(t *testing.T) {
	r := &Results{Cells: []Cell{
		{Topology: "cluster", Scenario: "many-keys", Callers: 1, Contender: contender.Slidelog, Decisions: 10, PerSec: 1},
		{Topology: "cluster", Scenario: "many-keys", Callers: 1, Contender: contender.RedisRate, Decisions: 10, PerSec: 1},
	}}
	const analysis = "Measured by hand.\n\n- **Not met**, and why.\n"
	out := renderMarkdown(r, nil, nil, analysis)
	want := analysisBegin + "\n" + analysis + analysisEnd
	if !strings.Contains(out, want) {
		t.Fatalf("the analysis is not kept between its markers:\n%s", out)
	}
	if i, j := strings.Index(out, want), strings.Index(out, "### 1 caller(s)"); i < 0 || j < i {
		t.Errorf("the analysis does not come before the generated tables")
	}
	if got := keptAnalysis(out); got != analysis {
		t.Errorf("keptAnalysis = %q, want %q", got, analysis)
	}
	if again := renderMarkdown(r, nil, nil, keptAnalysis(out)); again != out {
		t.Errorf("rendering the rendered file again changed it")
	}
	if got := keptAnalysis("# Benchmarks\n\nno markers\n"); got != "" {
		t.Errorf("keptAnalysis without markers = %q, want \"\"", got)
	}
}
