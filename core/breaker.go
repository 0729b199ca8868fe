package slidelog

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/slidelog/slidelog/core/internal/monotime"
)

// BreakerSettings configure the circuit breaker a limiter keeps in front
// of its store: one per Redis Cluster master (a dead or hung node takes
// only its own keys to the failure mode), one for any other store. Zero
// fields take the defaults given with each.
//
// Closed, the breaker lets every request through and counts failures:
// errors of the store and decisions given up on a stalled node, but not
// the caller's own cancellation. It opens after ConsecutiveFailures failures in
// a row; open, every request goes straight to the failure mode. After
// OpenTimeout it lets HalfOpenProbes requests through: if they all
// succeed it closes, if one fails it opens again.
type BreakerSettings struct {
	// ConsecutiveFailures opens the breaker; default 5.
	ConsecutiveFailures int
	// OpenTimeout is how long the breaker stays open before probing;
	// default 1 s.
	OpenTimeout time.Duration
	// HalfOpenProbes is how many requests probe a half-open breaker;
	// default 1.
	HalfOpenProbes int
	// Disabled switches the breaker off: every request tries the store
	// and waits for it until its node is found stalled.
	Disabled bool
}

// Breaker defaults.
const (
	defaultBreakerFailures    = 5
	defaultBreakerOpenTimeout = time.Second
	defaultBreakerProbes      = 1
)

func (s BreakerSettings) withDefaults() BreakerSettings {
	if s.ConsecutiveFailures == 0 {
		s.ConsecutiveFailures = defaultBreakerFailures
	}
	if s.OpenTimeout == 0 {
		s.OpenTimeout = defaultBreakerOpenTimeout
	}
	if s.HalfOpenProbes == 0 {
		s.HalfOpenProbes = defaultBreakerProbes
	}
	return s
}

// errCallerGone is what the limiter reports to a breaker when the caller
// cancelled: excluded from its counts.
var errCallerGone = errors.New("slidelog: caller gone")

// breakers holds one breaker per node, created on first use. Nodes are
// Redis masters, so the map stays as small as the Cluster.
type breakers struct {
	settings BreakerSettings
	onChange func(node string, from, to gobreaker.State)
	// onPanic is given a panic an open timer's callback recovered.
	onPanic func(p any)
	mu      sync.RWMutex
	byNode  map[string]*nodeBreaker
	closed  atomic.Bool // no breaker reports a change any more
	// timers is held (read) by an open timer's callback while it asks
	// its breaker's state, so that close can wait for one under way.
	timers sync.RWMutex
}

// nodeBreaker is one node's breaker. While it is open, until its open
// timeout has passed, a request is refused without gobreaker's lock:
// during an outage every decision of the node's keys asks it, and one
// holder of that lock the scheduler preempts would hold them all up.
type nodeBreaker struct {
	cb *gobreaker.TwoStepCircuitBreaker[struct{}]
	// openUntil is when (monotime.Now) the open breaker lets a probe
	// through, zero while it is not open: a change to the wall clock
	// does not move it (nor gobreaker's expiry, compared by monotonic
	// readings). Written under gobreaker's lock, on each change of state.
	openUntil atomic.Int64
	// halfOpen moves the open breaker to half-open once its open timeout
	// has passed, whether or not a request asks it then: the state it
	// reports (slidelog_breaker_state) is the one it is in, also for a
	// node no key maps to any more (a failed-over master).
	halfOpen atomic.Pointer[time.Timer]
}

// Allow is gobreaker's Allow, refusing at once while the breaker is open.
func (nb *nodeBreaker) Allow() (func(error), error) {
	if until := nb.openUntil.Load(); until != 0 && monotime.Now() < until {
		return nil, gobreaker.ErrOpenState
	}
	return nb.cb.Allow()
}

