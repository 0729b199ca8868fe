package otelmetrics

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	slidelog "github.com/slidelog/slidelog/core"
)

// ScopeName is the instrumentation scope of the meter New takes from its
// MeterProvider.
const ScopeName = "github.com/slidelog/slidelog/core/otelmetrics"

// Instrument names, with the Prometheus metric each mirrors.
const (
	// InstrumentDecisions mirrors prommetrics.MetricDecisions.
	InstrumentDecisions = "slidelog.decisions"
	// InstrumentStoreDuration mirrors prommetrics.MetricCommandDuration.
	InstrumentStoreDuration = "slidelog.store.duration"
	// InstrumentFallbackActivations mirrors
	// prommetrics.MetricFallbackActivations.
	InstrumentFallbackActivations = "slidelog.fallback.activations"
	// InstrumentErrors mirrors prommetrics.MetricErrors.
	InstrumentErrors = "slidelog.errors"
	// InstrumentBreakerState mirrors prommetrics.MetricBreakerState.
	InstrumentBreakerState = "slidelog.breaker.state"
	// InstrumentStoreEvents mirrors prommetrics.MetricStoreEvents.
	InstrumentStoreEvents = "slidelog.store.events"
	// InstrumentDenyCacheEntries mirrors prommetrics.MetricDenyCacheEntries.
	InstrumentDenyCacheEntries = "slidelog.deny_cache.entries"
	// InstrumentFallbackKeys mirrors prommetrics.MetricFallbackKeys.
	InstrumentFallbackKeys = "slidelog.fallback.keys"
)

// DefaultDurationBoundaries are the bucket boundaries, in seconds, of the
// store-duration histogram: the Prometheus histogram's buckets.
var DefaultDurationBoundaries = []float64{.0002, .0005, .001, .002, .005, .01, .02, .05, .1, .25, 1}

// Option configures New. Options are created by the With* functions of
// this package; the interface is sealed.
type Option interface {
	apply(*config) error
}

type config struct {
	boundaries []float64
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

// WithDurationBoundaries sets the bucket boundaries, in seconds and
// increasing, of the store-duration histogram (default
// DefaultDurationBoundaries).
func WithDurationBoundaries(b ...float64) Option {
	return optionFunc(func(c *config) error {
		if len(b) == 0 {
			return errors.New("otelmetrics: no duration boundaries")
		}
		for i := 1; i < len(b); i++ {
			if b[i] <= b[i-1] {
				return fmt.Errorf("otelmetrics: duration boundaries %v are not increasing", b)
			}
		}
		c.boundaries = append([]float64(nil), b...)
		return nil
	})
}

// Observer records the metrics of the limiters it is bound to (see
// slidelog.Observer). One Observer serves any number of limiters, told
// apart by the "limiter" attribute. It is safe for concurrent use.
type Observer struct {
	meter      metric.Meter
	decisions  metric.Int64Counter
	duration   metric.Float64Histogram
	fallbacks  metric.Int64Counter
	errs       metric.Int64Counter
	breaker    metric.Int64Gauge
	events     metric.Int64Counter
	denyCache  metric.Int64ObservableGauge
	fallbackKs metric.Int64ObservableGauge
}

var _ slidelog.Observer = (*Observer)(nil)

// New creates the instruments on a meter of mp (scope ScopeName) and
// returns an Observer to give to limiters with slidelog.WithObserver. It
// fails when mp is nil, an option is invalid, or an instrument cannot be
// created.
func New(mp metric.MeterProvider, opts ...Option) (*Observer, error) {
	if mp == nil {
		return nil, errors.New("otelmetrics: nil MeterProvider")
	}
	cfg := config{boundaries: DefaultDurationBoundaries}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}
	m := mp.Meter(ScopeName)
	o := &Observer{meter: m}
	var errs [8]error
	o.decisions, errs[0] = m.Int64Counter(InstrumentDecisions, metric.WithUnit("{decision}"),
		metric.WithDescription("Decisions by source (redis, memory, fallback, fail_open, fail_closed, deny_cache) and outcome (allowed, denied)."))
	o.duration, errs[1] = m.Float64Histogram(InstrumentStoreDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of store calls by status: ok, error, stalled, canceled."),
		metric.WithExplicitBucketBoundaries(cfg.boundaries...))
	o.fallbacks, errs[2] = m.Int64Counter(InstrumentFallbackActivations, metric.WithUnit("{request}"),
		metric.WithDescription("Requests the store could not decide, handed to the failure mode, by reason (error, stalled, breaker_open) and mode."))
	o.errs, errs[3] = m.Int64Counter(InstrumentErrors, metric.WithUnit("{error}"),
		metric.WithDescription("Calls that returned an error instead of a decision, by reason."))
	o.breaker, errs[4] = m.Int64Gauge(InstrumentBreakerState, metric.WithUnit("1"),
		metric.WithDescription("State of the circuit breaker per store node: 0 closed, 1 half-open, 2 open."))
	o.denyCache, errs[5] = m.Int64ObservableGauge(InstrumentDenyCacheEntries, metric.WithUnit("{key}"),
		metric.WithDescription("Keys in the local deny cache."))
	o.fallbackKs, errs[6] = m.Int64ObservableGauge(InstrumentFallbackKeys, metric.WithUnit("{key}"),
		metric.WithDescription("Keys tracked by the local fallback limiter."))
	o.events, errs[7] = m.Int64Counter(InstrumentStoreEvents, metric.WithUnit("{event}"),
		metric.WithDescription("Events a store reports of its own, by node and event (data_lost: a node lost the logs it held)."))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, fmt.Errorf("otelmetrics: %w", err)
	}
	return o, nil
}

