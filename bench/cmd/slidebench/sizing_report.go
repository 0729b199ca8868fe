package main

import (
	"fmt"
	"strings"
)

// writeOverload renders the steady-overload accuracy run.
func writeOverload(b *strings.Builder, acc []Accuracy) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	a0 := acc[0]
	p("### Steady overload: utilisation\n\n")
	p("| Sent, × the limit's rate | One request every | For | Limit |\n|---:|---:|---:|---|\n| %d | %v | %v (%d windows) | %d per %v |\n\n",
		overloadFactor, (a0.Span / Duration(overloadFactor*a0.Limit*overloadWindows)), a0.Span, overloadWindows, a0.Limit, a0.Window)
	p("| Limiter | Requests sent | Admitted | Most admitted in any rolling %v | × limit | Utilisation |\n|---|---:|---:|---:|---:|---:|\n", a0.Window)
	for _, a := range acc {
		p("| %s | %d | %d | **%d** | %.2fx | %.3f |\n", accuracyLabel(a.Contender), a.Sent, len(a.Admitted), a.MaxInWin,
			float64(a.MaxInWin)/float64(a.Limit), utilisation(a))
	}
	p("\n")
}

// findSizing returns the sizing row of store, case and model.
func findSizing(sz []Sizing, store, quota, model string) (Sizing, bool) {
	for _, s := range sz {
		if s.Store == store && s.Case == quota && s.Model == model {
			return s, true
		}
	}
	return Sizing{}, false
}

// sizingTable renders the sizing figures: per quota and model, Redis
// bytes per key and µs per decision, memory-store bytes per key.
func sizingTable(sz []Sizing, redisVersion string) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("| Quota | Model | Redis bytes per key | Of which (encoding) | vs GCRA key | Redis µs per decision | Memory store bytes per key |\n")
	p("|---|---|---:|---|---:|---:|---:|\n")
	for _, c := range quotaCases {
		gcra, _ := findSizing(sz, "redis", c.name, sizingGCRA)
		var models []string
		for _, s := range sz {
			if s.Store == "redis" && s.Case == c.name {
				models = append(models, s.Model)
			}
		}
		for _, m := range models {
			s, _ := findSizing(sz, "redis", c.name, m)
			label := m
			if s.Precision > 0 {
				label = "slidelog, " + m + ", non-default option"
			} else if m == sizingExact {
				label = "slidelog, exact log (default)"
			}
			bytes := fmtBytes(s.BytesPerKey)
			parts := partsText(s)
			usec := fmt.Sprintf("%.1f", s.UsecPerDecision)
			if s.Extrapolated {
				bytes = "≈ " + bytes + " (extrapolated)"
				parts = s.From
				usec = "not measured"
			}
			vs := "–"
			if gcra.BytesPerKey > 0 && m != sizingGCRA {
				vs = fmtCount(int(s.BytesPerKey/gcra.BytesPerKey+0.5)) + "x"
			}
			mem := "–"
			if ms, ok := findSizing(sz, "memory", c.name, m); ok {
				mem = fmtBytes(ms.BytesPerKey)
			}
			p("| %s | %s | %s | %s | %s | %s | %s |\n", c.name, label, bytes, parts, vs, usec, mem)
		}
	}
	p("\n")
	return b.String()
}

func partsText(s Sizing) string {
	if s.Model == sizingGCRA {
		return "one string"
	}
	var out []string
	encs := map[string]string{}
	for e := range strings.SplitSeq(s.Encodings, ", ") {
		if k, v, ok := strings.Cut(e, " "); ok {
			encs[k] = v
		}
	}
	for _, part := range []string{"log", ":c", ":s", ":b", ":r"} {
		if v := s.Parts[part]; v > 0 {
			what := map[string]string{"log": "log", ":c": "costs", ":s": "state", ":b": "buckets", ":r": "recent"}[part]
			t := fmt.Sprintf("%s %s", what, fmtBytes(v))
			if e := encs[part]; e != "" {
				t += " (" + e + ")"
			}
			out = append(out, t)
		}
	}
	return strings.Join(out, ", ")
}

func fmtBytes(v float64) string {
	switch {
	case v >= 1<<20:
		return fmt.Sprintf("%.1f MB", v/(1<<20))
	case v >= 10<<10:
		return fmt.Sprintf("%.1f KB", v/(1<<10))
	}
	return fmt.Sprintf("%.0f B", v)
}

// sizingParameters are the figures of how the sizing run filled and
// measured its keys.
func sizingParameters(sz []Sizing, redisVersion string) string {
	keys, exactKeys, decisions := 0, 0, int64(0)
	for _, s := range sz {
		if s.Store == "redis" && s.Precision > 0 {
			keys = s.Keys
			decisions = s.Decisions / int64(max(s.Keys, 1))
		}
		if s.Store == "redis" && s.Model == sizingExact && !s.Extrapolated {
			exactKeys = s.Keys
		}
	}
	return fmt.Sprintf("| Redis | Keys averaged, bucketed / exact | Bucketed fill, share of a bucket's part of the limit | Requests of cost 1 after the fill | Decisions measured per key |\n"+
		"|---|---:|---:|---:|---:|\n| %s, standalone | %d / %d | %.0f%% | %d | %d |\n\n",
		orDash(redisVersion), keys, exactKeys, 100*bucketFill, recentTail, decisions)
}

// writeSizing renders the sizing section of docs/benchmarks.md.
func writeSizing(b *strings.Builder, r *Results) {
	b.WriteString("## Bytes per key and Redis time per decision at large quotas\n\n")
	b.WriteString(sizingTable(r.Sizing, r.Env.RedisVersion))
	b.WriteString(sizingParameters(r.Sizing, r.Env.RedisVersion))
}

// scalingSizingMarker names the block of docs/scaling.md the sizing
// figures are written into.
const scalingSizingMarker = "bucketed-sizing"

// writeScalingSizing rewrites the bucketed-sizing block of the markdown
// file path with the sizing figures of r. It fails, writing nothing,
// when the block is missing.
func writeScalingSizing(path string, r *Results) error {
	return rewriteBlocks(path, []namedBlock{{scalingSizingMarker, scalingSizingBlock(r)}})
}

func scalingSizingBlock(r *Results) string {
	e := r.Env
	env := fmt.Sprintf("| Measured | Load average, start / end | Redis | slidelog core | Command |\n|---|---|---|---|---|\n| %s | %s / %s | %s | %s | `%s` |\n\n",
		e.Date.Format("2006-01-02"), orDash(e.LoadStart), orDash(e.LoadEnd), orDash(e.RedisVersion), orDash(e.CoreRevision), orDash(e.Command))
	return env + sizingTable(r.Sizing, e.RedisVersion) + strings.TrimSuffix(sizingParameters(r.Sizing, e.RedisVersion), "\n")
}
