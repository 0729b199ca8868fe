// Command echo serves GET /hello limited per client IP with slideecho,
// and GET /healthz and GET /metrics unlimited.
//
//	go run ./echo -addr :8080 -limit 10 -window 1m
//
// SLIDELOG_REDIS_ADDRS selects Redis (one address) or a Redis Cluster
// (several, comma-separated); unset, the memory store.
package main

import (
	"net/http"

	"github.com/labstack/echo/v4"
	slideecho "github.com/slidelog/slidelog/adapters/echo"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/examples/internal/setup"
)

func main() {
	app := setup.Start("echo")

	e := echo.New()
	e.IPExtractor = echo.ExtractIPDirect() // no proxy: c.RealIP() is the socket address, as for the limiter
	e.Use(slideecho.Middleware(app.Limiter, httplimit.WithSkipFunc(setup.Skip)))
	e.GET(setup.PathHello, func(c echo.Context) error { return c.String(http.StatusOK, "hello\n") })
	e.GET(setup.PathHealthz, func(c echo.Context) error { return c.String(http.StatusOK, "ok\n") })
	e.GET(setup.PathMetrics, echo.WrapHandler(app.Metrics))

	app.ServeHTTP(e)
}
