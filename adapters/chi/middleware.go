package slidechi

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/memstore"
)

// LimitByIP returns middleware that limits each client IP address to the
// policy p, counted in process memory: the common case in one statement,
//
//	r.Use(slidechi.LimitByIP(slidelog.PerMinute(100)))
//
// It is Middleware with a limiter of p on a memory store of its own,
// which lives as long as the program; opts are Middleware's. The client
// is the socket peer unless httplimit.WithClientIP says otherwise, as
// for Middleware. For limits shared between instances, use
// Middleware with a limiter on a Redis store.
//
// Like regexp.MustCompile, it panics when p is invalid, so that a
// constant policy that cannot work shows at start-up; it also panics when
// an option is invalid.
func LimitByIP(p slidelog.Policy, opts ...httplimit.Option) func(http.Handler) http.Handler {
	return Middleware(slidelog.MustNew(memstore.New(), p), opts...)
}

// Middleware returns net/http middleware that rate-limits requests with
// l, or with the limiter httplimit.WithLimiterFunc chooses (l may then be
// nil). Use it with chi's r.Use, r.With, r.Group or r.Route, or wrap any
// http.Handler; different limiters on different routes and groups give
// per-route limits. The options are httplimit's, with this package's
// WithDeniedHandler and WithErrorHandler.
//
// It panics when an option is invalid (such as a malformed CIDR), and the
// middleware panics when given a nil next handler, so that a
// misconfiguration shows at start-up, never per request.
func Middleware(l *slidelog.Limiter, opts ...httplimit.Option) func(http.Handler) http.Handler {
	e, err := httplimit.New(l, opts...)
	if err != nil {
		panic("slidechi: " + err.Error())
	}
	denied, onError, err := httplimit.Handlers[deniedFunc, errorFunc](e)
	if err != nil {
		panic("slidechi: " + err.Error())
	}
	if denied == nil {
		denied = defaultDenied
	}
	if onError == nil {
		onError = defaultError
	}
	refund := e.RefundsOnServerError()
	return func(next http.Handler) http.Handler {
		if next == nil {
			panic("slidechi: Middleware(...)(nil): nil next handler")
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			d := e.Check(request{r})
			d.SetHeader(w.Header())
			switch d.Outcome {
			case httplimit.OutcomeDenied:
				denied(w, r, d.Result)
				return
			case httplimit.OutcomeError:
				onError(w, r, d.Err)
				return
			}
			if !refund || !d.Result.Allowed {
				// No refunds, or skipped or let through by shadow mode:
				// nothing to refund, so no status to watch.
				next.ServeHTTP(w, r)
				return
			}
			serveRefunding(next, middleware.NewWrapResponseWriter(w, r.ProtoMajor), r, d)
		})
	}
}

// serveRefunding calls next and then d.Finish with the status it
// answered; a panic in next goes on to the recovery middleware (or
// net/http) outside the limiter as a 500 (Decision.Serve).
func serveRefunding(next http.Handler, ww middleware.WrapResponseWriter, r *http.Request, d *httplimit.Decision) {
	d.Serve(func() int {
		next.ServeHTTP(ww, r)
		return ww.Status()
	})
}

func defaultDenied(w http.ResponseWriter, _ *http.Request, res slidelog.Result) {
	httplimit.WriteDenied(w, res)
}

func defaultError(w http.ResponseWriter, _ *http.Request, err error) {
	httplimit.WriteError(w, err)
}

// request presents a net/http request to slidelog. It is one pointer, so
// that presenting a request as an Incoming allocates nothing.
type request struct{ r *http.Request }

func (r request) Context() context.Context    { return r.r.Context() }
func (r request) Method() string              { return r.r.Method }
func (r request) RemoteAddr() string          { return r.r.RemoteAddr }
func (r request) Native() any                 { return r.r }
func (r request) Header(name string) []string { return httplimit.HeaderValues(r.r.Header, name) }
func (r request) Value(key any) any           { return r.r.Context().Value(key) }