// Attribute values known in advance, whose attribute sets a bound limiter
// builds once.
var (
	sources       = []slidelog.Source{slidelog.SourceNone, "redis", "memory", slidelog.SourceFallback, slidelog.SourceFailOpen, slidelog.SourceFailClosed, slidelog.SourceDenyCache}
	statuses      = []string{"ok", "error", "stalled", "canceled"}
	errorReasons  = []string{"canceled", "unavailable", "closed", "invalid_key", "other"}
	failReasons   = []string{"error", "stalled", "breaker_open"}
	failureModes  = []slidelog.FailureMode{slidelog.FailFallback, slidelog.FailOpen, slidelog.FailClosed, slidelog.FailError}
	attrLimiter   = attribute.Key("limiter")
	attrSource    = attribute.Key("source")
	attrOutcome   = attribute.Key("outcome")
	attrStatus    = attribute.Key("status")
	attrReason    = attribute.Key("reason")
	attrMode      = attribute.Key("mode")
	attrNode      = attribute.Key("node")
	outcomeNames  = [2]string{"denied", "allowed"}
	backgroundCtx = context.Background()
)

// Bind returns the recorder of one limiter's events, and registers the
// callback that reads its gauges until Unbind.
func (o *Observer) Bind(limiter string, gauges func() slidelog.Gauges) (slidelog.LimiterObserver, error) {
	b := &bound{o: o, name: attrLimiter.String(limiter)}
	b.decisions = make(map[slidelog.Source][2]metric.AddOption, len(sources))
	for _, s := range sources {
		var opts [2]metric.AddOption
		for i, outcome := range outcomeNames {
			opts[i] = metric.WithAttributeSet(attribute.NewSet(b.name, attrSource.String(s.String()), attrOutcome.String(outcome)))
		}
		b.decisions[s] = opts
	}
	b.statuses = make(map[string]metric.RecordOption, len(statuses))
	for _, s := range statuses {
		b.statuses[s] = metric.WithAttributeSet(attribute.NewSet(b.name, attrStatus.String(s)))
	}
	b.errors = make(map[string]metric.AddOption, len(errorReasons))
	for _, r := range errorReasons {
		b.errors[r] = metric.WithAttributeSet(attribute.NewSet(b.name, attrReason.String(r)))
	}
	b.failovers = make(map[failover]metric.AddOption, len(failReasons)*len(failureModes))
	for _, r := range failReasons {
		for _, m := range failureModes {
			b.failovers[failover{r, m}] = b.failoverOption(r, m)
		}
	}
	only := metric.WithAttributeSet(attribute.NewSet(b.name))
	reg, err := o.meter.RegisterCallback(func(_ context.Context, ob metric.Observer) error {
		g := gauges()
		ob.ObserveInt64(o.denyCache, int64(g.DenyCacheEntries), only)
		ob.ObserveInt64(o.fallbackKs, int64(g.FallbackKeys), only)
		return nil
	}, o.denyCache, o.fallbackKs)
	if err != nil {
		return nil, fmt.Errorf("otelmetrics: %w", err)
	}
	b.reg = reg
	return b, nil
}

