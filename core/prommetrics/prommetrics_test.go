package prommetrics_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/prommetrics"
)

// gauge returns the value of the size gauge name of limiter, and whether
// reg reports it.
func gauge(t *testing.T, reg *prometheus.Registry, name, limiter string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "limiter" && lp.GetValue() == limiter {
					return m.GetGauge().GetValue(), true
				}
			}
		}
	}
	return 0, false
}

// denyKeys has l deny each of keys once, so that its deny cache holds
// them.
func denyKeys(t *testing.T, l *slidelog.Limiter, keys ...string) {
	t.Helper()
	for _, k := range keys {
		for range 2 {
			_, err := l.Allow(t.Context(), k)
			require.NoError(t, err)
		}
	}
}

// A limiter closed and made again under its name (a configuration
// reload) reports the new limiter's sizes, not the closed one's, and a
// closed limiter's sizes are no longer read (slidelog.Observer: Unbind).
func TestSizeGaugesFollowOpenLimiters(t *testing.T) {
	reg := prometheus.NewRegistry()
	store := memstore.New()
	defer store.Close()
	opts := []slidelog.Option{slidelog.WithName("api"), slidelog.WithObserver(prommetrics.New(reg)), slidelog.WithDenyCache(100)}
	p := slidelog.Policy{Name: "p", Limit: 1, Window: time.Minute}

	first, err := slidelog.New(store, p, opts...)
	require.NoError(t, err)
	denyKeys(t, first, "a")
	got, ok := gauge(t, reg, prommetrics.MetricDenyCacheEntries, "api")
	require.True(t, ok)
	assert.Equal(t, 1.0, got)
	require.NoError(t, first.Close())
	_, ok = gauge(t, reg, prommetrics.MetricDenyCacheEntries, "api")
	assert.False(t, ok, "a closed limiter's deny cache is not reported")

	second, err := slidelog.New(store, p, opts...)
	require.NoError(t, err)
	defer second.Close()
	denyKeys(t, second, "x", "y", "z")
	got, ok = gauge(t, reg, prommetrics.MetricDenyCacheEntries, "api")
	require.True(t, ok)
	assert.Equal(t, 3.0, got, "the open limiter's deny cache, not the closed one's")
	got, ok = gauge(t, reg, prommetrics.MetricFallbackKeys, "api")
	require.True(t, ok)
	assert.Zero(t, got)

	// Two open limiters of one name (on two stores) report their sums,
	// as their counters share series.
	other := memstore.New()
	defer other.Close()
	third, err := slidelog.New(other, p, opts...)
	require.NoError(t, err)
	denyKeys(t, third, "u")
	got, _ = gauge(t, reg, prommetrics.MetricDenyCacheEntries, "api")
	assert.Equal(t, 4.0, got)
	require.NoError(t, third.Close())
	got, _ = gauge(t, reg, prommetrics.MetricDenyCacheEntries, "api")
	assert.Equal(t, 3.0, got)
}

// The help of slidelog_errors_total names every reason the limiter
// reports (slidelog.LimiterObserver.Error, docs/operations.md).
func TestErrorsHelpNamesEveryReason(t *testing.T) {
	reg := prometheus.NewRegistry()
	store := memstore.New()
	defer store.Close()
	l, err := slidelog.New(store, slidelog.PerMinute(1), slidelog.WithObserver(prommetrics.New(reg)))
	require.NoError(t, err)
	defer l.Close()
	_, err = l.Allow(t.Context(), "")
	require.ErrorIs(t, err, slidelog.ErrInvalidKey)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == prommetrics.MetricErrors {
			for _, reason := range []string{"canceled", "unavailable", "closed", "invalid_key", "other"} {
				assert.Contains(t, mf.GetHelp(), reason)
			}
			return
		}
	}
	t.Fatalf("no %s", prommetrics.MetricErrors)
}
