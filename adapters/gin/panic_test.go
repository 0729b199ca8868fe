package slidegin_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
	slidegin "github.com/slidelog/slidelog/adapters/gin"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/slidelogtest"
)

// panicEngine is an engine whose handler panics, behind gin's recovery
// middleware and the limiter (at two a minute) with opts.
func panicEngine(t *testing.T, store slidelog.Store, opts ...httplimit.Option) http.Handler {
	t.Helper()
	l := slidelogtest.NewLimiter(t, store, slidelog.PerMinute(2))
	r := gin.New()
	r.Use(gin.RecoveryWithWriter(io.Discard))
	r.Use(slidegin.Middleware(l, opts...))
	r.GET("/", func(*gin.Context) { panic("handler failed") })
	return r
}

// A handler that panics, answered 500 by the recovery middleware outside
// the limiter, is refunded like one that answers 500 itself, and counts
// without WithRefundOnServerError.
func TestPanicRefunds(t *testing.T) {
	slidelogtest.CheckPanicRefunds(t, func(t *testing.T, store slidelog.Store, opts ...httplimit.Option) func() int {
		r := panicEngine(t, store, opts...)
		return func() int { return serve(r, "/", "192.0.2.1:1").Code }
	})
}

// A request whose client goes away while its handler runs is not refunded
// with WithRefundOnServerError, whether the handler then answers 500 or
// aborts; one whose client stays for its 500 is.
func TestNoRefundWhenClientGone(t *testing.T) {
	slidelogtest.CheckNoRefundWhenClientGone(t, func(t *testing.T, store slidelog.Store, handler func(context.Context) int, opts ...httplimit.Option) string {
		l := slidelogtest.NewLimiter(t, store, slidelog.PerMinute(2))
		r := gin.New()
		r.Use(gin.RecoveryWithWriter(io.Discard))
		r.Use(slidegin.Middleware(l, opts...))
		r.GET("/", func(c *gin.Context) { c.Status(handler(c.Request.Context())) })
		srv := httptest.NewServer(r)
		t.Cleanup(srv.Close)
		return srv.URL
	})
}
