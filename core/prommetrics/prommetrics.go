// Package prommetrics keeps a limiter's metrics in Prometheus.
//
//	limiter, err := slidelog.New(store, slidelog.PerMinute(100),
//		slidelog.WithName("api"),
//		slidelog.WithObserver(prommetrics.New(prometheus.DefaultRegisterer)))
//
// Limiters sharing a registry share the collectors and are told apart by
// the "limiter" label (slidelog.WithName); no metric carries a key.
// docs/operations.md describes each metric, with alert rules in deploy/.
// It lives in a package of its own so that a program that does not use it
// does not link client_golang.
package prommetrics

import (
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	slidelog "github.com/slidelog/slidelog/core"
)

// Metric names. Every metric carries the label "limiter" (slidelog.WithName); none
// carries a key. docs/operations.md describes each with alert rules.
const (
	MetricCommandDuration     = "slidelog_command_duration_seconds"
	MetricDecisions           = "slidelog_decisions_total"
	MetricRejections          = "slidelog_rate_limit_rejections_total"
	MetricFallbackActivations = "slidelog_rate_limit_fallback_activations_total"
	MetricErrors              = "slidelog_errors_total"
	MetricBreakerState        = "slidelog_breaker_state"
	MetricStoreEvents         = "slidelog_store_events_total"
	MetricDenyCacheEntries    = "slidelog_deny_cache_entries"
	MetricFallbackKeys        = "slidelog_fallback_keys"
)

// New returns an observer (give it to a limiter with
// slidelog.WithObserver) that registers the collectors with reg when a
// limiter binds it. Binding fails, and so does slidelog.New, when reg is
// nil or holds other collectors under these names.
func New(reg prometheus.Registerer) slidelog.Observer {
	return promObserver{reg: reg}
}

type promObserver struct {
	reg prometheus.Registerer
}

// sources are the decision sources whose series a limiter creates at
// once (the stores of this module and the limiter's own); a store of
// another name gets its series at its first decision.
var sources = [...]slidelog.Source{slidelog.SourceNone, "redis", "memory", slidelog.SourceFallback, slidelog.SourceFailOpen, slidelog.SourceFailClosed, slidelog.SourceDenyCache}

// sourceCounters are the counters of one source.
type sourceCounters struct {
	decisions [2]prometheus.Counter // denied, allowed
	rejected  prometheus.Counter
}

// Bind registers the collectors, or finds those another limiter
// registered, and curries them with the limiter's name.
func (p promObserver) Bind(name string, gauges func() slidelog.Gauges) (slidelog.LimiterObserver, error) {
	if p.reg == nil {
		return nil, errors.New("prommetrics: nil registerer")
	}
	return newMetrics(p.reg, name, func() (denied, fallbackKeys float64) {
		g := gauges()
		return float64(g.DenyCacheEntries), float64(g.FallbackKeys)
	})
}

// metrics holds a limiter's collectors, curried with its name.
type metrics struct {
	command    *prometheus.HistogramVec
	known      [len(sources)]sourceCounters
	others     sync.Map // slidelog.Source -> *sourceCounters
	decisions  *prometheus.CounterVec
	rejections *prometheus.CounterVec
	name       string
	fallbacks  *prometheus.CounterVec
	errs       *prometheus.CounterVec
	breaker    *prometheus.GaugeVec
	events     *prometheus.CounterVec
	sizes      *sizes
}

// register registers collector c with reg, or returns the collector of the
// same description that another limiter registered already.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, err
	}
	return c, nil
}

func newMetrics(reg prometheus.Registerer, name string, gauges func() (denied, fallbackKeys float64)) (*metrics, error) {
	labels := prometheus.Labels{"limiter": name}
	command, err := register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    MetricCommandDuration,
		Help:    "Duration of store calls (one decision script run on Redis), by status: ok, error, stalled, canceled.",
		Buckets: []float64{.0002, .0005, .001, .002, .005, .01, .02, .05, .1, .25, 1},
	}, []string{"limiter", "status"}))
	if err != nil {
		return nil, err
	}
	decisions, err := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricDecisions,
		Help: "Decisions by source (redis, memory, fallback, fail_open, fail_closed, deny_cache) and outcome (allowed, denied).",
	}, []string{"limiter", "source", "outcome"}))
	if err != nil {
		return nil, err
	}
	rejections, err := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricRejections,
		Help: "Requests denied, by source.",
	}, []string{"limiter", "source"}))
	if err != nil {
		return nil, err
	}
	fallbacks, err := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricFallbackActivations,
		Help: "Requests the store could not decide, handed to the failure mode, by reason (error, stalled, breaker_open) and mode.",
	}, []string{"limiter", "reason", "mode"}))
	if err != nil {
		return nil, err
	}
	errs, err := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricErrors,
		Help: "Calls that returned an error instead of a decision, by reason (canceled, unavailable, closed, invalid_key, other).",
	}, []string{"limiter", "reason"}))
	if err != nil {
		return nil, err
	}
	breaker, err := register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: MetricBreakerState,
		Help: "State of the circuit breaker per store node: 0 closed, 1 half-open, 2 open.",
	}, []string{"limiter", "node"}))
	if err != nil {
		return nil, err
	}
	events, err := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricStoreEvents,
		Help: "Events a store reports of its own, by node and event (data_lost: a node lost the logs it held).",
	}, []string{"limiter", "node", "event"}))
	if err != nil {
		return nil, err
	}
	// The size gauges are per limiter name: the limiters of one name on
	// one registry (their counters share series too) report the sums of
	// their sizes, and a closed limiter's sizes are no longer read.
	sz, err := register(reg, newSizes(labels))
	if err != nil {
		return nil, err
	}
	m := &metrics{
		sizes:     sz,
		command:   command.MustCurryWith(labels).(*prometheus.HistogramVec),
		fallbacks: fallbacks.MustCurryWith(labels),
		errs:      errs.MustCurryWith(labels),
		breaker:   breaker.MustCurryWith(labels),
		events:    events.MustCurryWith(labels),
	}
	m.decisions, m.rejections, m.name = decisions, rejections, name
	for i, s := range sources {
		m.known[i] = m.counters(s)
	}
	sz.add(m, gauges)
	return m, nil
}

