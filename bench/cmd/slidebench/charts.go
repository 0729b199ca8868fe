package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"slices"
	"strconv"

	"github.com/slidelog/slidelog/bench/contender"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// colors keeps one color per contender across every chart.
var colors = map[string]color.RGBA{
	contender.Slidelog:             {R: 0x1f, G: 0x5f, B: 0xd0, A: 0xff},
	contender.SlidelogMemory:       {R: 0x1f, G: 0x5f, B: 0xd0, A: 0xff},
	contender.RedisRate:            {R: 0xe0, G: 0x7b, B: 0x00, A: 0xff},
	contender.Ulule:                {R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	contender.Throttled:            {R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	contender.EvalSHA:              {R: 0x80, G: 0x80, B: 0x80, A: 0xff},
	contender.Article:              {R: 0x40, G: 0x40, B: 0x40, A: 0xff},
	contender.SlidelogScript:       {R: 0x7f, G: 0xa8, B: 0xf0, A: 0xff},
	contender.SlidelogNoPipelining: {R: 0x17, G: 0xbe, B: 0xcf, A: 0xff},
	contender.SlidelogNoDenyCache:  {R: 0x17, G: 0xbe, B: 0xcf, A: 0xff},
	contender.GoLimiter:            {R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
	contender.HTTPRate:             {R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
	contender.XTimeRate:            {R: 0xe3, G: 0x77, B: 0xc2, A: 0xff},
}

func styleOf(name string) draw.LineStyle {
	s := draw.LineStyle{Color: colors[name], Width: vg.Points(2)}
	if s.Color == nil {
		s.Color = color.Black
	}
	switch name {
	case contender.EvalSHA, contender.SlidelogScript:
		s.Dashes = []vg.Length{vg.Points(6), vg.Points(4)}
	case contender.SlidelogNoPipelining, contender.SlidelogNoDenyCache:
		s.Dashes = []vg.Length{vg.Points(2), vg.Points(3)}
	}
	if name == contender.Slidelog || name == contender.SlidelogMemory {
		s.Width = vg.Points(3)
	}
	return s
}

func newPlot(title, xLabel, yLabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(14)
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.X.Label.TextStyle.Font.Size = vg.Points(12)
	p.Y.Label.TextStyle.Font.Size = vg.Points(12)
	p.X.Tick.Label.Font.Size = vg.Points(11)
	p.Y.Tick.Label.Font.Size = vg.Points(11)
	p.Legend.TextStyle.Font.Size = vg.Points(11)
	p.Add(plotter.NewGrid())
	return p
}

// categoryTicks labels positions 0, 1, ... with labels.
type categoryTicks []string

func (c categoryTicks) Ticks(_, _ float64) []plot.Tick {
	t := make([]plot.Tick, len(c))
	for i, l := range c {
		t[i] = plot.Tick{Value: float64(i), Label: l}
	}
	return t
}

// logTicks are powers of ten with 2 and 5 between, labelled compactly.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, e)
			if v < lo || v > hi {
				continue
			}
			ticks = append(ticks, plot.Tick{Value: v, Label: compact(v)})
		}
	}
	return ticks
}

func compact(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'g', 3, 64) + "M"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'g', 3, 64) + "k"
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// secondTicks labels every second and marks every half second.
type secondTicks struct{}

func (secondTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for v := math.Ceil(lo*2) / 2; v <= hi; v += 0.5 {
		t := plot.Tick{Value: v}
		if v == math.Trunc(v) {
			t.Label = strconv.FormatFloat(v, 'f', 0, 64)
		}
		ticks = append(ticks, t)
	}
	return ticks
}

// series is one contender's points on a chart.
type series struct {
	name string
	xys  plotter.XYs
}

// categoryPlot draws series over categories on a log Y axis, with room at
// the top for the legend.
func categoryPlot(title, xLabel, yLabel string, cats []string, ss []series) (*plot.Plot, error) {
	p := newPlot(title, xLabel, yLabel)
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = logTicks{}
	p.X.Tick.Marker = categoryTicks(cats)
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range ss {
		if len(s.xys) == 0 {
			continue
		}
		lp, pts, err := plotter.NewLinePoints(s.xys)
		if err != nil {
			return nil, err
		}
		lp.LineStyle = styleOf(s.name)
		pts.Shape = draw.CircleGlyph{}
		pts.Color = lp.Color
		pts.Radius = vg.Points(3)
		p.Add(lp, pts)
		for _, xy := range s.xys {
			lo, hi = min(lo, xy.Y), max(hi, xy.Y)
		}
	}
	if math.IsInf(lo, 0) {
		lo, hi = 1, 10
	}
	p.X.Min, p.X.Max = -0.3, float64(len(cats))-0.7
	p.Y.Min = math.Pow(10, math.Floor(math.Log10(lo)))
	p.Y.Max = math.Pow(10, math.Ceil(math.Log10(hi)+0.05))
	return p, nil
}

