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
	writeCost(&b, r, nil)
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