// Path is the path chi routes on: the route context's RoutePath when a
// mounted router or middleware set it, otherwise the escaped path as
// received (chi routes on URL.RawPath when it is set).
func (r request) Path() string {
	if rctx := chi.RouteContext(r.r.Context()); rctx != nil && rctx.RoutePath != "" {
		return rctx.RoutePath
	}
	if r.r.URL.RawPath != "" {
		return r.r.URL.RawPath
	}
	return r.r.URL.Path
}

// Route asks chi's root router which pattern the request matches, since
// middleware added with r.Use runs before chi has routed the request; a
// stub of Mount it finds is named by the mounted router's "/" route
// (unstub).
// It looks up the method chi routes on (the route context's RouteMethod
// when middleware such as middleware.GetHead set it) and, before any
// router has routed, the path the root router routes on: RoutePath when
// middleware in front (middleware.StripSlashes, middleware.CleanPath)
// rewrote it, as for Path, otherwise the escaped path as received.
// Once a router has routed (middleware of r.With, r.Group, a mounted
// router's r.Use, or r.Group's r.Use in front of r.Route or r.Mount),
// the path as received is never looked up, since a rewrite in front can
// make it match another route, such as a catch-all: the patterns chi
// matched so far name the route, or the mounted router and the path it
// routes next (routed). Outside chi it is the pattern http.ServeMux
// matched (Request.Pattern), "" until a mux has routed the request.
// Each call looks the pattern up (key functions call it once per
// request).
func (r request) Route() string {
	rctx := chi.RouteContext(r.r.Context())
	if rctx == nil || rctx.Routes == nil {
		return r.r.Pattern
	}
	method := r.r.Method
	if rctx.RouteMethod != "" {
		// chi routes on it (middleware.GetHead routes a HEAD as a GET).
		method = rctx.RouteMethod
	}
	if len(rctx.RoutePatterns) == 0 {
		path := rctx.RoutePath
		if path == "" {
			// Not rewritten: the root router routes on the path as received.
			path = r.r.URL.RawPath
			if path == "" {
				path = r.r.URL.Path
			}
		}
		fctx := chi.NewRouteContext()
		found := rctx.Routes.Find(fctx, method, path)
		return unstub(rctx.Routes, fctx.RoutePatterns, method, found)
	}
	return routed(rctx, method)
}

// unstub returns found, the pattern Find found through the patterns it
// matched (chain, one per router), unless the last of them is a stub of
// Mount ("/api" or "/api/" for a router mounted at "/api"), which Find
// names as it is: then the route the mounted router serves "/" with,
// named as routed names it, so that "/api", "/api/" and the mounted
// router's "/" share a budget.
func unstub(routes chi.Routes, chain []string, method, found string) string {
	if found == "" || strings.HasSuffix(found, "*") {
		return found
	}
	prefix := ""
	for i, p := range chain {
		sub, pattern := mountOf(routes, p)
		if sub == nil {
			return found
		}
		prefix = joinPattern(prefix, strings.TrimSuffix(pattern, "/*"))
		if i == len(chain)-1 {
			p := sub.Find(chi.NewRouteContext(), method, "/")
			if p == "" {
				return ""
			}
			return joinPattern(prefix, p)
		}
		routes = sub
	}
	return found
}

// routed returns the pattern of a request some router has routed, named
// as the root router's Find names it (each mounted router's pattern
// without its "/*", then the pattern within it). RoutePatterns are the
// patterns matched so far, each in the router the previous one mounted:
// the last is the route's own (r.With, r.Group: the middleware runs as
// the route's handler) or a mounted router's, which routes what is left
// of the path (mountPath). The path as received is never used: after a
// rewrite in front (middleware.StripSlashes, middleware.CleanPath, a
// RoutePath of its own) it can match another route, such as a catch-all.
func routed(rctx *chi.Context, method string) string {
	routes, prefix := rctx.Routes, ""
	last := len(rctx.RoutePatterns) - 1
	for i, p := range rctx.RoutePatterns {
		sub, pattern := mountOf(routes, p)
		if sub == nil {
			if i != last {
				return ""
			}
			// The route itself, or a handler mounted that is not a chi
			// router: it serves whatever is left of the path.
			return joinPattern(prefix, pattern)
		}
		prefix = joinPattern(prefix, strings.TrimSuffix(pattern, "/*"))
		routes = sub
	}
	p := routes.Find(chi.NewRouteContext(), method, mountPath(rctx))
	if p == "" {
		return ""
	}
	return joinPattern(prefix, p)
}