// figure writes plots side by side as one PNG, under title, with one
// legend for all of them in a strip at the bottom.
func figure(path, title string, width, height vg.Length, legend []string, plots ...*plot.Plot) error {
	img := vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(110))
	dc := draw.New(img)
	titleH, legendH := vg.Length(0), vg.Length(0)
	if title != "" {
		titleH = vg.Points(26)
	}
	ts := plots[0].Legend.TextStyle
	ts.Font.Size = vg.Points(12)
	rows := legendRows(ts, legend, width-vg.Points(20))
	if len(rows) > 0 {
		legendH = vg.Points(10) + vg.Points(20)*vg.Length(len(rows))
	}
	body := draw.Crop(dc, 0, 0, legendH, -titleH)
	tiles := draw.Tiles{Rows: 1, Cols: len(plots), PadX: vg.Points(16), PadTop: vg.Points(4),
		PadBottom: vg.Points(4), PadLeft: vg.Points(6), PadRight: vg.Points(12)}
	canvases := plot.Align([][]*plot.Plot{plots}, tiles, body)
	for i, p := range plots {
		p.Draw(canvases[0][i])
	}
	if title != "" {
		ts := plots[0].Title.TextStyle
		ts.Font.Size = vg.Points(15)
		ts.XAlign, ts.YAlign = draw.XCenter, draw.YTop
		dc.FillText(ts, vg.Point{X: dc.Center().X, Y: dc.Max.Y - vg.Points(4)}, title)
	}
	for i, row := range rows {
		drawLegendStrip(dc, ts, row, dc.Min.Y+legendH-vg.Points(15)-vg.Points(20)*vg.Length(i))
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

const (
	legendSample = vg.Length(26)
	legendGap    = vg.Length(6)
	legendPad    = vg.Length(22)
)

func legendItemWidth(ts text.Style, name string) vg.Length {
	return legendSample + legendGap + ts.Width(name) + legendPad
}

// legendRows splits names into rows that fit in width.
func legendRows(ts text.Style, names []string, width vg.Length) [][]string {
	var rows [][]string
	var row []string
	used := vg.Length(0)
	for _, n := range names {
		w := legendItemWidth(ts, n)
		if len(row) > 0 && used+w > width {
			rows, row, used = append(rows, row), nil, 0
		}
		row = append(row, n)
		used += w
	}
	if len(row) > 0 {
		rows = append(rows, row)
	}
	return rows
}

// drawLegendStrip draws one line sample and name per contender, in a
// centred row at height y.
func drawLegendStrip(c draw.Canvas, ts text.Style, names []string, y vg.Length) {
	ts.XAlign, ts.YAlign = draw.XLeft, draw.YCenter
	sample, gap, pad := legendSample, legendGap, legendPad
	total := vg.Length(0)
	for _, n := range names {
		total += legendItemWidth(ts, n)
	}
	x := c.Center().X - (total-pad)/2
	for _, n := range names {
		st := styleOf(n)
		c.StrokeLine2(st, x, y, x+sample, y)
		c.DrawGlyph(draw.GlyphStyle{Color: st.Color, Radius: vg.Points(3), Shape: draw.CircleGlyph{}}, vg.Point{X: x + sample/2, Y: y})
		c.FillText(ts, vg.Point{X: x + sample + gap, Y: y}, n)
		x += sample + gap + ts.Width(n) + pad
	}
}

var scenarioTitles = map[string]string{
	"many-keys": "many keys (10,000 keys, 100/min)",
	"flood":     "one flooded key (far over 100/min)",
}

// throughputChart draws decisions/s by callers, one panel per scenario.
func throughputChart(r *Results, topo string, names []string, path string) error {
	callers := callerList(r)
	cats := make([]string, len(callers))
	for i, c := range callers {
		cats[i] = strconv.Itoa(c)
	}
	var plots []*plot.Plot
	for _, sc := range []string{"many-keys", "flood"} {
		var ss []series
		for _, name := range names {
			s := series{name: name}
			for i, c := range callers {
				if cell, ok := find(r, topo, sc, c, name); ok && cell.PerSec > 0 {
					s.xys = append(s.xys, plotter.XY{X: float64(i), Y: cell.PerSec})
				}
			}
			ss = append(ss, s)
		}
		title := scenarioTitles[sc]
		if topo == "memory" && sc == "many-keys" {
			title = fmt.Sprintf("many keys (%s keys, 100/min)", fmtCount(r.Env.MemKeys))
		}
		p, err := categoryPlot(title, "concurrent callers", "decisions/s (log scale)", cats, ss)
		if err != nil {
			return err
		}
		plots = append(plots, p)
	}
	return figure(path, "Decisions per second, "+topoTitle(topo), 12*vg.Inch, 5.2*vg.Inch, present(r, topo, "", names), plots...)
}

// latencyChart draws p50, p99 and p99.9 per contender, one panel per
// number of callers.
func latencyChart(r *Results, topo, scenario string, names []string, path string) error {
	cats := []string{"p50", "p99", "p99.9"}
	var plots []*plot.Plot
	for _, c := range callerList(r) {
		var ss []series
		for _, name := range names {
			cell, ok := find(r, topo, scenario, c, name)
			if !ok || cell.Decisions == 0 {
				continue
			}
			ss = append(ss, series{name: name, xys: plotter.XYs{{X: 0, Y: cell.P50}, {X: 1, Y: cell.P99}, {X: 2, Y: cell.P999}}})
		}
		p, err := categoryPlot(fmt.Sprintf("%d caller%s", c, plural(c)), "percentile", "latency, µs (log scale)", cats, ss)
		if err != nil {
			return err
		}
		plots = append(plots, p)
	}
	return figure(path, fmt.Sprintf("Latency, %s, %s", topoTitle(topo), scenarioTitles[scenario]),
		13*vg.Inch, 5.2*vg.Inch, present(r, topo, scenario, names), plots...)
}

// accuracyChart draws, for each instant, the requests each limiter
// admitted in the rolling window ending then.
func accuracyChart(acc []Accuracy, path string) error {
	if len(acc) == 0 {
		return nil
	}
	w := acc[0].Window
	win := timeSeconds(w)
	limit := float64(acc[0].Limit)
	end := 0.0
	for _, a := range acc {
		if n := len(a.Admitted); n > 0 {
			end = max(end, a.Admitted[n-1]+win*1.15)
		}
	}
	var ts []float64
	for t := 0.0; t <= end; t += 0.002 {
		ts = append(ts, t)
	}
	p := newPlot(fmt.Sprintf("Boundary attack on real Redis: admitted requests in the preceding %v, limit %d per %v", w, acc[0].Limit, w),
		"time since the attack began (s)", fmt.Sprintf("admitted in the last %v", w))
	p.Y.Min, p.Y.Max = 0, 2.6*limit
	var yTicks []plot.Tick
	for v := 0.0; v <= p.Y.Max; v += limit / 2 {
		yTicks = append(yTicks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', 0, 64)})
	}
	p.Y.Tick.Marker = plot.ConstantTicks(yTicks)
	p.X.Min, p.X.Max = 0, end
	ref := func(y float64, label string, dashes []vg.Length) error {
		l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: y}, {X: end, Y: y}})
		if err != nil {
			return err
		}
		l.LineStyle = draw.LineStyle{Color: color.Gray{Y: 0x40}, Width: vg.Points(1.2), Dashes: dashes}
		p.Add(l)
		p.Legend.Add(label, l)
		return nil
	}
	if err := ref(limit, fmt.Sprintf("limit (%d)", acc[0].Limit), []vg.Length{vg.Points(6), vg.Points(4)}); err != nil {
		return err
	}
	if err := ref(2*limit, fmt.Sprintf("2 × limit (%d)", 2*acc[0].Limit), []vg.Length{vg.Points(2), vg.Points(3)}); err != nil {
		return err
	}
	// The fixed window first, so that slidelog's line stays visible where
	// they coincide.
	for _, a := range slices.Backward(acc) {
		counts := rollingCounts(a.Admitted, win, ts)
		xys := make(plotter.XYs, len(ts))
		for i := range ts {
			xys[i] = plotter.XY{X: ts[i], Y: float64(counts[i])}
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return err
		}
		l.LineStyle = styleOf(a.Contender)
		p.Add(l)
		label := accuracyLabel(a.Contender)
		p.Legend.Add(fmt.Sprintf("%s: max %d", label, a.MaxInWin), l)
	}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs = vg.Points(8)
	p.Legend.YOffs = -vg.Points(10)
	p.Legend.Padding = vg.Points(3)
	p.Legend.TextStyle.Font.Size = vg.Points(12)
	p.X.Tick.Marker = secondTicks{}
	return figure(path, "", 12*vg.Inch, 5.5*vg.Inch, nil, p)
}

// present returns the names that have a cell on topo, in scenario when
// it is not empty, in order.
func present(r *Results, topo, scenario string, names []string) []string {
	var out []string
	for _, n := range names {
		if slices.ContainsFunc(r.Cells, func(c Cell) bool {
			return c.Topology == topo && c.Contender == n && (scenario == "" || c.Scenario == scenario)
		}) {
			out = append(out, n)
		}
	}
	return out
}

func topoTitle(topo string) string {
	switch topo {
	case "standalone":
		return "Redis standalone"
	case "cluster":
		return "Redis Cluster"
	}
	return "in memory"
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func timeSeconds(d Duration) float64 { return float64(d) / 1e9 }
