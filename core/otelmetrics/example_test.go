package otelmetrics_test

import (
	"context"
	"fmt"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/otelmetrics"
)

func Example() {
	ctx := context.Background()
	// In a service, the MeterProvider is the one its exporter is set up
	// on; a manual reader shows what it would export.
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(ctx) }()

	observer, err := otelmetrics.New(mp)
	if err != nil {
		panic(err)
	}
	store := memstore.New()
	defer func() { _ = store.Close() }()
	limiter, err := slidelog.New(store, slidelog.Policy{Name: "api", Limit: 2, Window: time.Minute},
		slidelog.WithObserver(observer))
	if err != nil {
		panic(err)
	}
	defer func() { _ = limiter.Close() }()
	for range 3 {
		_, _ = limiter.Allow(ctx, "client-1")
	}

	var rm metricdata.ResourceMetrics
	_ = reader.Collect(ctx, &rm)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if m.Name != otelmetrics.InstrumentDecisions {
			continue
		}
		for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
			outcome, _ := dp.Attributes.Value("outcome")
			fmt.Println(m.Name, outcome.AsString(), dp.Value)
		}
	}
	// Unordered output:
	// slidelog.decisions allowed 2
	// slidelog.decisions denied 1
}
