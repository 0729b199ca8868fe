package slidechi_test

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
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
	slidelogtest.CheckInvalidOptions(t, "slidechi: ", func(l *slidelog.Limiter, opts ...httplimit.Option) { slidechi.Middleware(l, opts...) })
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

// rawGet sends method and path to srv as written (no cleaning by a
// client) and returns the status.
func rawGet(t *testing.T, srv *httptest.Server, method, path string) int {
	t.Helper()
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", method, path); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: method})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// Behind a rewrite at the root router (StripSlashes, CleanPath, GetHead,
// or middleware of its own setting RoutePath), a limiter in a mounted
// router (its r.Use, r.Group's r.Use or r.With inside it, r.Group's
// r.Use in front of r.Route or r.Mount, or r.With in front of a router
// mounted with a trailing slash, Mount("/api/", ...)) keys each request
// by the route chi serves it from. Before, once routed it looked up the path as received first,
// which the router's catch-all "/*" (or the root's) matched: GET
// /api/users/2/ was served by /users/{id} and spent r:/api/* (and
// //api/users/2 spent r:/*), a budget of the client's choosing.
func TestKeyByRouteSubRouterBehindRewrite(t *testing.T) {
	ok := func(http.ResponseWriter, *http.Request) {}
	lower := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rctx := chi.RouteContext(r.Context())
			rctx.RoutePath = strings.ToLower(r.URL.Path)
			next.ServeHTTP(w, r)
		})
	}
	routes := func(s chi.Router) {
		s.Get("/users/{id}", ok)
		s.Get("/*", ok)
	}
	type mw = func(http.Handler) http.Handler
	for _, place := range []struct {
		name  string
		build func(root chi.Router, limit mw)
	}{
		{"Use", func(root chi.Router, limit mw) {
			root.Route("/api", func(s chi.Router) { s.Use(limit); routes(s) })
		}},
		{"Mount", func(root chi.Router, limit mw) {
			s := chi.NewRouter()
			s.Use(limit)
			routes(s)
			root.Mount("/api", s)
		}},
		{"Group", func(root chi.Router, limit mw) {
			root.Route("/api", func(s chi.Router) { s.Group(func(g chi.Router) { g.Use(limit); routes(g) }) })
		}},
		{"With", func(root chi.Router, limit mw) {
			root.Route("/api", func(s chi.Router) { routes(s.With(limit)) })
		}},
		{"GroupRoute", func(root chi.Router, limit mw) {
			root.Group(func(g chi.Router) { g.Use(limit); g.Route("/api", routes) })
		}},
		{"MountSlash", func(root chi.Router, limit mw) {
			s := chi.NewRouter()
			s.Use(limit)
			routes(s)
			root.Mount("/api/", s)
		}},
		{"WithMountSlash", func(root chi.Router, limit mw) {
			s := chi.NewRouter()
			routes(s)
			root.With(limit).Mount("/api/", s)
		}},
		{"GroupMount", func(root chi.Router, limit mw) {
			s := chi.NewRouter()
			routes(s)
			root.Group(func(g chi.Router) { g.Use(limit); g.Mount("/api", s) })
		}},
		{"Nested", func(root chi.Router, limit mw) {
			root.Route("/api", func(s chi.Router) {
				s.Get("/*", ok)
				s.Route("/v", func(v chi.Router) { v.Use(limit); routes(v) })
			})
		}},
	} {
		for _, rw := range []struct {
			name     string
			mws      []mw
			variants []string
		}{
			{"StripSlashes", []mw{chimw.StripSlashes}, []string{"GET {api}/users/2/"}},
			{"CleanPath", []mw{chimw.CleanPath}, []string{"GET {api}//users/2", "GET {api}/./users/2", "GET {api}/x/../users/2", "GET /{api}/users/2"}},
			{"GetHead", []mw{chimw.GetHead, chimw.StripSlashes}, []string{"HEAD {api}/users/2/"}},
			{"Lower", []mw{lower}, []string{"GET {API}/Users/2", "GET {api}/USERS/2"}},
		} {
			for _, variant := range rw.variants {
				t.Run(place.name+"/"+rw.name+"/"+variant, func(t *testing.T) {
					api := "/api"
					if place.name == "Nested" {
						api = "/api/v"
					}
					store := slidelogtest.NewCountingStore(memstore.New())
					l := slidelogtest.NewLimiter(t, store, slidelog.PerMinute(1))
					root := chi.NewRouter()
					root.Use(rw.mws...)
					root.Get("/*", ok)
					place.build(root, slidechi.Middleware(l, httplimit.WithKeyFunc(httplimit.FirstOf(httplimit.ByRoute(), httplimit.ByClientIP()))))
					srv := httptest.NewServer(root)
					defer srv.Close()
					second := strings.NewReplacer("{api}", api, "{API}", strings.ToUpper(api)).Replace(variant)
					method, path, _ := strings.Cut(second, " ")
					if got := rawGet(t, srv, "GET", api+"/users/1"); got != 200 {
						t.Fatalf("GET %s/users/1: got %d, want 200", api, got)
					}
					if got := rawGet(t, srv, method, path); got != 429 {
						t.Errorf("%s %s: got %d, want 429", method, path, got)
					}
					want := "r:" + api + "/users/{id}"
					if got := store.Identities(); len(got) != 1 || got[want] != 2 {
						t.Errorf("identities: got %v, want only %s, twice", got, want)
					}
				})
			}
		}
	}
}

