package leotel_test

import (
	"context"
	"fmt"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/leotel"
	"github.com/racedecider/leaderelection/memory"
)

// New(nil) uses the global MeterProvider; here a provider with an
// in-memory reader stands in for one with an exporter.
func Example() {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	metrics, err := leotel.New(provider)
	if err != nil {
		panic(err)
	}

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	_ = leaderelection.Config{
		Decider:      memory.NewDecider(),
		LeaderID:     "worker-1",
		TermLength:   2 * time.Second,
		MaxClockSkew: 200 * time.Millisecond,
		Observer:     metrics,
		OnElected: func(ctx context.Context, tv *leaderelection.TimeView) {
			var rm metricdata.ResourceMetrics
			_ = reader.Collect(ctx, &rm)
			for _, m := range rm.ScopeMetrics[0].Metrics {
				if g, ok := m.Data.(metricdata.Gauge[int64]); ok && m.Name == "leaderelection.is_leader" {
					fmt.Println(m.Name, m.Unit, g.DataPoints[0].Value)
				}
			}
			stop()
			<-ctx.Done()
		},
	}.Acquire(ctx)
	// Output:
	// leaderelection.is_leader {leader} 1
}
