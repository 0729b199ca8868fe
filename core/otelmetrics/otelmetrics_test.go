package otelmetrics_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/goleak"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/otelmetrics"
	"github.com/slidelog/slidelog/core/prommetrics"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// failingStore is a Store whose every Take fails as a refused connection
// would.
type failingStore struct{}

func (failingStore) Take(context.Context, slidelog.Request) (slidelog.Result, error) {
	return slidelog.Result{}, errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
}
func (failingStore) Refund(context.Context, slidelog.Request) error { return nil }
func (failingStore) Reset(context.Context, slidelog.Request) error  { return nil }
func (failingStore) Close() error                                   { return nil }

// newObserver returns an Observer on a meter provider read by the
// returned manual reader.
func newObserver(t *testing.T) (*otelmetrics.Observer, *sdkmetric.ManualReader) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	o, err := otelmetrics.New(mp)
	require.NoError(t, err)
	return o, reader
}

// collect reads every instrument of the observer's scope, by name.
func collect(t *testing.T, reader *sdkmetric.ManualReader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(t.Context(), &rm))
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otelmetrics.ScopeName {
			continue
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

func set(kv ...string) attribute.Set {
	attrs := make([]attribute.KeyValue, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		attrs = append(attrs, attribute.String(kv[i], kv[i+1]))
	}
	return attribute.NewSet(attrs...)
}

func counter(points ...metricdata.DataPoint[int64]) metricdata.Sum[int64] {
	return metricdata.Sum[int64]{Temporality: metricdata.CumulativeTemporality, IsMonotonic: true, DataPoints: points}
}

func point(v int64, kv ...string) metricdata.DataPoint[int64] {
	return metricdata.DataPoint[int64]{Attributes: set(kv...), Value: v}
}

// histogramCounts maps each data point's status to its count.
func histogramCounts(t *testing.T, m metricdata.Metrics) map[string]uint64 {
	t.Helper()
	h, ok := m.Data.(metricdata.Histogram[float64])
	require.True(t, ok, "got %T, want a float64 histogram", m.Data)
	out := map[string]uint64{}
	for _, dp := range h.DataPoints {
		status, _ := dp.Attributes.Value("status")
		out[status.AsString()] += dp.Count
		assert.GreaterOrEqual(t, dp.Sum, 0.0, "durations are not negative")
	}
	return out
}

func TestMemoryStoreDecisions(t *testing.T) {
	o, reader := newObserver(t)
	store := memstore.New()
	t.Cleanup(func() { _ = store.Close() })
	l, err := slidelog.New(store, slidelog.Policy{Name: "api", Limit: 2, Window: time.Minute}, slidelog.WithObserver(o))
	require.NoError(t, err)
	for range 3 {
		_, err := l.Allow(t.Context(), "client")
		require.NoError(t, err)
	}

	got := collect(t, reader)
	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name:        otelmetrics.InstrumentDecisions,
		Description: got[otelmetrics.InstrumentDecisions].Description,
		Unit:        "{decision}",
		Data: counter(
			point(2, "limiter", "api", "source", "memory", "outcome", "allowed"),
			point(1, "limiter", "api", "source", "memory", "outcome", "denied"),
		),
	}, got[otelmetrics.InstrumentDecisions], metricdatatest.IgnoreTimestamp())
	assert.Equal(t, map[string]uint64{"ok": 3}, histogramCounts(t, got[otelmetrics.InstrumentStoreDuration]))
	assert.Equal(t, "s", got[otelmetrics.InstrumentStoreDuration].Unit)
	for _, name := range []string{otelmetrics.InstrumentDenyCacheEntries, otelmetrics.InstrumentFallbackKeys} {
		metricdatatest.AssertAggregationsEqual(t, metricdata.Gauge[int64]{DataPoints: []metricdata.DataPoint[int64]{point(0, "limiter", "api")}},
			got[name].Data, metricdatatest.IgnoreTimestamp())
	}
	assert.NotContains(t, got, otelmetrics.InstrumentErrors, "no error yet")

	require.NoError(t, l.Close())
	_, err = l.Allow(t.Context(), "client")
	require.ErrorIs(t, err, slidelog.ErrClosed)
	got = collect(t, reader)
	metricdatatest.AssertAggregationsEqual(t, counter(point(1, "limiter", "api", "reason", "closed")),
		got[otelmetrics.InstrumentErrors].Data, metricdatatest.IgnoreTimestamp())
	for _, name := range []string{otelmetrics.InstrumentDenyCacheEntries, otelmetrics.InstrumentFallbackKeys} {
		if m, ok := got[name]; ok {
			g, _ := m.Data.(metricdata.Gauge[int64])
			assert.Empty(t, g.DataPoints, "%s: a closed limiter's gauges are not read", name)
		}
	}
}

