// Package otelmetrics records a slidelog limiter's metrics with
// OpenTelemetry: New returns a slidelog.Observer to give to limiters with
// slidelog.WithObserver, beside or instead of prommetrics.New
// (Prometheus).
//
// The instruments mirror the Prometheus metrics under OpenTelemetry names
// (docs/operations.md has the table):
//
//	slidelog.decisions             counter   limiter, source, outcome
//	slidelog.store.duration        histogram limiter, status (seconds)
//	slidelog.fallback.activations  counter   limiter, reason, mode
//	slidelog.errors                counter   limiter, reason
//	slidelog.breaker.state         gauge     limiter, node (0 closed, 1 half-open, 2 open)
//	slidelog.deny_cache.entries    gauge     limiter (observable)
//	slidelog.fallback.keys         gauge     limiter (observable)
//
// Denials are slidelog.decisions with outcome "denied": there is no twin of
// the Prometheus rejections counter. No instrument carries a key.
package otelmetrics