// mountPath is the path the router mounted by the last of RoutePatterns
// routes: what its wildcard matched, which the mount's handler moves to
// RoutePath and clears. Middleware of r.Group or r.With in front of
// r.Route or r.Mount runs before that handler, with the wildcard still
// set and RoutePath the parent's (empty at an unrewritten root). A
// pattern with no wildcard (Mount's "/api" and "/api/") leaves "/".
func mountPath(rctx *chi.Context) string {
	keys, vals := rctx.URLParams.Keys, rctx.URLParams.Values
	if n := len(keys) - 1; n >= 0 && keys[n] == "*" && n < len(vals) && vals[n] != "" {
		// The mount's handler has not run yet (it clears the value).
		return "/" + vals[n]
	}
	if !strings.HasSuffix(rctx.RoutePatterns[len(rctx.RoutePatterns)-1], "*") {
		return "/"
	}
	if rctx.RoutePath == "" || !strings.HasPrefix(rctx.RoutePath, "/") {
		return "/"
	}
	return rctx.RoutePath
}

// joinPattern joins a mounted router's prefix and a pattern within it as
// chi's Find does, with one slash between them where the prefix ends in
// one (a router mounted at "/api/").
func joinPattern(prefix, p string) string {
	if strings.HasSuffix(prefix, "/") && strings.HasPrefix(p, "/") {
		return prefix + p[1:]
	}
	return prefix + p
}

// mountKey names a pattern in a router for mounts.
type mountKey struct {
	routes  *chi.Mux
	pattern string
}

// mountVal is what a pattern in a router resolves to: the router it
// mounts (nil for a route or a handler that is not a chi router) and the
// pattern that names it.
type mountVal struct {
	sub     chi.Routes
	pattern string
}

// mounts caches mountOf per router and pattern (mountKey to mountVal),
// so that a router's routes are listed once, not per request. Patterns
// are the routers' own, never a client's; the cache is dropped whole
// when it passes maxMounts entries (routers made at run time).
var (
	mounts  sync.Map
	nMounts atomic.Int64
)

const maxMounts = 4096

// mountOf returns what the pattern p, matched in routes, resolves to:
// the router it mounts, or nil for a route, and the pattern that names
// it. Mount registers a router at "/api" as "/api/*" with stubs "/api"
// and "/api/" that Routes does not list; a stub resolves to its mount,
// named "/api/*", so that the three paths chi routes into the router
// share the names of its routes.
func mountOf(routes chi.Routes, p string) (chi.Routes, string) {
	mux, ok := routes.(*chi.Mux)
	if !ok {
		v := resolveMount(routes, p)
		return v.sub, v.pattern
	}
	k := mountKey{mux, p}
	if v, ok := mounts.Load(k); ok {
		v := v.(mountVal)
		return v.sub, v.pattern
	}
	v := resolveMount(routes, p)
	if nMounts.Add(1) > maxMounts {
		mounts.Clear()
		nMounts.Store(1)
	}
	mounts.Store(k, v)
	return v.sub, v.pattern
}

func resolveMount(routes chi.Routes, p string) mountVal {
	rts := routes.Routes()
	for _, rt := range rts {
		if rt.Pattern == p {
			return mountVal{rt.SubRoutes, p}
		}
	}
	// A stub of Mount: the mount is the pattern with "/*".
	m := strings.TrimSuffix(p, "/") + "/*"
	for _, rt := range rts {
		if rt.Pattern == m {
			return mountVal{rt.SubRoutes, m}
		}
	}
	return mountVal{nil, p}
}
