package httplimit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/memstore"
)

// An Engine is what the framework adapters (slidegin, slideecho,
// slidechi, slidefiber, slidegrpc) are built on: an adapter presents a
// request as an Incoming, sets the decision's header fields, and either
// calls the handler and then Finish, or writes the denial or error
// response.
func ExampleEngine() {
	store := memstore.New()
	defer store.Close()
	l, _ := slidelog.New(store, slidelog.Policy{Name: "api", Limit: 1, Window: time.Minute})
	e, err := httplimit.New(l,
		httplimit.WithKeyFunc(httplimit.Composite(httplimit.ByRoute(), httplimit.ByClientIP())),
		httplimit.WithClientIP(httplimit.ClientIP{
			TrustedProxies: []string{"10.0.0.0/8"}, // the proxies
			Header:         "X-Forwarded-For",      // the one header they write
		}))
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

// A login endpoint limits attempts per username, which is in the request's
// body: the handler decides on its own and answers as the middleware
// would, with the same header fields and 429.
func ExampleWriteDenied() {
	store := memstore.New()
	defer store.Close()
	logins, err := slidelog.New(store, slidelog.Policy{Name: "logins", Limit: 2, Window: 15 * time.Minute}, slidelog.WithName("login"))
	if err != nil {
		panic(err)
	}
	defer logins.Close()

	login := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Username, Password string }
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&body); err != nil || body.Username == "" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		res, err := logins.Allow(r.Context(), "user:"+strings.ToLower(body.Username))
		if err != nil {
			httplimit.WriteError(w, err) // 400 for a username too long, 503 when no decision was made
			return
		}
		httplimit.SetHeader(w.Header(), httplimit.HeaderFields(httplimit.HeadersIETF, res))
		if !res.Allowed {
			httplimit.WriteDenied(w, res)
			return
		}
		// ... check the password ...
		http.Error(w, "wrong password", http.StatusUnauthorized)
	})

	for _, name := range []string{"ada", "Ada", "ADA", "bob"} {
		rec := httptest.NewRecorder()
		login.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/login", strings.NewReader(`{"username":"`+name+`","password":"x"}`)))
		fmt.Printf("%s %d RateLimit: %s Retry-After: %q\n", name, rec.Code, rec.Header().Get("RateLimit"), rec.Header().Get("Retry-After"))
		if rec.Code == http.StatusTooManyRequests {
			fmt.Println(rec.Header().Get("Content-Type"), strings.TrimSpace(rec.Body.String()))
		}
	}
	// Output:
	// ada 401 RateLimit: "logins";r=1;t=900 Retry-After: ""
	// Ada 401 RateLimit: "logins";r=0;t=900 Retry-After: ""
	// ADA 429 RateLimit: "logins";r=0;t=900 Retry-After: "900"
	// application/problem+json {"type":"https://github.com/slidelog/slidelog/blob/main/docs/problems.md#rate-limited","title":"Too Many Requests","status":429,"detail":"Rate limit exceeded; retry after 900 seconds.","violated-policies":["logins"]}
	// bob 401 RateLimit: "logins";r=1;t=900 Retry-After: ""
}

// Behind proxies, one ClientIP says who the client is: here an nginx at
// 10.0.0.5 that appends the address it saw to X-Forwarded-For. The client
// is the rightmost address of that header that is not a trusted proxy,
// whatever the client wrote before it; a peer that is not a trusted proxy
// is keyed by its own address, whatever headers it sends.
func ExampleClientIP() {
	store := memstore.New()
	defer store.Close()
	l, _ := slidelog.New(store, slidelog.PerMinute(100))
	e, err := httplimit.New(l,
		httplimit.WithClientIP(httplimit.ClientIP{
			TrustedProxies: []string{"10.0.0.5"},
			Header:         "X-Forwarded-For",
		}),
		httplimit.WithKeyFunc(func(r *httplimit.Request) (string, error) {
			k, err := httplimit.ByClientIP()(r)
			fmt.Println(r.RemoteAddr(), r.HeaderValue("X-Forwarded-For"), "->", k)
			return k, err
		}))
	if err != nil {
		panic(err)
	}
	for _, peer := range []string{"10.0.0.5:40000", "198.51.100.7:40000"} {
		req := httptest.NewRequest(http.MethodGet, "/users/7", nil)
		req.RemoteAddr = peer
		req.Header.Set("X-Forwarded-For", "192.0.2.66, 203.0.113.9") // the client wrote 192.0.2.66
		e.Check(exampleSource{req})
	}
	_, err = httplimit.New(l, httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: []string{"10.0.0.5"}}))
	fmt.Println(err)
	// Output:
	// 10.0.0.5:40000 192.0.2.66, 203.0.113.9 -> ip:203.0.113.9
	// 198.51.100.7:40000 192.0.2.66, 203.0.113.9 -> ip:198.51.100.7
	// slidelog: invalid option: ClientIP: a trusted proxy but no Header: name the one header your proxy writes
}
