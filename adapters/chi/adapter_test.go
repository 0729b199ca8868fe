package slidechi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	chimw "github.com/go-chi/chi/v5/middleware"
	slidechi "github.com/slidelog/slidelog/adapters/chi"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/slidelogtest"
)

func serve(r http.Handler, path, remote string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.RemoteAddr = remote
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, req)
	return rec
}

type userKey struct{}

// A value an auth middleware put in the request context is the identity.
func TestKeyByContextValue(t *testing.T) {
	store := slidelogtest.NewCountingStore(memstore.New())
	l := slidelogtest.NewLimiter(t, store, slidelog.PerMinute(1))
	r := chi.NewRouter()
	r.Use(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u := r.URL.Query().Get("u"); u != "" {
				r = r.WithContext(context.WithValue(r.Context(), userKey{}, u))
			}
			next.ServeHTTP(w, r)
		})
	})
	r.Use(slidechi.Middleware(l, httplimit.WithKeyFunc(httplimit.FirstOf(httplimit.ByContextValue(userKey{}), httplimit.ByClientIP()))))
	r.Get("/", func(w http.ResponseWriter, _ *http.Request) {})
	for _, tt := range []struct {
		give string
		want int
	}{
		{"/?u=alice", 200}, {"/?u=alice", 429}, {"/?u=bob", 200}, {"/", 200}, {"/", 429},
	} {
		if got := serve(r, tt.give, "192.0.2.1:1").Code; got != tt.want {
			t.Errorf("GET %s: got %d, want %d", tt.give, got, tt.want)
		}
	}
	want := map[string]int{"v:26:t:slidechi_test.userKey={}:alice": 2, "v:26:t:slidechi_test.userKey={}:bob": 1, "ip:192.0.2.1": 2}
	if got := store.Identities(); len(got) != len(want) || got["v:26:t:slidechi_test.userKey={}:alice"] != 2 || got["ip:192.0.2.1"] != 2 {
		t.Errorf("identities: got %v, want %v", got, want)
	}
}

// Under r.Use, before chi has routed, ByRoute still sees the full
// pattern, through mounted sub-routers too.
func TestKeyByRouteGlobal(t *testing.T) {
	store := slidelogtest.NewCountingStore(memstore.New())
	l := slidelogtest.NewLimiter(t, store, slidelog.PerMinute(1))
	r := chi.NewRouter()
	r.Use(slidechi.Middleware(l, httplimit.WithKeyFunc(httplimit.ByRoute())))
	r.Get("/users/{id}", func(http.ResponseWriter, *http.Request) {})
	r.Route("/api", func(r chi.Router) {
		r.Get("/teams/{id}", func(http.ResponseWriter, *http.Request) {})
	})
	for _, tt := range []struct {
		give string
		want int
	}{
		{"/users/1", 200}, {"/users/2", 429}, {"/api/teams/1", 200}, {"/api/teams/2", 429}, {"/nowhere", 400},
	} {
		if got := serve(r, tt.give, "192.0.2.1:1").Code; got != tt.want {
			t.Errorf("GET %s: got %d, want %d", tt.give, got, tt.want)
		}
	}
	got := store.Identities()
	if len(got) != 2 || got["r:/users/{id}"] != 2 || got["r:/api/teams/{id}"] != 2 {
		t.Errorf("identities: got %v, want r:/users/{id} and r:/api/teams/{id} twice, none for the unrouted request", got)
	}
}

// Behind chi's own path-rewriting middleware (StripSlashes, CleanPath)
// under r.Use, chi routes on the route context's RoutePath, and so does
// ByRoute: "/users/2/" and "//users/3" are served by /users/{id} and
// spend its budget, never a 400 nor, under FirstOf, a budget of their
// own per client.
func TestKeyByRouteRewrittenPath(t *testing.T) {
	for name, rewrite := range map[string]func(http.Handler) http.Handler{"StripSlashes": chimw.StripSlashes, "CleanPath": chimw.CleanPath} {
		t.Run(name, func(t *testing.T) {
			store := slidelogtest.NewCountingStore(memstore.New())
			l := slidelogtest.NewLimiter(t, store, slidelog.PerMinute(1))
			r := chi.NewRouter()
			r.Use(rewrite)
			r.Use(slidechi.Middleware(l, httplimit.WithKeyFunc(httplimit.FirstOf(httplimit.ByRoute(), httplimit.ByClientIP()))))
			r.Get("/users/{id}", func(http.ResponseWriter, *http.Request) {})
			give := map[string]string{"StripSlashes": "/users/2/", "CleanPath": "//users/2"}[name]
			for _, tt := range []struct {
				give string
				want int
			}{{"/users/1", 200}, {give, 429}} {
				if got := serve(r, tt.give, "192.0.2.1:1").Code; got != tt.want {
					t.Errorf("GET %s: got %d, want %d", tt.give, got, tt.want)
				}
			}
			if got := store.Identities(); len(got) != 1 || got["r:/users/{id}"] != 2 {
				t.Errorf("identities: got %v, want only r:/users/{id}, twice", got)
			}
		})
	}
}

