package main

import (
	"bufio"
	"cmp"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/slidelog/slidelog/bench/contender"
)

func reportMain(args []string) error {
	fs := newFlagSet("report")
	in := fs.String("in", "results/latest.json", "results written by slidebench run")
	gotest := fs.String("gotest", "results/gotest.txt", "output of the go test benchmarks (optional)")
	out := fs.String("out", "../docs/benchmarks.md", "markdown to write")
	imgDir := fs.String("img", "../docs/img", "directory for the PNG charts")
	scalingDoc := fs.String("scaling-doc", "", "also rewrite the bucketed-sizing section of this markdown (docs/scaling.md) when the results have sizing figures")
	recordTo := fs.String("record", "recorded", "keep the results the page is rendered from in this directory, to render it again without measuring (empty: do not)")
	costOnly := fs.Bool("cost", false, "print only the section \"What a decision costs\" to standard output (for a run of -only cluster/many-keys), writing no file")
	if err := fs.Parse(args); err != nil {
		return err
	}

	r, err := readResults(*in)
	if err != nil {
		return err
	}
	if *costOnly {
		var b strings.Builder
		writeCost(&b, r, nil)
		_, err := os.Stdout.WriteString(b.String())
		return err
	}
	var gb []goBench
	if b, err := os.ReadFile(*gotest); err == nil {
		gb = parseGoBench(string(b))
	}
	if err := os.MkdirAll(*imgDir, 0o755); err != nil {
		return err
	}
	rel, err := filepath.Rel(filepath.Dir(*out), *imgDir)
	if err != nil {
		return err
	}
	charts, err := drawCharts(r, *imgDir, rel)
	if err != nil {
		return err
	}
	var analysis string
	if old, err := os.ReadFile(*out); err == nil {
		analysis = keptAnalysis(string(old))
	}
	md := renderMarkdown(r, gb, charts, analysis)
	if err := os.WriteFile(*out, []byte(md), 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote %s and %d charts in %s\n", *out, len(charts), *imgDir)
	if err := record(*recordTo, recordedFile{*in, "benchmarks.json"}, recordedFile{*gotest, "gotest.txt"}); err != nil {
		return err
	}
	if *scalingDoc != "" && len(r.Sizing) > 0 {
		if err := writeScalingSizing(*scalingDoc, r); err != nil {
			return err
		}
		fmt.Printf("wrote the %s section of %s\n", scalingSizingMarker, *scalingDoc)
	}
	return nil
}

// drawCharts writes every PNG and returns their paths relative to the
// markdown, by chart id.
func drawCharts(r *Results, dir, rel string) (map[string]string, error) {
	charts := map[string]string{}
	add := func(id, file string, draw func(path string) error) error {
		if err := draw(filepath.Join(dir, file)); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		charts[id] = filepath.ToSlash(filepath.Join(rel, file))
		return nil
	}
	redisNames := contender.RedisAll
	for _, topo := range []string{"standalone", "cluster"} {
		if !hasTopology(r, topo) {
			continue
		}
		if err := add("throughput-"+topo, "throughput-"+topo+".png", func(p string) error {
			return throughputChart(r, topo, redisNames, p)
		}); err != nil {
			return nil, err
		}
		for _, sc := range []string{"many-keys", "flood"} {
			if err := add("latency-"+topo+"-"+sc, "latency-"+topo+"-"+sc+".png", func(p string) error {
				return latencyChart(r, topo, sc, redisNames, p)
			}); err != nil {
				return nil, err
			}
		}
	}
	if hasTopology(r, rttTopology) {
		if err := add("rtt", "throughput-rtt.png", func(p string) error { return rttChart(r, p) }); err != nil {
			return nil, err
		}
	}
	if hasTopology(r, "memory") {
		if err := add("throughput-memory", "throughput-memory.png", func(p string) error {
			return throughputChart(r, "memory", contender.Memory, p)
		}); err != nil {
			return nil, err
		}
	}
	if len(r.Accuracy) > 0 {
		if err := add("accuracy", "accuracy-boundary-attack.png", func(p string) error {
			return accuracyChart(r.Accuracy, p)
		}); err != nil {
			return nil, err
		}
	}
	return charts, nil
}

type goBench struct {
	name     string
	nsPerOp  float64
	bytes    float64
	allocs   float64
	hasAlloc bool
	runs     int
}

// parseGoBench reads `go test -bench` output lines.
func parseGoBench(out string) []goBench {
	var bs []goBench
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		b := goBench{name: strings.TrimPrefix(f[0], "Benchmark")}
		if i := strings.LastIndexByte(b.name, '-'); i > 0 {
			if _, err := strconv.Atoi(b.name[i+1:]); err == nil {
				b.name = b.name[:i]
			}
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			switch f[i+1] {
			case "ns/op":
				b.nsPerOp = v
			case "B/op":
				b.bytes = v
				b.hasAlloc = true
			case "allocs/op":
				b.allocs = v
			}
		}
		bs = append(bs, b)
	}
	return medians(bs)
}

// medians folds repeated runs of one benchmark (go test -count) into the
// run with the median ns/op, keeping the first-seen order.
func medians(bs []goBench) []goBench {
	var order []string
	runs := map[string][]goBench{}
	for _, b := range bs {
		if _, ok := runs[b.name]; !ok {
			order = append(order, b.name)
		}
		runs[b.name] = append(runs[b.name], b)
	}
	out := make([]goBench, 0, len(order))
	for _, name := range order {
		r := runs[name]
		slices.SortFunc(r, func(a, b goBench) int { return cmp.Compare(a.nsPerOp, b.nsPerOp) })
		m := r[len(r)/2]
		m.runs = len(r)
		out = append(out, m)
	}
	return out
}

func findGoBench(gb []goBench, name string) (goBench, bool) {
	for _, b := range gb {
		if b.name == name {
			return b, true
		}
	}
	return goBench{}, false
}

func callerList(r *Results) []int {
	var cs []int
	for _, c := range r.Cells {
		if !slices.Contains(cs, c.Callers) {
			cs = append(cs, c.Callers)
		}
	}
	slices.Sort(cs)
	return cs
}

func find(r *Results, topo, scenario string, callers int, name string) (Cell, bool) {
	for _, c := range r.Cells {
		if c.Topology == topo && c.Scenario == scenario && c.Callers == callers && c.Contender == name {
			return c, true
		}
	}
	return Cell{}, false
}

func hasTopology(r *Results, topo string) bool {
	return slices.ContainsFunc(r.Cells, func(c Cell) bool { return c.Topology == topo })
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}

func fmtRate(v float64) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.1fk", v/1e3)
	case v >= 1e3:
		return fmt.Sprintf("%.2fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

func fmtMicros(us float64) string {
	switch {
	case math.IsNaN(us):
		return "–"
	case us >= 10000:
		return fmt.Sprintf("%.1f ms", us/1e3)
	case us >= 1000:
		return fmt.Sprintf("%.2f ms", us/1e3)
	case us >= 10:
		return fmt.Sprintf("%.0f µs", us)
	}
	return fmt.Sprintf("%.2f µs", us)
}

func fmtRatio(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "–"
	}
	return fmt.Sprintf("%.2f×", v)
}

func verdict(ok bool) string {
	if ok {
		return "**met**"
	}
	return "**not met**"
}
