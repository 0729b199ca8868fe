// Command fiber serves GET /hello limited per client IP with slidefiber,
// and GET /healthz and GET /metrics unlimited.
//
//	go run ./fiber -addr :8080 -limit 10 -window 1m
//
// SLIDELOG_REDIS_ADDRS selects Redis (one address) or a Redis Cluster
// (several, comma-separated); unset, the memory store.
package main

import (
	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	slidefiber "github.com/slidelog/slidelog/adapters/fiber"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/examples/internal/setup"
)

func main() {
	app := setup.Start("fiber")

	f := fiber.New(fiber.Config{DisableStartupMessage: true}) // no ProxyHeader: c.IP() is the socket address, as for the limiter
	f.Use(slidefiber.Middleware(app.Limiter, httplimit.WithSkipFunc(setup.Skip)))
	f.Get(setup.PathHello, func(c *fiber.Ctx) error { return c.SendString("hello\n") })
	f.Get(setup.PathHealthz, func(c *fiber.Ctx) error { return c.SendString("ok\n") })
	f.Get(setup.PathMetrics, adaptor.HTTPHandler(app.Metrics))

	app.Serve(f.Listener, f.ShutdownWithContext)
}
