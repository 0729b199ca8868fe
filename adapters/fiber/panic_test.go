package slidefiber_test

import (
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/recover"
	slidefiber "github.com/slidelog/slidelog/adapters/fiber"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/slidelogtest"
)

// panicApp is an app whose handler panics, behind fiber's recovery
// middleware and the limiter (at two a minute) with opts.
func panicApp(t *testing.T, store slidelog.Store, opts ...httplimit.Option) *fiber.App {
	t.Helper()
	l := slidelogtest.NewLimiter(t, store, slidelog.PerMinute(2))
	app := fiber.New()
	app.Use(recover.New())
	app.Use(slidefiber.Middleware(l, opts...))
	app.Get("/", func(*fiber.Ctx) error { panic("handler failed") })
	return app
}

// A handler that panics, answered 500 by the recovery middleware outside
// the limiter, is refunded like one that answers 500 itself, and counts
// without WithRefundOnServerError.
func TestPanicRefunds(t *testing.T) {
	slidelogtest.CheckPanicRefunds(t, func(t *testing.T, store slidelog.Store, opts ...httplimit.Option) func() int {
		app := panicApp(t, store, opts...)
		return func() int { return serveApp(t, app, "/").Code }
	})
}
