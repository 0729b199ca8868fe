package slideechov5_test

import (
	"net/http"
	"testing"

	"github.com/labstack/echo/v5"
	echomw "github.com/labstack/echo/v5/middleware"
	slideechov5 "github.com/slidelog/slidelog/adapters/echov5"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/slidelogtest"
)

// panicEcho is an echo whose handler panics, behind echo's recovery
// middleware and the limiter (at two a minute) with opts.
func panicEcho(t *testing.T, store slidelog.Store, opts ...httplimit.Option) http.Handler {
	t.Helper()
	l := slidelogtest.NewLimiter(t, store, slidelog.PerMinute(2))
	r := echo.New()
	r.Use(echomw.Recover())
	r.Use(slideechov5.Middleware(l, opts...))
	r.GET("/", func(*echo.Context) error { panic("handler failed") })
	return r
}

// A handler that panics, answered 500 by the recovery middleware outside
// the limiter, is refunded like one that answers 500 itself.
func TestRefundOnPanic(t *testing.T) {
	store := slidelogtest.NewCountingStore(memstore.New())
	r := panicEcho(t, store, httplimit.WithRefundOnServerError())
	for i := range 4 {
		if got := serve(r, "/", "192.0.2.1:1").Code; got != http.StatusInternalServerError {
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
	r := panicEcho(t, store)
	for i, want := range []int{500, 500, 429, 429} {
		if got := serve(r, "/", "192.0.2.1:1").Code; got != want {
			t.Errorf("request %d: got %d, want %d", i+1, got, want)
		}
	}
	if n := store.Refunds(); n != 0 {
		t.Errorf("refunds: got %d, want 0", n)
	}
}
