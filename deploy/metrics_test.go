package deploy_test

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/prommetrics"
)

// targetLabels are the labels Prometheus adds to every scraped series.
var targetLabels = []string{"instance", "job"}

// failingStore is a Store whose every Take fails, so that a limiter on it
// moves every metric: decisions, store calls, fallbacks, the breaker.
type failingStore struct{}

func (failingStore) Take(context.Context, slidelog.Request) (slidelog.Result, error) {
	return slidelog.Result{}, errors.New("connection refused")
}
func (failingStore) Refund(context.Context, slidelog.Request) error { return nil }
func (failingStore) Reset(context.Context, slidelog.Request) error  { return nil }
func (failingStore) Close() error                                   { return nil }

// Notify implements slidelog.Notifier: the store reports a lost node at
// once, so that the store-event counter has a series.
func (failingStore) Notify(fn func(node string, event slidelog.StoreEvent)) (stop func()) {
	fn("10.0.0.1:6379", slidelog.EventDataLost)
	return func() {}
}

// metricConstants returns the values of core's exported Metric* string
// constants, read from the source of core/prommetrics/prommetrics.go.
func metricConstants(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../core/prommetrics/prommetrics.go", nil, 0)
	require.NoError(t, err)
	var names []string
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, id := range vs.Names {
				if !id.IsExported() || !strings.HasPrefix(id.Name, "Metric") || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				require.True(t, ok && lit.Kind == token.STRING, "%s is not a string literal", id.Name)
				v, err := strconv.Unquote(lit.Value)
				require.NoError(t, err)
				names = append(names, v)
			}
		}
	}
	require.NotEmpty(t, names, "no Metric* constants in core/prommetrics/prommetrics.go")
	return names
}

// registeredSeries returns every series name a scrape of slidelog's
// metrics can carry (a histogram's _bucket, _sum and _count), each with
// its label names. It registers the metrics of a limiter on a failing
// store, moves each of them, and checks that the families gathered are
// exactly core's Metric* constants.
func registeredSeries(t *testing.T) map[string][]string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	l, err := slidelog.New(failingStore{}, slidelog.Policy{Name: "api", Limit: 5, Window: time.Minute}, slidelog.WithObserver(prommetrics.New(reg)))
	require.NoError(t, err)
	for range 5 + 1 {
		_, err := l.Allow(t.Context(), "client")
		require.NoError(t, err)
	}
	// An error instead of a decision; the limiter stays open, since a
	// closed one's size gauges are no longer reported.
	defer l.Close()
	_, err = l.Allow(t.Context(), "")
	require.ErrorIs(t, err, slidelog.ErrInvalidKey)

	families, err := reg.Gather()
	require.NoError(t, err)
	series := map[string][]string{}
	for _, f := range families {
		labels := map[string]bool{}
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = true
			}
		}
		for _, l := range targetLabels {
			labels[l] = true
		}
		names := slices.Sorted(maps.Keys(labels))
		if f.GetType() == dto.MetricType_HISTOGRAM {
			series[f.GetName()+"_bucket"] = append(slices.Clone(names), "le")
			series[f.GetName()+"_sum"] = names
			series[f.GetName()+"_count"] = names
			// The family name itself is also the native histogram's.
		}
		series[f.GetName()] = names
	}
	require.ElementsMatch(t, metricConstants(t), slices.Collect(maps.Keys(familyNames(families))),
		"the families a limiter registers are core's Metric* constants")
	return series
}

func familyNames(families []*dto.MetricFamily) map[string]bool {
	out := map[string]bool{}
	for _, f := range families {
		out[f.GetName()] = true
	}
	return out
}
