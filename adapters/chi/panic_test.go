package slidechi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"
	chimw "github.com/go-chi/chi/v5/middleware"
	slidechi "github.com/slidelog/slidelog/adapters/chi"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/slidelogtest"
)

// panicRouter is a router whose handler panics, behind chi's Recoverer
// and the limiter (at two a minute) with opts.
func panicRouter(t *testing.T, store slidelog.Store, opts ...httplimit.Option) http.Handler {
	t.Helper()
	l := slidelogtest.NewLimiter(t, store, slidelog.PerMinute(2))
	r := chi.NewRouter()
	r.Use(chimw.Recoverer)
	r.Use(slidechi.Middleware(l, opts...))
	r.Get("/", func(http.ResponseWriter, *http.Request) { panic("handler failed") })
	return r
}

// A handler that panics, answered 500 by the recovery middleware outside
// the limiter, is refunded like one that answers 500 itself, and counts
// without WithRefundOnServerError.
func TestPanicRefunds(t *testing.T) {
	slidelogtest.CheckPanicRefunds(t, func(t *testing.T, store slidelog.Store, opts ...httplimit.Option) func() int {
		r := panicRouter(t, store, opts...)
		return func() int { return serve(r, "/", "192.0.2.1:1").Code }
	})
}

// A handler that aborts its response with http.ErrAbortHandler, which
// Recoverer passes on to net/http, is refunded, and the panic still
// reaches net/http, which aborts the response.
func TestRefundOnAbortHandler(t *testing.T) {
	store := slidelogtest.NewCountingStore(memstore.New())
	l := slidelogtest.NewLimiter(t, store, slidelog.PerMinute(2))
	r := chi.NewRouter()
	r.Use(chimw.Recoverer)
	r.Use(slidechi.Middleware(l, httplimit.WithRefundOnServerError()))
	r.Get("/", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		panic(http.ErrAbortHandler)
	})
	srv := httptest.NewServer(r)
	defer srv.Close()
	for i := range 4 {
		resp, err := srv.Client().Get(srv.URL)
		if err == nil {
			_ = resp.Body.Close()
			t.Errorf("request %d: got status %d, want the response aborted", i+1, resp.StatusCode)
		}
	}
	if n := store.Refunds(); n != 4 {
		t.Errorf("refunds: got %d, want 4", n)
	}
}

// A request whose client goes away while its handler runs is not refunded
// with WithRefundOnServerError, whether the handler then answers 500 or
// aborts; one whose client stays for its 500 is.
func TestNoRefundWhenClientGone(t *testing.T) {
	slidelogtest.CheckNoRefundWhenClientGone(t, func(t *testing.T, store slidelog.Store, handler func(context.Context) int, opts ...httplimit.Option) string {
		l := slidelogtest.NewLimiter(t, store, slidelog.PerMinute(2))
		r := chi.NewRouter()
		r.Use(chimw.Recoverer)
		r.Use(slidechi.Middleware(l, opts...))
		r.Get("/", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(handler(r.Context())) })
		srv := httptest.NewServer(r)
		t.Cleanup(srv.Close)
		return srv.URL
	})
}
