package slidelogtest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/memstore"
)

// HTTPMiddleware describes one call of an adapter's Middleware:
// Middleware(Limiter, Options...), plus the adapter's own denied and error
// handlers when DeniedBody or ErrorBody is set. The options are
// httplimit's, which every adapter takes as they are.
type HTTPMiddleware struct {
	// Limiter is Middleware's first argument.
	Limiter *slidelog.Limiter
	// Options are passed to Middleware.
	Options []httplimit.Option
	// DeniedBody, when not empty, adds the adapter's WithDeniedHandler
	// with a handler that answers 429 with this text/plain body.
	DeniedBody string
	// ErrorBody, when not empty, adds the adapter's WithErrorHandler with
	// a handler that answers 503 with this text/plain body.
	ErrorBody string
}

// mw describes Middleware(l, opts...).
func mw(l *slidelog.Limiter, opts ...httplimit.Option) *HTTPMiddleware {
	return &HTTPMiddleware{Limiter: l, Options: opts}
}

// HTTPRoute is one route of the server a factory builds. Its handler
// answers Status (200 when 0) with the text/plain body "ok" and its
// Pattern in the RouteHeader field.
type HTTPRoute struct {
	// Method is the route's method; "GET" when empty.
	Method string
	// Pattern is the route's path pattern with parameters in colon form,
	// such as "/items/:id"; a brace-style router converts it with
	// BracePattern.
	Pattern string
	// Status is what the handler answers.
	Status int
	// Middleware, when not nil, is installed on this route only.
	Middleware *HTTPMiddleware
}

// RouteHeader is the response header field in which a route's handler
// names its Pattern, so that a test can tell which route served a request.
const RouteHeader = "X-Test-Route"

// HTTPApp is the server a factory builds.
type HTTPApp struct {
	// RawHeaderNames, when true, makes a framework that has such an option
	// keep header names as the client wrote them (fiber's
	// DisableHeaderNormalizing). net/http keeps what code writes into
	// Header as it was written.
	RawHeaderNames bool
	// Global, when not nil, is installed for every route (engine.Use).
	Global *HTTPMiddleware
	// Routes are the server's routes.
	Routes []HTTPRoute
}

// HTTPServe serves one request and returns the response. The request's
// RemoteAddr is the socket address the server must see, and the values of
// its context must reach the key functions (httplimit.Request.Value): as the
// request context, or, for fiber, as the user context.
type HTTPServe func(req *http.Request) *http.Response

// HTTPFactory builds app with the framework under test.
type HTTPFactory func(t *testing.T, app HTTPApp) HTTPServe

// ServeHandler returns an HTTPServe for a net/http handler, served through
// httptest.ResponseRecorder.
func ServeHandler(h http.Handler) HTTPServe {
	return func(req *http.Request) *http.Response {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Result()
	}
}

// BracePattern converts a colon-form pattern ("/items/:id") to brace form
// ("/items/{id}"), as chi and net/http spell it.
func BracePattern(pattern string) string {
	segs := strings.Split(pattern, "/")
	for i, s := range segs {
		if strings.HasPrefix(s, ":") {
			segs[i] = "{" + s[1:] + "}"
		}
	}
	return strings.Join(segs, "/")
}

// MemoryStores returns a NewStoreFunc that builds memory stores.
func MemoryStores() NewStoreFunc {
	return func(_ *testing.T, clock func() time.Time) slidelog.Store {
		return memstore.New(memstore.WithClock(clock))
	}
}

// CountingStore wraps a Store and counts the calls made to it, and keeps
// the identities Take was asked about. The HTTP suite uses it to prove that
// a bad identity never reaches the store and that forwarded headers do not
// create identities.
//
// It calls the wrapped store without the caller's deadline or
// cancellation, so that every decision the suite starts is the wrapped
// store's and counted; the failure modes have their own tests.
type CountingStore struct {
	slidelog.Store
	takes   atomic.Int64
	refunds atomic.Int64
	mu      sync.Mutex
	keys    map[string]int
}

// NewCountingStore wraps s.
func NewCountingStore(s slidelog.Store) *CountingStore {
	return &CountingStore{Store: s, keys: make(map[string]int)}
}

// Take counts the call and forwards it.
func (s *CountingStore) Take(ctx context.Context, req slidelog.Request) (slidelog.Result, error) {
	s.takes.Add(1)
	s.mu.Lock()
	s.keys[req.Key]++
	s.mu.Unlock()
	return s.Store.Take(context.WithoutCancel(ctx), req)
}

// Refund counts the call and forwards it.
func (s *CountingStore) Refund(ctx context.Context, req slidelog.Request) error {
	s.refunds.Add(1)
	return s.Store.Refund(context.WithoutCancel(ctx), req)
}

// Clock returns the wrapped store's clock when it has one (see
// slidelog.Store), so that a limiter's deny cache follows a test clock
// through the wrapper; nil otherwise.
func (s *CountingStore) Clock() func() time.Time {
	if c, ok := s.Store.(interface{ Clock() func() time.Time }); ok {
		return c.Clock()
	}
	return nil
}

// Takes returns how many times Take was called.
func (s *CountingStore) Takes() int { return int(s.takes.Load()) }

// Refunds returns how many times Refund was called.
func (s *CountingStore) Refunds() int { return int(s.refunds.Load()) }

// Keys returns the identities Take was asked about, with their counts.
func (s *CountingStore) Keys() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.keys))
	for k, n := range s.keys {
		out[k] = n
	}
	return out
}

// Identities returns the identities the key function produced, with their
// counts: the Keys of the requests, which the limiter sends apart from
// its namespace.
func (s *CountingStore) Identities() map[string]int { return s.Keys() }