// TestFailingStoreMatchesPrometheus gives one limiter on a store that
// always fails both observers, and checks that the OpenTelemetry
// instruments count what the decisions were and what Prometheus counts.
func TestFailingStoreMatchesPrometheus(t *testing.T) {
	o, reader := newObserver(t)
	reg := prometheus.NewPedanticRegistry()
	l, err := slidelog.New(failingStore{}, slidelog.Policy{Name: "api", Limit: 3, Window: time.Minute},
		slidelog.WithObserver(o), slidelog.WithObserver(prommetrics.New(reg)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })

	// The breaker opens after DefaultBreakerFailures failed calls; the
	// request after them goes to the fallback without a store call.
	calls := 5 + 1
	allowed := 0
	for range calls {
		res, err := l.Allow(t.Context(), "client")
		require.NoError(t, err)
		require.Equal(t, slidelog.SourceFallback, res.Source)
		if res.Allowed {
			allowed++
		}
	}

	got := collect(t, reader)
	var decisions []metricdata.DataPoint[int64]
	if allowed > 0 {
		decisions = append(decisions, point(int64(allowed), "limiter", "api", "source", "fallback", "outcome", "allowed"))
	}
	if denied := calls - allowed; denied > 0 {
		decisions = append(decisions, point(int64(denied), "limiter", "api", "source", "fallback", "outcome", "denied"))
	}
	metricdatatest.AssertAggregationsEqual(t, counter(decisions...), got[otelmetrics.InstrumentDecisions].Data, metricdatatest.IgnoreTimestamp())
	metricdatatest.AssertAggregationsEqual(t, counter(
		point(int64(5), "limiter", "api", "reason", "error", "mode", "fallback"),
		point(1, "limiter", "api", "reason", "breaker_open", "mode", "fallback"),
	), got[otelmetrics.InstrumentFallbackActivations].Data, metricdatatest.IgnoreTimestamp())
	assert.Equal(t, map[string]uint64{"error": uint64(5)}, histogramCounts(t, got[otelmetrics.InstrumentStoreDuration]))
	metricdatatest.AssertAggregationsEqual(t, metricdata.Gauge[int64]{DataPoints: []metricdata.DataPoint[int64]{
		point(int64(slidelog.BreakerOpen), "limiter", "api", "node", "store"),
	}}, got[otelmetrics.InstrumentBreakerState].Data, metricdatatest.IgnoreTimestamp())
	metricdatatest.AssertAggregationsEqual(t, metricdata.Gauge[int64]{DataPoints: []metricdata.DataPoint[int64]{point(1, "limiter", "api")}},
		got[otelmetrics.InstrumentFallbackKeys].Data, metricdatatest.IgnoreTimestamp())

	// Prometheus saw the same events.
	assert.Equal(t, float64(allowed), testutil.ToFloat64(promCounter(t, reg, prommetrics.MetricDecisions, "fallback", "allowed")))
	assert.Equal(t, float64(calls-allowed), testutil.ToFloat64(promCounter(t, reg, prommetrics.MetricDecisions, "fallback", "denied")))
	assert.Equal(t, 1.0, testutil.ToFloat64(promGauge(t, reg, prommetrics.MetricFallbackKeys)))
	assert.Equal(t, 2.0, testutil.ToFloat64(promGauge(t, reg, prommetrics.MetricBreakerState)))
}

// promCounter finds the decisions counter of source and outcome in reg.
func promCounter(t *testing.T, reg *prometheus.Registry, name, source, outcome string) prometheus.Collector {
	t.Helper()
	return promValue(t, reg, name, func(labels map[string]string) bool {
		return labels["source"] == source && labels["outcome"] == outcome
	})
}

func promGauge(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	return promValue(t, reg, name, func(map[string]string) bool { return true })
}

// promValue returns a collector of the one sample of name whose labels
// match.
func promValue(t *testing.T, reg *prometheus.Registry, name string, match func(map[string]string) bool) prometheus.Collector {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			if !match(labels) {
				continue
			}
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sample"}, func() float64 { return v })
		}
	}
	t.Fatalf("no sample of %s matches", name)
	return nil
}

func TestNewRejectsBadInput(t *testing.T) {
	_, err := otelmetrics.New(nil)
	assert.Error(t, err, "nil MeterProvider")
	mp := sdkmetric.NewMeterProvider()
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	_, err = otelmetrics.New(mp, otelmetrics.WithDurationBoundaries(0.1, 0.05))
	assert.Error(t, err, "decreasing boundaries")
	_, err = otelmetrics.New(mp, otelmetrics.WithDurationBoundaries())
	assert.Error(t, err, "no boundaries")
	_, err = slidelog.New(failingStore{}, slidelog.Policy{Name: "p", Limit: 1, Window: time.Second}, slidelog.WithObserver(nil))
	assert.ErrorIs(t, err, slidelog.ErrInvalidOption)
}
