package slidegin_test

import (
	"net/http"
	"testing"

	"github.com/gin-gonic/gin"
	slidegin "github.com/slidelog/slidelog/adapters/gin"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/slidelogtest"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
)

func TestHTTPSuiteMemory(t *testing.T) {
	slidelogtest.RunHTTPSuite(t, slidelogtest.MemoryStores(), newServer)
}

func TestHTTPSuiteCluster(t *testing.T) {
	slidelogtest.RunHTTPSuite(t, redistest.ClusterStores(t), newServer)
}

// TestProxySuite runs the app behind real nginx and HAProxy, attacked
// from another loopback address.
func TestProxySuite(t *testing.T) {
	slidelogtest.RunProxySuite(t, newServer)
}

// newServer builds app with gin: the suite's factory.
func newServer(_ *testing.T, app slidelogtest.HTTPApp) slidelogtest.HTTPServe {
	r := gin.New()
	if app.Global != nil {
		r.Use(middleware(app.Global))
	}
	for _, rt := range app.Routes {
		status := rt.Status
		if status == 0 {
			status = http.StatusOK
		}
		var handlers []gin.HandlerFunc
		if rt.Middleware != nil {
			handlers = append(handlers, middleware(rt.Middleware))
		}
		pattern := rt.Pattern
		handlers = append(handlers, func(c *gin.Context) {
			c.Header(slidelogtest.RouteHeader, pattern)
			c.String(status, "ok")
		})
		method := rt.Method
		if method == "" {
			method = http.MethodGet
		}
		r.Handle(method, rt.Pattern, handlers...)
	}
	return slidelogtest.ServeHandler(r)
}

// middleware installs the suite's middleware: its options as they are,
// and slidegin's own handlers for DeniedBody and ErrorBody.
func middleware(m *slidelogtest.HTTPMiddleware) gin.HandlerFunc {
	opts := append([]httplimit.Option(nil), m.Options...)
	if m.DeniedBody != "" {
		opts = append(opts, slidegin.WithDeniedHandler(func(c *gin.Context, _ slidelog.Result) {
			c.String(http.StatusTooManyRequests, m.DeniedBody)
		}))
	}
	if m.ErrorBody != "" {
		opts = append(opts, slidegin.WithErrorHandler(func(c *gin.Context, _ error) {
			c.String(http.StatusServiceUnavailable, m.ErrorBody)
		}))
	}
	return slidegin.Middleware(m.Limiter, opts...)
}

func TestMain(m *testing.M) {
	gin.SetMode(gin.TestMode)
	m.Run()
}

// FuzzMiddleware: no request, however crafted, panics the middleware or
// gets a 5xx.
func FuzzMiddleware(f *testing.F) { slidelogtest.FuzzHTTP(f, newServer) }
