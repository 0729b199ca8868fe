package slidelog

import (
	"strings"
)

// Defaults of a limiter's resilience options.
const (
	// defaultDenyCacheSize is how many denied keys a limiter remembers.
	defaultDenyCacheSize = 10_000
	// defaultFallbackMaxKeys is how many keys the local fallback tracks.
	defaultFallbackMaxKeys = 100_000
)

// FailureMode is what a limiter does with a request its store could not
// decide: Redis unreachable, stalled (no reply for the stall timeout), out of
// memory, answering with an error, or its circuit breaker open. Every such
// request is reported to the observers (Observer, LimiterObserver.Failover),
// except under FailFallback on a Local store (a memory store), which has
// no fallback: its failure (such as ErrClosed, once the store is closed)
// is returned as an error and reported as one (LimiterObserver.Error).
// The caller's own cancellation is not a store failure: it is returned as
// the context's error.
type FailureMode uint8

// Failure modes.
const (
	// FailFallback, the default, decides with a local in-memory limiter of
	// this instance (Source == SourceFallback). See WithFallbackInstances,
	// WithFallbackPolicies and WithFallbackMaxKeys.
	FailFallback FailureMode = iota
	// FailOpen admits the request unchecked (Source == SourceFailOpen).
	FailOpen
	// FailClosed denies the request (Source == SourceFailClosed), with
	// RetryAfter the breaker's open timeout.
	FailClosed
	// FailError returns the store's error, wrapping ErrUnavailable, and
	// leaves the choice to the caller (an HTTP adapter answers 503).
	FailError
)

var failureModeNames = [...]string{"fallback", "fail_open", "fail_closed", "fail_error"}

// String returns the mode's name, such as "fallback".
func (m FailureMode) String() string {
	if int(m) < len(failureModeNames) {
		return failureModeNames[m]
	}
	return "unknown"
}

// Reasons a request went to the failure mode, as metric label values.
const (
	reasonError       = "error"
	reasonStalled     = "stalled"
	reasonBreakerOpen = "breaker_open"
)

// resolveResilience fills in the defaults of cfg.
func (c *limiterConfig) resolveResilience() {
	if c.fallbackInstances == 0 {
		c.fallbackInstances = 1
	}
	if c.fallbackMaxKeys == 0 {
		c.fallbackMaxKeys = defaultFallbackMaxKeys
	}
	if !c.denyCacheSet {
		c.denyCacheSize = defaultDenyCacheSize
	}
	if c.name == "" {
		names := make([]string, len(c.policies))
		for i, p := range c.policies {
			names[i] = p.String()
		}
		c.name = strings.Join(names, "+")
	}
	c.breaker = c.breaker.withDefaults()
}

// fallbackPolicyList returns the policies the fallback enforces.
func (c *limiterConfig) fallbackPolicyList() []Policy {
	if c.fallbackPolicies != nil {
		return c.fallbackPolicies
	}
	out := make([]Policy, len(c.policies))
	for i, p := range c.policies {
		p.Limit = max(1, ceilDiv(p.Limit, c.fallbackInstances))
		out[i] = p
	}
	return out
}

// ceilDiv is a/b rounded up, for a >= 0 and b >= 1, without the overflow
// of (a+b-1)/b.
func ceilDiv(a, b int) int {
	q := a / b
	if a%b != 0 {
		q++
	}
	return q
}
