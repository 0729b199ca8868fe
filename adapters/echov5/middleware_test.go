package slideechov5_test

import (
	"net/http"
	"testing"

	"github.com/labstack/echo/v5"
	slideechov5 "github.com/slidelog/slidelog/adapters/echov5"
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

// newServer builds app with echo: the suite's factory.
func newServer(_ *testing.T, app slidelogtest.HTTPApp) slidelogtest.HTTPServe {
	e := echo.New()
	if app.Global != nil {
		e.Use(middleware(app.Global))
	}
	for _, rt := range app.Routes {
		status := rt.Status
		if status == 0 {
			status = http.StatusOK
		}
		var mws []echo.MiddlewareFunc
		if rt.Middleware != nil {
			mws = append(mws, middleware(rt.Middleware))
		}
		method := rt.Method
		if method == "" {
			method = http.MethodGet
		}
		pattern := rt.Pattern
		e.Add(method, rt.Pattern, func(c *echo.Context) error {
			c.Response().Header().Set(slidelogtest.RouteHeader, pattern)
			return c.String(status, "ok")
		}, mws...)
	}
	return slidelogtest.ServeHandler(e)
}

// middleware installs the suite's middleware: its options as they are,
// and slideechov5's own handlers for DeniedBody and ErrorBody.
func middleware(m *slidelogtest.HTTPMiddleware) echo.MiddlewareFunc {
	opts := append([]httplimit.Option(nil), m.Options...)
	if m.DeniedBody != "" {
		opts = append(opts, slideechov5.WithDeniedHandler(func(c *echo.Context, _ slidelog.Result) error {
			return c.String(http.StatusTooManyRequests, m.DeniedBody)
		}))
	}
	if m.ErrorBody != "" {
		opts = append(opts, slideechov5.WithErrorHandler(func(c *echo.Context, _ error) error {
			return c.String(http.StatusServiceUnavailable, m.ErrorBody)
		}))
	}
	return slideechov5.Middleware(m.Limiter, opts...)
}

// FuzzMiddleware: no request, however crafted, panics the middleware or
// gets a 5xx.
func FuzzMiddleware(f *testing.F) { slidelogtest.FuzzHTTP(f, newServer) }
