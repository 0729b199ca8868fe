package slidefiber_test

import (
	"context"
	"net"
	"testing"
	"time"

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

// A request whose client goes away while its handler runs is not refunded
// with WithRefundOnServerError, whether the handler then answers 500 or
// aborts; one whose client stays for its 500 is. fasthttp does not tell a
// handler that its client has gone (the user context is
// context.Background() unless the application sets one), so here a
// middleware outside the limiter gives each request a deadline of
// clientDeadline, as an application does to bound its handlers: the
// handler sees it pass after the client has gone, and the request, whose
// context as the limiter received it is then past its deadline, counts.
func TestNoRefundWhenClientGone(t *testing.T) {
	const clientDeadline = 100 * time.Millisecond
	slidelogtest.CheckNoRefundWhenClientGone(t, func(t *testing.T, store slidelog.Store, handler func(context.Context) int, opts ...httplimit.Option) string {
		l := slidelogtest.NewLimiter(t, store, slidelog.PerMinute(2))
		app := fiber.New(fiber.Config{DisableStartupMessage: true})
		app.Use(recover.New())
		app.Use(func(c *fiber.Ctx) error {
			ctx, cancel := context.WithTimeout(c.UserContext(), clientDeadline)
			defer cancel()
			c.SetUserContext(ctx)
			return c.Next()
		})
		app.Use(slidefiber.Middleware(l, opts...))
		app.Get("/", func(c *fiber.Ctx) error { return c.SendStatus(handler(c.UserContext())) })
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { defer close(done); _ = app.Listener(ln) }()
		t.Cleanup(func() { _ = app.Shutdown(); <-done })
		return "http://" + ln.Addr().String()
	})
}
