package slidefiber_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"testing"

	"github.com/gofiber/fiber/v2"
	slidefiber "github.com/slidelog/slidelog/adapters/fiber"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/slidelogtest"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
	"github.com/valyala/fasthttp"
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

// newServer builds app with fiber: the suite's factory.
func newServer(t *testing.T, app slidelogtest.HTTPApp) slidelogtest.HTTPServe {
	f := fiber.New(fiber.Config{DisableStartupMessage: true, DisableHeaderNormalizing: app.RawHeaderNames})
	f.Use(func(c *fiber.Ctx) error { // the request's context values, as an auth middleware would set them
		if ctx, ok := c.Context().UserValue(requestContext{}).(context.Context); ok {
			c.SetUserContext(ctx)
		}
		return c.Next()
	})
	if app.Global != nil {
		f.Use(middleware(app.Global))
	}
	for _, rt := range app.Routes {
		status := rt.Status
		if status == 0 {
			status = http.StatusOK
		}
		var handlers []fiber.Handler
		if rt.Middleware != nil {
			handlers = append(handlers, middleware(rt.Middleware))
		}
		pattern := rt.Pattern
		handlers = append(handlers, func(c *fiber.Ctx) error {
			c.Set(slidelogtest.RouteHeader, pattern)
			return c.Status(status).SendString("ok")
		})
		method := rt.Method
		if method == "" {
			method = http.MethodGet
		}
		f.Add(method, rt.Pattern, handlers...)
	}
	return serve(t, f)
}

// serve calls the app's fasthttp handler directly with the request's
// RemoteAddr as the socket address. fiber's app.Test cannot set it: its
// connection always reports 0.0.0.0.
func serve(t *testing.T, app *fiber.App) slidelogtest.HTTPServe {
	handler := app.Handler()
	return func(req *http.Request) *http.Response {
		var fctx fasthttp.RequestCtx
		fr := &fasthttp.Request{}
		if app.Config().DisableHeaderNormalizing {
			fr.Header.DisableNormalizing()
		}
		fr.Header.SetMethod(req.Method)
		fr.SetRequestURI(req.URL.RequestURI())
		fr.Header.SetHost(req.Host)
		for name, vs := range req.Header {
			for _, v := range vs {
				fr.Header.Add(name, v)
			}
		}
		var peer net.Addr = rawAddr(req.RemoteAddr) // what a non-TCP listener may report
		if ap, err := netip.ParseAddrPort(req.RemoteAddr); err == nil {
			peer = net.TCPAddrFromAddrPort(ap)
		} else if a, ok := req.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && a.Network() == "unix" {
			peer = &net.UnixAddr{Name: req.RemoteAddr, Net: "unix"} // the proxy suite's backend on a Unix socket
		}
		fctx.Init(fr, peer, nil)
		fctx.SetUserValue(requestContext{}, req.Context())
		handler(&fctx)
		resp := &http.Response{
			StatusCode: fctx.Response.StatusCode(),
			Header:     make(http.Header),
			Body:       io.NopCloser(bytes.NewReader(append([]byte(nil), fctx.Response.Body()...))),
			Request:    req,
		}
		fctx.Response.Header.VisitAll(func(k, v []byte) {
			resp.Header.Add(string(k), string(v))
		})
		if ct := string(fctx.Response.Header.ContentType()); ct != "" && resp.Header.Get("Content-Type") == "" {
			resp.Header.Set("Content-Type", ct)
		}
		return resp
	}
}

// rawAddr is a socket address that is not an IP address and port.
type rawAddr string

func (a rawAddr) Network() string { return "raw" }
func (a rawAddr) String() string  { return string(a) }

// requestContext carries the suite's request context to fiber's user
// context.
type requestContext struct{}

// middleware installs the suite's middleware: its options as they are,
// and slidefiber's own handlers for DeniedBody and ErrorBody.
func middleware(m *slidelogtest.HTTPMiddleware) fiber.Handler {
	opts := append([]httplimit.Option(nil), m.Options...)
	if m.DeniedBody != "" {
		opts = append(opts, slidefiber.WithDeniedHandler(func(c *fiber.Ctx, _ slidelog.Result) error {
			return c.Status(http.StatusTooManyRequests).SendString(m.DeniedBody)
		}))
	}
	if m.ErrorBody != "" {
		opts = append(opts, slidefiber.WithErrorHandler(func(c *fiber.Ctx, _ error) error {
			return c.Status(http.StatusServiceUnavailable).SendString(m.ErrorBody)
		}))
	}
	return slidefiber.Middleware(m.Limiter, opts...)
}

// FuzzMiddleware: no request, however crafted, panics the middleware or
// gets a 5xx.
func FuzzMiddleware(f *testing.F) { slidelogtest.FuzzHTTP(f, newServer) }
