package slidegin_test

import (
	"io"
	"net/http"
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
