package leprom_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/leprom"
	"github.com/racedecider/leaderelection/memory"
)

// Register the metrics on a registry of your own (or on
// prometheus.DefaultRegisterer, explicitly) and set the Observer on every
// Config and WatchConfig of the process.
func Example() {
	reg := prometheus.NewRegistry()
	metrics, err := leprom.New(reg, leprom.Options{})
	if err != nil {
		panic(err)
	}
	scrape := promhttp.HandlerFor(reg, promhttp.HandlerOpts{}) // serve it on /metrics

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	_ = leaderelection.Config{
		Decider:      memory.NewDecider(),
		LeaderID:     "worker-1",
		TermLength:   2 * time.Second,
		MaxClockSkew: 200 * time.Millisecond,
		Observer:     metrics,
		OnElected: func(ctx context.Context, tv *leaderelection.TimeView) {
			w := httptest.NewRecorder()
			scrape.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
			lines := bufio.NewScanner(w.Body)
			for lines.Scan() {
				if l := lines.Text(); strings.HasPrefix(l, "leaderelection_is_leader") || strings.HasPrefix(l, "leaderelection_leader_info") ||
					strings.HasPrefix(l, "leaderelection_transitions_total") {
					fmt.Println(l)
				}
			}
			stop()
			<-ctx.Done()
		},
	}.Acquire(ctx)
	// Output:
	// leaderelection_is_leader{election="memory"} 1
	// leaderelection_leader_info{election="memory",leader_id="worker-1"} 1
	// leaderelection_transitions_total{election="memory",reason="elected"} 1
}