// ByRoute finds the route chi serves where the path or method chi routes
// on was rewritten in front: a HEAD routed as a GET (GetHead), and
// middleware that runs after a router has routed (r.With, a mounted
// router's r.Use) behind StripSlashes. The second request spends the
// route's budget, never one of the client's own under FirstOf.
func TestKeyByRouteRewrittenBeforeRouting(t *testing.T) {
	key := httplimit.WithKeyFunc(httplimit.FirstOf(httplimit.ByRoute(), httplimit.ByClientIP()))
	ok := func(http.ResponseWriter, *http.Request) {}
	for _, tt := range []struct {
		name   string
		router func(mw func(http.Handler) http.Handler) http.Handler
		first  string
		second string // method and path
		route  string
	}{
		{"GetHead", func(mw func(http.Handler) http.Handler) http.Handler {
			r := chi.NewRouter()
			r.Use(chimw.GetHead, mw)
			r.Get("/users/{id}", ok)
			return r
		}, "GET /users/1", "HEAD /users/2", "r:/users/{id}"},
		{"With", func(mw func(http.Handler) http.Handler) http.Handler {
			r := chi.NewRouter()
			r.Use(chimw.StripSlashes)
			r.With(mw).Get("/users/{id}", ok)
			return r
		}, "GET /users/1", "GET /users/2/", "r:/users/{id}"},
		{"Mount", func(mw func(http.Handler) http.Handler) http.Handler {
			r := chi.NewRouter()
			r.Use(chimw.StripSlashes)
			sub := chi.NewRouter()
			sub.Use(mw)
			sub.Get("/users/{id}", ok)
			r.Mount("/api", sub)
			return r
		}, "GET /api/users/1", "GET /api/users/2/", "r:/api/users/{id}"},
		{"MountWith", func(mw func(http.Handler) http.Handler) http.Handler {
			r := chi.NewRouter()
			r.Use(chimw.StripSlashes)
			r.Route("/api", func(sub chi.Router) { sub.With(mw).Get("/users/{id}", ok) })
			return r
		}, "GET /api/users/1", "GET /api/users/2/", "r:/api/users/{id}"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			store := slidelogtest.NewCountingStore(memstore.New())
			l := slidelogtest.NewLimiter(t, store, slidelog.PerMinute(1))
			h := tt.router(slidechi.Middleware(l, key))
			for _, c := range []struct {
				give string
				want int
			}{{tt.first, 200}, {tt.second, 429}} {
				method, path, _ := strings.Cut(c.give, " ")
				req := httptest.NewRequest(method, path, nil)
				req.RemoteAddr = "192.0.2.1:1"
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != c.want {
					t.Errorf("%s: got %d, want %d", c.give, rec.Code, c.want)
				}
			}
			if got := store.Identities(); len(got) != 1 || got[tt.route] != 2 {
				t.Errorf("identities: got %v, want only %s, twice", got, tt.route)
			}
		})
	}
}