type failover struct {
	reason string
	mode   slidelog.FailureMode
}

// bound records one limiter's events; its maps are written only by Bind.
type bound struct {
	o         *Observer
	name      attribute.KeyValue
	decisions map[slidelog.Source][2]metric.AddOption
	statuses  map[string]metric.RecordOption
	errors    map[string]metric.AddOption
	failovers map[failover]metric.AddOption
	reg       metric.Registration
}

func (b *bound) failoverOption(reason string, mode slidelog.FailureMode) metric.AddOption {
	return metric.WithAttributeSet(attribute.NewSet(b.name, attrReason.String(reason), attrMode.String(mode.String())))
}

// Decision adds one to slidelog.decisions.
func (b *bound) Decision(source slidelog.Source, allowed bool) {
	i := 0
	if allowed {
		i = 1
	}
	opts, ok := b.decisions[source]
	if !ok {
		opts[i] = metric.WithAttributeSet(attribute.NewSet(b.name, attrSource.String(source.String()), attrOutcome.String(outcomeNames[i])))
	}
	b.o.decisions.Add(backgroundCtx, 1, opts[i])
}

// StoreCall records took in slidelog.store.duration.
func (b *bound) StoreCall(status string, took time.Duration) {
	opt, ok := b.statuses[status]
	if !ok {
		opt = metric.WithAttributeSet(attribute.NewSet(b.name, attrStatus.String(status)))
	}
	b.o.duration.Record(backgroundCtx, took.Seconds(), opt)
}

// Failover adds one to slidelog.fallback.activations.
func (b *bound) Failover(reason string, mode slidelog.FailureMode) {
	opt, ok := b.failovers[failover{reason, mode}]
	if !ok {
		opt = b.failoverOption(reason, mode)
	}
	b.o.fallbacks.Add(backgroundCtx, 1, opt)
}

// Error adds one to slidelog.errors.
func (b *bound) Error(reason string) {
	opt, ok := b.errors[reason]
	if !ok {
		opt = metric.WithAttributeSet(attribute.NewSet(b.name, attrReason.String(reason)))
	}
	b.o.errs.Add(backgroundCtx, 1, opt)
}

// BreakerState sets slidelog.breaker.state for node.
func (b *bound) BreakerState(node string, state slidelog.BreakerState) {
	b.o.breaker.Record(backgroundCtx, int64(state), metric.WithAttributeSet(attribute.NewSet(b.name, attrNode.String(node))))
}

// StoreEvent adds one to slidelog.store.events for node and event
// (slidelog.StoreEventObserver).
func (b *bound) StoreEvent(node string, event slidelog.StoreEvent) {
	b.o.events.Add(backgroundCtx, 1, metric.WithAttributeSet(attribute.NewSet(b.name, attrNode.String(node), attribute.String("event", string(event)))))
}

// Unbind stops reading the limiter's gauges.
func (b *bound) Unbind() {
	_ = b.reg.Unregister()
}
