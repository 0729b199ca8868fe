package slidechi_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/go-chi/chi/v5"
	slidechi "github.com/slidelog/slidelog/adapters/chi"
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

	r := chi.NewRouter()
	r.Use(slidechi.Middleware(l, httplimit.WithSkipFunc(httplimit.SkipPaths("/healthz"))))
	r.Get("/hello", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "hello") })
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })

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

// A per-client limit on each route: ByRoute keys by chi's pattern, so
// /users/1 and /users/2 share one budget, even with r.Use.
func Example_perRoute() {
	l, _ := slidelog.New(memstore.New(), slidelog.Policy{Name: "route", Limit: 1, Window: time.Minute})
	defer l.Close()

	r := chi.NewRouter()
	r.Use(slidechi.Middleware(l, httplimit.WithKeyFunc(httplimit.Composite(httplimit.ByRoute(), httplimit.ByClientIP()))))
	r.Get("/users/{id}", func(w http.ResponseWriter, _ *http.Request) {})
	r.Get("/teams/{id}", func(w http.ResponseWriter, _ *http.Request) {})

	for _, path := range []string{"/users/1", "/users/2", "/teams/1"} {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, req)
		fmt.Println(path, rec.Code)
	}
	// Output:
	// /users/1 200
	// /users/2 429
	// /teams/1 200
}

// Any net/http handler.
func ExampleMiddleware_netHTTP() {
	l, _ := slidelog.New(memstore.New(), slidelog.PerSecond(10))
	defer l.Close()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "hello") })
	handler := slidechi.Middleware(l)(mux)

	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/hello", nil))
	fmt.Println(rec.Code, rec.Header().Get("RateLimit-Policy"))
	// Output:
	// 200 "per-second";q=10;w=1
}