// On a Go 1.22 http.ServeMux, ByRoute keys by Request.Pattern in
// middleware that wraps each handler; wrapping the whole mux, which has
// not routed yet, fails with ErrNoRoute (400), never one shared budget.
func TestKeyByRouteServeMux(t *testing.T) {
	store := slidelogtest.NewCountingStore(memstore.New())
	mw := slidechi.Middleware(slidelogtest.NewLimiter(t, store, slidelog.PerMinute(1)), httplimit.WithKeyFunc(httplimit.ByRoute()))
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	mux := http.NewServeMux()
	mux.Handle("GET /items/{id}", mw(ok))
	mux.Handle("GET /other/{id}", mw(ok))
	whole := http.NewServeMux()
	whole.Handle("GET /items/{id}", ok)
	wrapped := slidechi.Middleware(slidelogtest.NewLimiter(t, memstore.New(), slidelog.PerMinute(1)), httplimit.WithKeyFunc(httplimit.ByRoute()))(whole)
	for _, tt := range []struct {
		h    http.Handler
		give string
		want int
	}{
		{mux, "/items/1", 200}, {mux, "/items/2", 429}, {mux, "/other/1", 200}, {mux, "/other/2", 429},
		{wrapped, "/items/1", 400}, {wrapped, "/items/2", 400},
	} {
		if got := serve(tt.h, tt.give, "192.0.2.1:1").Code; got != tt.want {
			t.Errorf("GET %s: got %d, want %d", tt.give, got, tt.want)
		}
	}
	if got := store.Identities(); len(got) != 2 || got["r:GET /items/{id}"] != 2 || got["r:GET /other/{id}"] != 2 {
		t.Errorf("identities: got %v, want r:GET /items/{id} and r:GET /other/{id} twice", got)
	}
}

func TestInvalidOptionPanics(t *testing.T) {
	l := slidelogtest.NewLimiter(t, memstore.New(), slidelog.PerMinute(1))
	for name, opt := range map[string]httplimit.Option{
		"cidr":        httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: []string{"10.0.0.0/33"}}),
		"trust all":   httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: []string{"0.0.0.0/0"}}),
		"no header":   httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: []string{"10.0.0.0/8"}}),
		"header name": httplimit.WithClientIP(httplimit.ClientIP{Header: "X Real IP"}),
		"ipv6 prefix": httplimit.WithClientIP(httplimit.ClientIP{IPv6Prefix: -1}),
		"cost":        httplimit.WithCost(0),
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("Middleware did not panic")
				}
			}()
			slidechi.Middleware(l, opt)
		})
	}
	t.Run("nil limiter", func(t *testing.T) {
		defer func() {
			if recover() == nil {
				t.Error("Middleware did not panic")
			}
		}()
		slidechi.Middleware(nil)
	})
}

// A nil next handler is refused when the middleware wraps it, not on the
// first request.
func TestNilNextPanicsAtWrap(t *testing.T) {
	l := slidelogtest.NewLimiter(t, memstore.New(), slidelog.PerMinute(1))
	defer func() {
		if p, _ := recover().(string); !strings.Contains(p, "nil next handler") {
			t.Errorf("panic: got %q, want one naming the nil next handler", p)
		}
	}()
	slidechi.Middleware(l)(nil)
}

// LimitByIP limits each client IP in memory, in one statement.
func TestLimitByIP(t *testing.T) {
	r := chi.NewRouter()
	r.Use(slidechi.LimitByIP(slidelog.Policy{Name: "ip", Limit: 1, Window: time.Minute}))
	r.Get("/", func(http.ResponseWriter, *http.Request) {})
	for _, tt := range []struct {
		remote string
		want   int
	}{
		{"192.0.2.1:1", 200}, {"192.0.2.1:2", 429}, {"192.0.2.2:1", 200}, {"[2001:db8::1]:1", 200}, {"[2001:db8::2]:1", 429},
	} {
		if got := serve(r, "/", tt.remote); got.Code != tt.want {
			t.Errorf("GET / from %s: got %d, want %d", tt.remote, got.Code, tt.want)
		}
	}
}

// An invalid policy, or an option of another adapter, panics at start-up.
func TestLimitByIPPanics(t *testing.T) {
	for name, f := range map[string]func(){
		"policy": func() { slidechi.LimitByIP(slidelog.PerMinute(0)) },
		"option": func() {
			slidechi.LimitByIP(slidelog.PerMinute(1), httplimit.WithClientIP(httplimit.ClientIP{IPv6Prefix: -1}))
		},
		"foreign handler": func() { slidechi.LimitByIP(slidelog.PerMinute(1), httplimit.WithDeniedHandler(func(error) {})) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("LimitByIP did not panic")
				}
			}()
			f()
		})
	}
}
