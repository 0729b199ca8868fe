package slidechi

import (
	"context"
	"net/http"
	"strings"

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
// middleware added with r.Use runs before chi has routed the request.
// It looks up the path and method the root router routes on: before it
// has routed, the route context's RoutePath and RouteMethod when
// middleware in front (chi's middleware.StripSlashes,
// middleware.CleanPath, middleware.GetHead) rewrote them, as for Path;
// otherwise the escaped path as received.
// Once a router has routed (middleware of r.With, r.Group, or of a
// mounted router), the path as received is looked up, and when that
// finds nothing (a path rewritten in front), the patterns routed so far
// lead to the router that routes what is left (routed). Outside chi it
// is the pattern http.ServeMux matched (Request.Pattern), "" until a mux
// has routed the request. Each call looks the pattern up (key functions
// call it once per request).
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
	path := r.r.URL.RawPath
	if path == "" {
		path = r.r.URL.Path
	}
	if len(rctx.RoutePatterns) == 0 {
		if rctx.RoutePath != "" {
			// Not routed yet: the root router will route on RoutePath.
			path = rctx.RoutePath
		}
		return rctx.Routes.Find(chi.NewRouteContext(), method, path)
	}
	if p := rctx.Routes.Find(chi.NewRouteContext(), method, path); p != "" {
		return p
	}
	return routed(rctx, method)
}

// routed returns the pattern of a request that a router has routed on a
// path rewritten in front, so that the path as received finds nothing:
// RoutePatterns are the patterns matched so far, each but an endpoint's
// that of a mounted router, and RoutePath what the last one routes on.
// It reads the routes of each router on the way (Routes), so it runs
// only where the lookup of the path as received failed.
func routed(rctx *chi.Context, method string) string {
	routes, prefix := rctx.Routes, ""
	for i, p := range rctx.RoutePatterns {
		var sub chi.Routes
		for _, rt := range routes.Routes() {
			if rt.Pattern == p {
				sub = rt.SubRoutes
				break
			}
		}
		if sub == nil {
			if i == len(rctx.RoutePatterns)-1 {
				// An endpoint: this is its route.
				return rctx.RoutePattern()
			}
			return ""
		}
		prefix += strings.TrimSuffix(p, "/*")
		routes = sub
	}
	p := routes.Find(chi.NewRouteContext(), method, rctx.RoutePath)
	if p == "" {
		return ""
	}
	return prefix + p
}
