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
type Policy struct {
	Name   string
	Limit  int
	Window time.Duration
}

// PerSecond returns a policy of n units per rolling second.
func PerSecond(n int) Policy { return Policy{Name: "per-second", Limit: n, Window: time.Second} }

// PerMinute returns a policy of n units per rolling minute.
func PerMinute(n int) Policy { return Policy{Name: "per-minute", Limit: n, Window: time.Minute} }

// PerHour returns a policy of n units per rolling hour.
func PerHour(n int) Policy { return Policy{Name: "per-hour", Limit: n, Window: time.Hour} }

// MinWindow is the shortest window a policy may have. Stores keep time in
// microseconds; windows are truncated to whole microseconds.
const MinWindow = time.Millisecond

// Validate reports whether p can be enforced. The error wraps
// ErrInvalidPolicy.
func (p Policy) Validate() error {
	if p.Limit <= 0 {
		return fmt.Errorf("%w: limit %d, want > 0", ErrInvalidPolicy, p.Limit)
	}
	if p.Window < MinWindow {
		return fmt.Errorf("%w: window %v, want >= %v", ErrInvalidPolicy, p.Window, MinWindow)
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
