// Command echov5 serves GET /hello limited per client IP with slideechov5
// (echo v5), and GET /healthz and GET /metrics unlimited.
//
//	go run ./echov5 -addr :8080 -limit 10 -window 1m
//
// SLIDELOG_REDIS_ADDRS selects Redis (one address) or a Redis Cluster
// (several, comma-separated); unset, the memory store.
package main

import (
	"net/http"

	"github.com/labstack/echo/v5"
	slideechov5 "github.com/slidelog/slidelog/adapters/echov5"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/examples/internal/setup"
)

func main() {
	app := setup.Start("echov5")

	e := echo.New()
	e.IPExtractor = echo.ExtractIPDirect() // no proxy: c.RealIP() is the socket address, as for the limiter
	e.Use(slideechov5.Middleware(app.Limiter, httplimit.WithSkipFunc(setup.Skip)))
	e.GET(setup.PathHello, func(c *echo.Context) error { return c.String(http.StatusOK, "hello\n") })
	e.GET(setup.PathHealthz, func(c *echo.Context) error { return c.String(http.StatusOK, "ok\n") })
	e.GET(setup.PathMetrics, echo.WrapHandler(app.Metrics))

	app.ServeHTTP(e)
}
