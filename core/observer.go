package slidelog

import (
	"fmt"
	"time"
)

// Observer receives the events and gauges of the limiters it is given to
// with WithObserver, to export them as metrics (package prommetrics builds
// one for Prometheus, package otelmetrics one for OpenTelemetry).
//
// New calls Bind once per limiter; the LimiterObserver it returns gets
// that limiter's events from any goroutine, so it must be safe for
// concurrent use and must not block: it runs on the request path, and on
// a timer of the limiter's own (a breaker's change to half-open when its
// open timeout passes).
//
// A limiter recovers a panic of code it was given only where no caller
// of its own would receive it. Decision, StoreCall, Failover and Error
// run on the goroutine of the call whose event they report (Allow,
// AllowN, Refund, Reset, Peek), Bind on New's and Unbind on Close's: a
// panic in one of them reaches that call's caller, as a panic in the
// store's Take does (package httplimit recovers it and answers 500),
// once the limiter is whole again: Close unbinds the other observers and
// releases the limiter's name before a panic of Unbind goes on, and New
// unbinds the observers it bound and releases the name before a panic
// of Bind, or of a Notifier store's Notify, does.
// BreakerState runs wherever a breaker changes: on the limiter's timer,
// or in whichever call happens to find the change. A panic in it is
// recovered wherever it runs, and logged at ERROR with its value and
// stack, at most once per 10 s; the other observers are told of the
// change, and it is logged, all the same.
type Observer interface {
	// Bind is called by New with the limiter's name (WithName) and a
	// function that reads the limiter's gauges at the moment it is
	// called. An error fails New with ErrInvalidOption.
	Bind(limiter string, gauges func() Gauges) (LimiterObserver, error)
}

// LimiterObserver receives one limiter's events. The strings it is given
// are from small fixed sets, documented with each method, never keys.
type LimiterObserver interface {
	// Decision is called for every decision, allowed or denied, with the
	// part of the limiter that made it.
	Decision(source Source, allowed bool)
	// StoreCall is called when a call to the store ends, with its status
	// ("ok", "error", "stalled" or "canceled") and how long it took.
	StoreCall(status string, took time.Duration)
	// Failover is called when the store could not decide a request and
	// the failure mode decides it, with the reason ("error", "stalled" or
	// "breaker_open"). A Local store under FailFallback has no fallback:
	// its failure (a closed memory store) is an Error, not a Failover.
	Failover(reason string, mode FailureMode)
	// Error is called when the limiter returns an error instead of a
	// decision, with the reason ("canceled", "unavailable", "closed",
	// "invalid_key" or "other").
	Error(reason string)
	// BreakerState is called when the circuit breaker of a store node
	// changes state; node is the node's address, or "store" for a store
	// that is one node.
	BreakerState(node string, state BreakerState)
	// Unbind is called once by the limiter's Close: the gauges function
	// must not be called after it returns.
	Unbind()
}

// StoreEventObserver is a LimiterObserver that is also told of the
// events the limiter's store reports of its own, apart from any call (see
// Notifier): a limiter checks each LimiterObserver for it in New. The
// observers of packages prommetrics and otelmetrics count them.
//
// StoreEvent runs on the store's goroutine, where no caller of the
// limiter's waits: like BreakerState, a panic in it is recovered and
// logged, and the other observers are told all the same. It must not
// block.
type StoreEventObserver interface {
	LimiterObserver
	// StoreEvent is called with the node the event concerns (an
	// address, or "store" for a store that is one node) and the event.
	StoreEvent(node string, event StoreEvent)
}

// Gauges are a limiter's sizes at one moment.
type Gauges struct {
	// DenyCacheEntries is the number of keys in the local deny cache.
	DenyCacheEntries int
	// FallbackKeys is the number of keys the local fallback limiter
	// tracks.
	FallbackKeys int
}

// BreakerState is the state of a store node's circuit breaker. Its value
// is the one the breaker-state gauges report.
type BreakerState uint8

// Breaker states.
const (
	// BreakerClosed lets every call through to the node.
	BreakerClosed BreakerState = iota
	// BreakerHalfOpen lets a few probe calls through after the open
	// timeout.
	BreakerHalfOpen
	// BreakerOpen sends every request straight to the failure mode.
	BreakerOpen
)

// String returns "closed", "half-open" or "open".
func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerHalfOpen:
		return "half-open"
	case BreakerOpen:
		return "open"
	}
	return fmt.Sprintf("BreakerState(%d)", uint8(s))
}

// observers are the LimiterObservers bound to one limiter. A nil
// *observers observes nothing.
type observers struct {
	list []LimiterObserver
}

func bindObservers(obs []Observer, name string, gauges func() Gauges) (*observers, error) {
	if len(obs) == 0 {
		return nil, nil
	}
	o := &observers{}
	bound := false
	defer func() {
		if !bound {
			// A Bind failed, or panicked: unbind those bound before it.
			o.unbind()
		}
	}()
	for _, ob := range obs {
		lo, err := ob.Bind(name, gauges)
		if err == nil && lo == nil {
			err = fmt.Errorf("%T.Bind returned no LimiterObserver", ob)
		}
		if err != nil {
			return nil, err
		}
		o.list = append(o.list, lo)
	}
	bound = true
	return o, nil
}

func (o *observers) decision(res Result) {
	if o == nil {
		return
	}
	for _, lo := range o.list {
		lo.Decision(res.Source, res.Allowed)
	}
}

func (o *observers) commandDone(status string, took time.Duration) {
	if o == nil {
		return
	}
	for _, lo := range o.list {
		lo.StoreCall(status, took)
	}
}

func (o *observers) failover(reason string, mode FailureMode) {
	if o == nil {
		return
	}
	for _, lo := range o.list {
		lo.Failover(reason, mode)
	}
}

func (o *observers) error(reason string) {
	if o == nil {
		return
	}
	for _, lo := range o.list {
		lo.Error(reason)
	}
}

// unbind unbinds every observer, also when one panics: the panic goes on
// once the others are unbound.
func (o *observers) unbind() {
	if o == nil {
		return
	}
	unbindAll(o.list)
}

func unbindAll(list []LimiterObserver) {
	if len(list) == 0 {
		return
	}
	defer unbindAll(list[1:])
	list[0].Unbind()
}

// nodeLabel names a breaker's node in labels and logs.
func nodeLabel(node string) string {
	if node == "" {
		return "store"
	}
	return node
}
