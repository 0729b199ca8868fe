package main

import (
	"fmt"
	"os"
	"regexp"
	"strings"
)

// writeOverload renders the steady-overload accuracy run.
func writeOverload(b *strings.Builder, acc []Accuracy) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	a0 := acc[0]
	p("### Steady overload: utilisation\n\n")
	p("The same limiters at once, each sent %d× its limit's rate evenly paced (one request every %v) for\n",
		overloadFactor, (a0.Span / Duration(overloadFactor*a0.Limit*overloadWindows)))
	p("%v (%d windows), limit %d per %v. Utilisation is admitted / (%v / %v × %d): the share of the\n",
		a0.Span, overloadWindows, a0.Limit, a0.Window, a0.Span, a0.Window, a0.Limit)
	p("quota a client that always has work gets. A bucketed policy keeps the maximum at the limit and\n")
	p("gives up at most P/W of it (it uses at least 1 − P/W); GCRA's burst lets it pass both.\n\n")
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

// sizingMethod explains how the sizing figures were made.
func sizingMethod(sz []Sizing, redisVersion string) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
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
	p("Each key is filled to its steady state on the standalone Redis (%s) with a synthetic clock\n", orDash(redisVersion))
	p("(`redisstore.WithClock`), so that a day passes in seconds: the exact log gets requests of cost 1 at the\n")
	p("limit's rate for a window; a bucketed key one request per bucket of cost %.0f%% of the bucket's share of\n", 100*bucketFill)
	p("the limit, for a window and two buckets, then %d requests of cost 1 at the limit's rate, so that its\n", recentTail)
	p("set of recent admissions (`:r`, kept for retries and refunds) holds its steady 127 members. Bytes\n")
	p("per key are `MEMORY USAGE <key> SAMPLES 0` summed over all of an identity's Redis keys (the log,\n")
	p("`:c`, `:s`, `:b`, `:r`), averaged over %d keys (exact: %d), the larger of the readings after the\n", keys, exactKeys)
	p("fill and after the measured decisions. Redis µs per decision is `INFO commandstats` (every\n")
	p("command's `usec`, the script's own included; `CONFIG RESETSTAT` first) over %d further decisions\n", decisions)
	p("of cost 1 per key at the limit's rate on the full keys; it is server time, not a round trip,\n")
	p("and moves with the machine's load. The exact log at 1,000,000 per day is not filled (a million\n")
	p("script calls per key): its bytes are the bytes per entry measured at 10,000 per hour times the\n")
	p("limit, **extrapolated**. redis_rate's key is one string whatever the limit. The memory store is\n")
	p("filled by the same schedule, its figure the live heap after `runtime.GC` per key.\n\n")
	return b.String()
}

// writeSizing renders the sizing section of docs/benchmarks.md.
func writeSizing(b *strings.Builder, r *Results) {
	fmt.Fprintf(b, "## Bytes per key and Redis time per decision at large quotas\n\n")
	fmt.Fprintf(b, "What a user sizes by: one key of a quota sold per hour or per day, with the exact log (the\n")
	fmt.Fprintf(b, "default) and with `Policy.Precision` P = W/100 and P = W/1000 (bucketed, a non-default option),\n")
	fmt.Fprintf(b, "against redis_rate's GCRA key. `docs/scaling.md` carries the same table.\n\n")
	b.WriteString(sizingTable(r.Sizing, r.Env.RedisVersion))
	b.WriteString(sizingMethod(r.Sizing, r.Env.RedisVersion))
}

// scalingSizingMarker names the section of docs/scaling.md the sizing
// figures are written into.
const scalingSizingMarker = "bucketed-sizing"

// writeScalingSizing replaces, in the markdown file path, the text between
// "<!-- bucketed-sizing:begin ... -->" and "<!-- bucketed-sizing:end -->"
// with the sizing figures of r. It fails, writing nothing, when the
// markers are missing.
func writeScalingSizing(path string, r *Results) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	re := regexp.MustCompile(`(?s)(<!-- ` + scalingSizingMarker + `:begin[^>]*-->\n).*?(<!-- ` + scalingSizingMarker + `:end -->)`)
	if !re.Match(b) {
		return fmt.Errorf("%s: no <!-- %s:begin --> ... <!-- %s:end --> markers", path, scalingSizingMarker, scalingSizingMarker)
	}
	e := r.Env
	body := fmt.Sprintf("Measured %s (load average %s at the start, %s at the end), Redis %s; core at %s. Command: `%s`.\n\n",
		e.Date.Format("2006-01-02"), orDash(e.LoadStart), orDash(e.LoadEnd), orDash(e.RedisVersion), orDash(e.CoreRevision), orDash(e.Command)) +
		sizingTable(r.Sizing, e.RedisVersion) + sizingMethod(r.Sizing, e.RedisVersion)
	doc := re.ReplaceAllStringFunc(string(b), func(m string) string {
		sub := re.FindStringSubmatch(m)
		return sub[1] + "\n" + body + sub[2]
	})
	return os.WriteFile(path, []byte(doc), 0o644)
}
