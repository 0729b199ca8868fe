package slidegin_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/gin-gonic/gin"
	slidegin "github.com/slidelog/slidelog/adapters/gin"
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

	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(slidegin.Middleware(l, httplimit.WithSkipFunc(httplimit.SkipPaths("/healthz"))))
	r.GET("/hello", func(c *gin.Context) { c.String(http.StatusOK, "hello") })
	r.GET("/healthz", func(c *gin.Context) { c.Status(http.StatusNoContent) })

	for range 3 {
		req := httptest.NewRequest(http.MethodGet, "/hello", nil)
		req.RemoteAddr = "192.0.2.1:1234"
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, req)
		fmt.Printf("%d RateLimit: %s Retry-After: %q\n", rec.Code, rec.Header().Get("RateLimit"), rec.Header().Get("Retry-After"))
	}
	// Output:
	// 200 RateLimit: "hello";r=1;t=60 Retry-After: ""
	// 200 RateLimit: "hello";r=0;t=60 Retry-After: ""
	// 429 RateLimit: "hello";r=0;t=60 Retry-After: "60"
}

// Different limits on different routes, a heavy endpoint costing 5 units,
// and a per-account limit for signed-in users that falls back to the
// client IP.
func Example_perRoute() {
	store := memstore.New()
	defer store.Close()
	api, _ := slidelog.New(store, slidelog.PerMinute(100))
	search, _ := slidelog.New(store, slidelog.Policy{Name: "search", Limit: 20, Window: time.Minute})

	type accountKey struct{} // set by your auth middleware after verifying the token
	byAccount := httplimit.FirstOf(httplimit.ByContextValue(accountKey{}), httplimit.ByClientIP())

	r := gin.New()
	v1 := r.Group("/v1", slidegin.Middleware(api, httplimit.WithKeyFunc(byAccount)))
	v1.GET("/search", slidegin.Middleware(search, httplimit.WithCost(5)), func(c *gin.Context) { c.String(http.StatusOK, "results") })

	req := httptest.NewRequest(http.MethodGet, "/v1/search", nil)
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, req)
	fmt.Println(rec.Code, rec.Header().Values("RateLimit"))
	// Output:
	// 200 ["per-minute";r=99;t=60 "search";r=15;t=60]
}
