package httplimit_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/memstore"
)

// An Engine is what the framework adapters (slidegin, slideecho,
// slidechi, slidefiber, slidegrpc) are built on: an adapter presents a
// request as a Source, sets the decision's header fields, and either
// calls the handler and then Finish, or writes the denial or error
// response.
func ExampleEngine() {
	store := memstore.New()
	defer store.Close()
	l, _ := slidelog.New(store, slidelog.Policy{Name: "api", Limit: 1, Window: time.Minute})
	e, err := httplimit.New(l,
		httplimit.WithKeyFunc(httplimit.Composite(httplimit.ByRoute(), httplimit.ByClientIP())),
		httplimit.WithTrustedProxies("10.0.0.0/8"), httplimit.WithClientIPHeader("X-Forwarded-For"))
	if err != nil {
		panic(err)
	}
	for range 2 {
		req := httptest.NewRequest(http.MethodGet, "/users/7", nil)
		req.RemoteAddr = "10.0.0.1:5000" // a trusted proxy ...
		req.Header.Set("X-Forwarded-For", "203.0.113.9, 10.0.0.2")
		d := e.Check(exampleSource{req})
		fmt.Println(d.Outcome)
		for _, f := range d.Header {
			fmt.Printf("  %s: %s\n", f.Name, f.Value)
		}
		if d.Outcome == httplimit.OutcomeDenied {
			fmt.Printf("  %s\n", httplimit.DeniedProblem(d.Result).JSON())
		}
	}
	// Output:
	// next
	//   RateLimit-Policy: "api";q=1;w=60
	//   RateLimit: "api";r=0;t=60
	// denied
	//   RateLimit-Policy: "api";q=1;w=60
	//   RateLimit: "api";r=0;t=60
	//   Retry-After: 60
	//   {"type":"https://github.com/slidelog/slidelog/blob/main/docs/problems.md#rate-limited","title":"Too Many Requests","status":429,"detail":"Rate limit exceeded; retry after 60 seconds.","violated-policies":["api"]}
}

// exampleSource presents a net/http request whose route is /users/{id}.
type exampleSource struct{ r *http.Request }

func (s exampleSource) Context() context.Context    { return s.r.Context() }
func (s exampleSource) Method() string              { return s.r.Method }
func (s exampleSource) Path() string                { return s.r.URL.Path }
func (s exampleSource) Route() string               { return "/users/{id}" }
func (s exampleSource) Header(name string) []string { return s.r.Header.Values(name) }
func (s exampleSource) RemoteAddr() string          { return s.r.RemoteAddr }
func (s exampleSource) Value(key any) any           { return s.r.Context().Value(key) }
func (s exampleSource) Native() any                 { return s.r }
