package slideechov5_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/labstack/echo/v5"
	slideechov5 "github.com/slidelog/slidelog/adapters/echov5"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/memstore"
)

// Limit GET /hello to 2 requests per minute per client IP; /healthz is
// never limited.
func Example() {
	l, err := slidelog.New(memstore.New(), slidelog.Policy{Name: "hello", Limit: 2, Window: time.Minute})
	if err != nil {
		panic(err)
	}
	defer l.Close()

	e := echo.New()
	e.Use(slideechov5.Middleware(l, httplimit.WithSkipFunc(httplimit.SkipPaths("/healthz"))))
	e.GET("/hello", func(c *echo.Context) error { return c.String(http.StatusOK, "hello") })
	e.GET("/healthz", func(c *echo.Context) error { return c.NoContent(http.StatusNoContent) })

	for range 3 {
		req := httptest.NewRequest(http.MethodGet, "/hello", nil)
		req.RemoteAddr = "192.0.2.1:1234"
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		fmt.Printf("%d RateLimit: %s Retry-After: %q\n", rec.Code, rec.Header().Get("RateLimit"), rec.Header().Get("Retry-After"))
	}
	// Output:
	// 200 RateLimit: "hello";r=1;t=60 Retry-After: ""
	// 200 RateLimit: "hello";r=0;t=60 Retry-After: ""
	// 429 RateLimit: "hello";r=0;t=60 Retry-After: "60"
}

// Behind a load balancer at 10.0.0.0/8: trust its X-Forwarded-For, and
// give echo the same range so that c.RealIP() agrees with the limiter.
func Example_trustedProxy() {
	l, _ := slidelog.New(memstore.New(), slidelog.PerMinute(100))
	defer l.Close()

	_, lb, _ := net.ParseCIDR("10.0.0.0/8")
	e := echo.New()
	e.IPExtractor = echo.ExtractIPFromXFFHeader(echo.TrustIPRange(lb))
	e.Use(slideechov5.Middleware(l, httplimit.WithClientIP(httplimit.ClientIP{
		TrustedProxies: []string{"10.0.0.0/8"},
		Header:         "X-Forwarded-For",
	})))
	e.GET("/hello", func(c *echo.Context) error { return c.String(http.StatusOK, c.RealIP()) })

	req := httptest.NewRequest(http.MethodGet, "/hello", nil)
	req.RemoteAddr = "10.1.2.3:5555"
	req.Header.Set("X-Forwarded-For", "203.0.113.9")
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	fmt.Println(rec.Code, rec.Body.String())
	// Output:
	// 200 203.0.113.9
}
