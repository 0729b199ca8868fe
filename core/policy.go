package slidelog

import (
	"fmt"
	"strconv"
	"time"
)

// Policy is one rolling-window limit: at most Limit units of cost in any
// window of length Window. A request of cost n needs n free units.
//
// Name identifies the policy in response headers and problem bodies
// (for example "per-minute"); when empty, a name is derived from Limit and
// Window, such as "100-per-1m0s".
//
// Precision, when not zero, trades a little utilisation for memory:
// admissions are counted in buckets of width Precision (aligned to the Unix
// epoch), and a bucket counts against the window until its end has left
// it. The count can only be over-estimated, so no rolling window of length
// Window ever admits more than Limit, exactly as with the log; an
// admission may wait up to Precision longer than with the log (under
// steady overload at least 1 - Precision/Window of the limit is used), and
// a key's state is at most about Window/Precision buckets whatever the
// limit. Zero, the default, keeps the exact log of one entry per admitted
// request.
type Policy struct {
	Name      string
	Limit     int
	Window    time.Duration
	Precision time.Duration
}

// PerSecond returns a policy of n units per rolling second.
func PerSecond(n int) Policy { return Policy{Name: "per-second", Limit: n, Window: time.Second} }

// PerMinute returns a policy of n units per rolling minute.
func PerMinute(n int) Policy { return Policy{Name: "per-minute", Limit: n, Window: time.Minute} }

// PerHour returns a policy of n units per rolling hour.
func PerHour(n int) Policy { return Policy{Name: "per-hour", Limit: n, Window: time.Hour} }

// PerDay returns a policy of n units per rolling day of 24 hours. It keeps
// the exact log (one entry per admission); for a large quota set
// Precision, such as 15 minutes, to bound a key's state at 96 buckets
// whatever the limit.
func PerDay(n int) Policy { return Policy{Name: "per-day", Limit: n, Window: 24 * time.Hour} }

// PerWeek returns a policy of n units per rolling week of 7 days. Months
// are not of one length, so no PerMonth exists: a monthly quota is a
// rolling 30 days, Policy{Limit: n, Window: 30 * 24 * time.Hour}, or
// ParsePolicy("n/30d"), usually with a Precision of an hour.
func PerWeek(n int) Policy { return Policy{Name: "per-week", Limit: n, Window: 7 * 24 * time.Hour} }

// Bounds of a policy. Stores keep time in microseconds and windows are
// truncated to whole microseconds. The Redis script computes in Lua
// numbers (IEEE doubles), which hold every integer up to 2^53 exactly, so
// limits, costs and timestamps plus a window must stay below it.
const (
	// minWindow is the shortest window a policy may have.
	minWindow = time.Millisecond
	// maxWindow is the longest window a policy may have: 100 years, so
	// that a timestamp in microseconds plus the window stays an exact
	// integer in a double until past the year 2200.
	maxWindow = 100 * 365 * 24 * time.Hour
	// MaxLimit is the largest limit a policy may have, 2^53-1: the
	// largest integer both stores (and the Lua numbers of the Redis
	// script) count exactly.
	MaxLimit = 1<<53 - 1
	// minPrecision is the narrowest bucket a policy's Precision may set.
	minPrecision = time.Millisecond
	// maxBuckets is the most buckets of width Precision a window may
	// span: Window/Precision must not exceed it.
	maxBuckets = 10_000
)

// Validate reports whether p can be enforced: 1 <= Limit <= MaxLimit, a
// Window from 1 ms to 100 years, and a Precision either zero or from 1 ms
// to Window/2 with at most 10,000 buckets per window (Window/Precision).
// The error wraps ErrInvalidPolicy.
func (p Policy) Validate() error {
	if p.Limit <= 0 || p.Limit > MaxLimit {
		return fmt.Errorf("%w: limit %d, want 1..%d", ErrInvalidPolicy, p.Limit, MaxLimit)
	}
	if p.Window < minWindow || p.Window > maxWindow {
		return fmt.Errorf("%w: window %v, want %v..%v", ErrInvalidPolicy, p.Window, minWindow, maxWindow)
	}
	if p.Precision != 0 {
		if p.Precision < minPrecision || p.Precision > p.Window/2 || p.Window/p.Precision > maxBuckets {
			return fmt.Errorf("%w: precision %v for window %v, want 0 or %v..%v with at most %d buckets per window",
				ErrInvalidPolicy, p.Precision, p.Window, minPrecision, p.Window/2, maxBuckets)
		}
	}
	return nil
}

// String returns the policy's name, or a name derived from its limit and
// window when Name is empty.
func (p Policy) String() string {
	if p.Name != "" {
		return p.Name
	}
	return strconv.Itoa(p.Limit) + "-per-" + p.Window.String()
}

// windowMicros is the window in whole microseconds, the unit stores use.
func (p Policy) windowMicros() int64 { return p.Window.Microseconds() }