func newBreakers(s BreakerSettings, onChange func(node string, from, to gobreaker.State), onPanic func(p any)) *breakers {
	if s.Disabled {
		return nil
	}
	return &breakers{settings: s, onChange: onChange, onPanic: onPanic, byNode: make(map[string]*nodeBreaker)}
}

// get returns the breaker of node, creating it on first use.
func (b *breakers) get(node string) *nodeBreaker {
	b.mu.RLock()
	nb := b.byNode[node]
	b.mu.RUnlock()
	if nb != nil {
		return nb
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if nb = b.byNode[node]; nb != nil {
		return nb
	}
	failures := uint32(b.settings.ConsecutiveFailures)
	nb = &nodeBreaker{}
	nb.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        node,
		MaxRequests: uint32(b.settings.HalfOpenProbes),
		Timeout:     b.settings.OpenTimeout,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= failures },
		IsExcluded:  func(err error) bool { return errors.Is(err, errCallerGone) },
		OnStateChange: func(name string, from, to gobreaker.State) {
			// gobreaker set its own expiry just before, from an
			// earlier read of the clock: the fast refusal outlasts it
			// by no more than the time between the two reads.
			var until int64
			if to == gobreaker.StateOpen {
				until = monotime.Now() + int64(b.settings.OpenTimeout)
			}
			nb.openUntil.Store(until)
			if to == gobreaker.StateOpen {
				b.halfOpenLater(nb)
			}
			if b.onChange != nil {
				b.onChange(name, from, to)
			}
		},
	})
	b.byNode[node] = nb
	return nb
}

// halfOpenLater asks nb's state once its open timeout has passed, which
// moves it to half-open and reports the change.
func (b *breakers) halfOpenLater(nb *nodeBreaker) {
	if b.closed.Load() {
		return
	}
	t := time.AfterFunc(b.settings.OpenTimeout, func() { b.halfOpen(nb) })
	if old := nb.halfOpen.Swap(t); old != nil {
		old.Stop()
	}
	if b.closed.Load() {
		t.Stop() // close ran meanwhile and may not have seen t
	}
}

// halfOpen asks nb's state, which moves it to half-open and reports the
// change, unless close has begun. It runs on the timer's own goroutine,
// where no caller would receive a panic: one is recovered and given to
// onPanic before close can return (gobreaker releases its lock as the
// panic passes, and the breaker is half-open by then).
func (b *breakers) halfOpen(nb *nodeBreaker) {
	b.timers.RLock()
	defer b.timers.RUnlock()
	defer b.recovered()
	if !b.closed.Load() {
		nb.cb.State()
	}
}

// recovered, deferred, recovers a panic and gives it to onPanic.
func (b *breakers) recovered() {
	if p := recover(); p != nil && b.onPanic != nil {
		b.onPanic(p)
	}
}

// close stops reporting changes that no request causes: once it returns,
// no open timer's callback is under way or reports one.
func (b *breakers) close() {
	if b == nil {
		return
	}
	// Set under the write lock: a callback that fired before it has
	// finished, and any later one sees it.
	b.timers.Lock()
	b.closed.Store(true)
	b.timers.Unlock()
	b.mu.RLock()
	defer b.mu.RUnlock()
	for _, nb := range b.byNode {
		if t := nb.halfOpen.Load(); t != nil {
			t.Stop()
		}
	}
}

// states returns every known node's breaker state.
func (b *breakers) states() map[string]gobreaker.State {
	b.mu.RLock()
	defer b.mu.RUnlock()
	out := make(map[string]gobreaker.State, len(b.byNode))
	for n, nb := range b.byNode {
		out[n] = nb.cb.State()
	}
	return out
}

// breakerState is the exported name of a gobreaker state.
func breakerState(st gobreaker.State) BreakerState {
	switch st {
	case gobreaker.StateHalfOpen:
		return BreakerHalfOpen
	case gobreaker.StateOpen:
		return BreakerOpen
	}
	return BreakerClosed
}
