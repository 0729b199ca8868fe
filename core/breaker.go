package slidelog

import (
	"errors"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"
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
	mu       sync.RWMutex
	byNode   map[string]*gobreaker.TwoStepCircuitBreaker[struct{}]
}

func newBreakers(s BreakerSettings, onChange func(node string, from, to gobreaker.State)) *breakers {
	if s.Disabled {
		return nil
	}
	return &breakers{settings: s, onChange: onChange, byNode: make(map[string]*gobreaker.TwoStepCircuitBreaker[struct{}])}
}

// get returns the breaker of node, creating it on first use.
func (b *breakers) get(node string) *gobreaker.TwoStepCircuitBreaker[struct{}] {
	b.mu.RLock()
	cb := b.byNode[node]
	b.mu.RUnlock()
	if cb != nil {
		return cb
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if cb = b.byNode[node]; cb != nil {
		return cb
	}
	failures := uint32(b.settings.ConsecutiveFailures)
	cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        node,
		MaxRequests: uint32(b.settings.HalfOpenProbes),
		Timeout:     b.settings.OpenTimeout,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= failures },
		IsExcluded:  func(err error) bool { return errors.Is(err, errCallerGone) },
		OnStateChange: func(name string, from, to gobreaker.State) {
			if b.onChange != nil {
				b.onChange(name, from, to)
			}
		},
	})
	b.byNode[node] = cb
	return cb
}

// states returns every known node's breaker state.
func (b *breakers) states() map[string]gobreaker.State {
	b.mu.RLock()
	defer b.mu.RUnlock()
	out := make(map[string]gobreaker.State, len(b.byNode))
	for n, cb := range b.byNode {
		out[n] = cb.State()
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
