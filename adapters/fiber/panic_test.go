package slidefiber_test

import (
	"net/http"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/recover"
	slidefiber "github.com/slidelog/slidelog/adapters/fiber"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/memstore"
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
// the limiter, is refunded like one that answers 500 itself.
func TestRefundOnPanic(t *testing.T) {
	store := slidelogtest.NewCountingStore(memstore.New())
	app := panicApp(t, store, httplimit.WithRefundOnServerError())
	for i := range 4 {
		if got := serveApp(t, app, "/").Code; got != http.StatusInternalServerError {
			t.Errorf("request %d: got %d, want 500", i+1, got)
		}
	}
	if n := store.Refunds(); n != 4 {
		t.Errorf("refunds: got %d, want 4", n)
	}
}

// Without WithRefundOnServerError, a handler that panics still counts.
func TestPanicCountsWithoutRefund(t *testing.T) {
	store := slidelogtest.NewCountingStore(memstore.New())
	app := panicApp(t, store)
	for i, want := range []int{500, 500, 429, 429} {
		if got := serveApp(t, app, "/").Code; got != want {
			t.Errorf("request %d: got %d, want %d", i+1, got, want)
		}
	}
	if n := store.Refunds(); n != 0 {
		t.Errorf("refunds: got %d, want 0", n)
	}
}
