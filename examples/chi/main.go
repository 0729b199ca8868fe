// Command chi serves GET /hello limited per client IP with slidechi, and
// GET /healthz and GET /metrics unlimited.
//
//	go run ./chi -addr :8080 -limit 10 -window 1m
//
// SLIDELOG_REDIS_ADDRS selects Redis (one address) or a Redis Cluster
// (several, comma-separated); unset, the memory store.
package main

import (
	"net/http"

	"github.com/go-chi/chi/v5"
	slidechi "github.com/slidelog/slidelog/adapters/chi"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/examples/internal/setup"
)

func main() {
	app := setup.Start("chi")

	r := chi.NewRouter()
	r.Use(slidechi.Middleware(app.Limiter, httplimit.WithSkipFunc(setup.Skip)))
	r.Get(setup.PathHello, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("hello\n")) })
	r.Get(setup.PathHealthz, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	r.Method(http.MethodGet, setup.PathMetrics, app.Metrics)

	app.ServeHTTP(r)
}
