package slidelog

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// policyUnits are the window units ParsePolicy knows, with the name a
// policy of one such unit takes (as PerSecond and its siblings name theirs).
var policyUnits = []struct {
	names  []string
	length time.Duration
	name   string
}{
	{[]string{"ms", "millisecond", "milliseconds"}, time.Millisecond, ""},
	{[]string{"s", "sec", "second", "seconds"}, time.Second, "per-second"},
	{[]string{"m", "min", "minute", "minutes"}, time.Minute, "per-minute"},
	{[]string{"h", "hr", "hour", "hours"}, time.Hour, "per-hour"},
	{[]string{"d", "day", "days"}, 24 * time.Hour, "per-day"},
	{[]string{"w", "wk", "week", "weeks"}, 7 * 24 * time.Hour, "per-week"},
}

// maxPolicyText is the longest text ParsePolicy reads.
const maxPolicyText = 200

// ParsePolicy returns the policy a configuration file spells as
// "LIMIT/WINDOW", optionally followed by " precision=DURATION":
//
//	"5/s", "100/min", "1000/hour", "10000/day", "50000/week"
//	"100/30s", "1000000/30d precision=1h", "10_000/day precision=15m"
//
// LIMIT is a decimal integer (underscores between digits allowed). WINDOW
// is a unit (ms, s, sec, second, m, min, minute, h, hr, hour, d, day, w,
// wk, week, and their plurals), optionally preceded by a whole count, as
// in "30d"; or any duration time.ParseDuration accepts, such as "1m30s".
// A day is 24 hours and a week 7 days; there is no month unit, since
// months differ in length: write "30d". PRECISION is a duration in the
// same forms ("15m", "1h", "1d") and sets Policy.Precision.
//
// A policy of one whole unit from a second to a week takes the name of
// the matching constructor ("10000/day" is named "per-day", like
// PerDay(10000)); any other is unnamed, so its String is derived from its
// limit and window. The result is validated (Policy.Validate); every
// error wraps ErrInvalidPolicy and quotes the text.
func ParsePolicy(s string) (Policy, error) {
	p, err := parsePolicy(s)
	if err != nil {
		if len(s) > maxPolicyText {
			s = s[:maxPolicyText] + "..."
		}
		return Policy{}, fmt.Errorf("%w: %q: %s", ErrInvalidPolicy, s, err)
	}
	if err := p.Validate(); err != nil {
		return Policy{}, err
	}
	return p, nil
}

// parsePolicy parses s without validating the policy; its errors are
// plain messages that ParsePolicy wraps.
func parsePolicy(s string) (Policy, error) {
	if len(s) > maxPolicyText {
		return Policy{}, fmt.Errorf("longer than %d bytes", maxPolicyText)
	}
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return Policy{}, fmt.Errorf("empty, want LIMIT/WINDOW such as 100/min")
	}
	if len(fields) > 2 {
		return Policy{}, fmt.Errorf("want LIMIT/WINDOW [precision=DURATION]")
	}
	limitText, windowText, ok := strings.Cut(fields[0], "/")
	if !ok {
		return Policy{}, fmt.Errorf("no '/', want LIMIT/WINDOW such as 100/min")
	}
	limit, err := parseLimit(limitText)
	if err != nil {
		return Policy{}, err
	}
	window, name, err := parseWindow(windowText)
	if err != nil {
		return Policy{}, fmt.Errorf("window: %s", err)
	}
	p := Policy{Name: name, Limit: limit, Window: window}
	if len(fields) == 2 {
		value, ok := strings.CutPrefix(fields[1], "precision=")
		if !ok {
			return Policy{}, fmt.Errorf("%q after the window, want precision=DURATION", fields[1])
		}
		p.Precision, _, err = parseWindow(value)
		if err != nil {
			return Policy{}, fmt.Errorf("precision: %s", err)
		}
	}
	return p, nil
}

// parseLimit parses a decimal limit, with underscores allowed between
// digits as in Go literals.
func parseLimit(s string) (int, error) {
	if s == "" || strings.HasPrefix(s, "_") || strings.HasSuffix(s, "_") || strings.Contains(s, "__") {
		return 0, fmt.Errorf("limit %q, want a whole number such as 100 or 10_000", s)
	}
	digits := strings.ReplaceAll(s, "_", "")
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("limit %q, want a whole number such as 100 or 10_000", s)
		}
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n > MaxLimit {
		return 0, fmt.Errorf("limit %q above %d", s, int64(MaxLimit))
	}
	return int(n), nil
}

// parseWindow parses a unit with an optional whole count ("day", "30d")
// or a Go duration ("1m30s"), and returns the name of a policy of one
// whole named unit.
func parseWindow(s string) (time.Duration, string, error) {
	if s == "" {
		return 0, "", fmt.Errorf("empty, want a unit such as s, min, hour, day or a duration such as 30s")
	}
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	countText, unitText := s[:i], strings.ToLower(s[i:])
	for _, u := range policyUnits {
		for _, n := range u.names {
			if unitText != n {
				continue
			}
			if countText == "" {
				return u.length, u.name, nil
			}
			count, err := strconv.ParseInt(countText, 10, 64)
			if err != nil || count > int64(maxWindow/u.length) {
				return 0, "", fmt.Errorf("%q too long", s)
			}
			name := ""
			if count == 1 {
				name = u.name
			}
			return time.Duration(count) * u.length, name, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, "", fmt.Errorf("%q, want a unit such as s, min, hour, day, an optional count as in 30d, or a duration such as 1m30s", s)
	}
	return d, "", nil
}