// A router mounted at "/api" is reached by "/api", "/api/" and "/api/..."
// (Mount's stubs and its "/*"); under a limiter inside it, each is keyed
// by the route it serves, so its catch-all is one budget.
func TestKeyByRouteSubRouterStubs(t *testing.T) {
	ok := func(http.ResponseWriter, *http.Request) {}
	store := slidelogtest.NewCountingStore(memstore.New())
	l := slidelogtest.NewLimiter(t, store, slidelog.PerMinute(1))
	root := chi.NewRouter()
	root.Route("/api", func(s chi.Router) {
		s.Use(slidechi.Middleware(l, httplimit.WithKeyFunc(httplimit.ByRoute())))
		s.Get("/*", ok)
	})
	srv := httptest.NewServer(root)
	defer srv.Close()
	for i, path := range []string{"/api/x", "/api", "/api/"} {
		want := 429
		if i == 0 {
			want = 200
		}
		if got := rawGet(t, srv, "GET", path); got != want {
			t.Errorf("GET %s: got %d, want %d", path, got, want)
		}
	}
	if got := store.Identities(); len(got) != 1 || got["r:/api/*"] == 0 {
		t.Errorf("identities: got %v, want only r:/api/*", got)
	}
}

// A limiter on the root router keys a mounted router's stubs ("/api",
// "/api/", and "/api/v1", "/api/v1/" one level down) by the route that
// router serves "/" with, as a limiter inside it does: a client cannot
// take the stubs' budgets besides the route's.
func TestKeyByRouteRootStubs(t *testing.T) {
	ok := func(http.ResponseWriter, *http.Request) {}
	store := slidelogtest.NewCountingStore(memstore.New())
	l := slidelogtest.NewLimiter(t, store, slidelog.PerMinute(1))
	root := chi.NewRouter()
	root.Use(slidechi.Middleware(l, httplimit.WithKeyFunc(httplimit.ByRoute())))
	root.Route("/api", func(s chi.Router) {
		s.Get("/", ok)
		s.Get("/x", ok)
		s.Route("/v1", func(v chi.Router) {
			v.Get("/", ok)
		})
	})
	srv := httptest.NewServer(root)
	defer srv.Close()
	for _, tc := range []struct {
		path string
		want int
	}{
		{"/api/", 200}, {"/api", 429},
		{"/api/x", 200}, {"/api/x", 429},
		{"/api/v1", 200}, {"/api/v1/", 429},
	} {
		if got := rawGet(t, srv, "GET", tc.path); got != tc.want {
			t.Errorf("GET %s: got %d, want %d", tc.path, got, tc.want)
		}
	}
	want := []string{"r:/api/", "r:/api/v1/", "r:/api/x"}
	got := slices.Sorted(maps.Keys(store.Identities()))
	if !slices.Equal(got, want) {
		t.Errorf("identities: got %v, want %v", got, want)
	}
}
