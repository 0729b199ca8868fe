package slideechov5_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v5"
	echomw "github.com/labstack/echo/v5/middleware"
	slideechov5 "github.com/slidelog/slidelog/adapters/echov5"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
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
// the limiter, is refunded like one that answers 500 itself, and counts
// without WithRefundOnServerError.
func TestPanicRefunds(t *testing.T) {
	slidelogtest.CheckPanicRefunds(t, func(t *testing.T, store slidelog.Store, opts ...httplimit.Option) func() int {
		r := panicEcho(t, store, opts...)
		return func() int { return serve(r, "/", "192.0.2.1:1").Code }
	})
}

// A request whose client goes away while its handler runs is not refunded
// with WithRefundOnServerError, whether the handler then answers 500 or
// aborts; one whose client stays for its 500 is.
func TestNoRefundWhenClientGone(t *testing.T) {
	slidelogtest.CheckNoRefundWhenClientGone(t, func(t *testing.T, store slidelog.Store, handler func(context.Context) int, opts ...httplimit.Option) string {
		l := slidelogtest.NewLimiter(t, store, slidelog.PerMinute(2))
		r := echo.New()
		r.Use(echomw.Recover())
		r.Use(slideechov5.Middleware(l, opts...))
		r.GET("/", func(c *echo.Context) error { return c.NoContent(handler(c.Request().Context())) })
		srv := httptest.NewServer(r)
		t.Cleanup(srv.Close)
		return srv.URL
	})
}