// counters returns the series of source s.
func (m *metrics) counters(s slidelog.Source) sourceCounters {
	src := s.String()
	return sourceCounters{
		decisions: [2]prometheus.Counter{
			m.decisions.WithLabelValues(m.name, src, "denied"),
			m.decisions.WithLabelValues(m.name, src, "allowed"),
		},
		rejected: m.rejections.WithLabelValues(m.name, src),
	}
}

// of returns the counters of source s.
func (m *metrics) of(s slidelog.Source) *sourceCounters {
	for i := range sources {
		if sources[i] == s {
			return &m.known[i]
		}
	}
	if c, ok := m.others.Load(s); ok {
		return c.(*sourceCounters)
	}
	c := m.counters(s)
	got, _ := m.others.LoadOrStore(s, &c)
	return got.(*sourceCounters)
}

func (m *metrics) Decision(source slidelog.Source, allowed bool) {
	c := m.of(source)
	if allowed {
		c.decisions[1].Inc()
		return
	}
	c.decisions[0].Inc()
	c.rejected.Inc()
}

func (m *metrics) StoreCall(status string, took time.Duration) {
	m.command.WithLabelValues(status).Observe(took.Seconds())
}

func (m *metrics) Failover(reason string, mode slidelog.FailureMode) {
	m.fallbacks.WithLabelValues(reason, mode.String()).Inc()
}

func (m *metrics) Error(reason string) {
	m.errs.WithLabelValues(reason).Inc()
}

func (m *metrics) BreakerState(node string, st slidelog.BreakerState) {
	m.breaker.WithLabelValues(node).Set(float64(st))
}

// StoreEvent implements slidelog.StoreEventObserver.
func (m *metrics) StoreEvent(node string, event slidelog.StoreEvent) {
	m.events.WithLabelValues(node, string(event)).Inc()
}

// Unbind stops reading the limiter's sizes: its size gauges leave the
// registry's output when no other open limiter of its name reports them.
func (m *metrics) Unbind() { m.sizes.remove(m) }

// sizes is the collector of the size gauges of the limiters of one name
// on one registry.
type sizes struct {
	denied, fallbackKeys *prometheus.Desc

	mu     sync.Mutex
	gauges map[*metrics]func() (denied, fallbackKeys float64)
}

func newSizes(labels prometheus.Labels) *sizes {
	return &sizes{
		denied:       prometheus.NewDesc(MetricDenyCacheEntries, "Keys in the local deny cache.", nil, labels),
		fallbackKeys: prometheus.NewDesc(MetricFallbackKeys, "Keys tracked by the local fallback limiter.", nil, labels),
		gauges:       make(map[*metrics]func() (denied, fallbackKeys float64)),
	}
}

func (s *sizes) add(m *metrics, gauges func() (denied, fallbackKeys float64)) {
	s.mu.Lock()
	s.gauges[m] = gauges
	s.mu.Unlock()
}

// remove forgets m's gauges; once it returns, Collect no longer calls
// them.
func (s *sizes) remove(m *metrics) {
	s.mu.Lock()
	delete(s.gauges, m)
	s.mu.Unlock()
}

// Describe implements prometheus.Collector.
func (s *sizes) Describe(ch chan<- *prometheus.Desc) {
	ch <- s.denied
	ch <- s.fallbackKeys
}

// Collect implements prometheus.Collector: the sums over the open
// limiters, nothing when none is open.
func (s *sizes) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	n := len(s.gauges)
	var denied, fallbackKeys float64
	for _, g := range s.gauges {
		d, f := g()
		denied += d
		fallbackKeys += f
	}
	s.mu.Unlock()
	if n == 0 {
		return
	}
	ch <- prometheus.MustNewConstMetric(s.denied, prometheus.GaugeValue, denied)
	ch <- prometheus.MustNewConstMetric(s.fallbackKeys, prometheus.GaugeValue, fallbackKeys)
}
