package slidechi_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/go-chi/chi/v5"
	slidechi "github.com/slidelog/slidelog/adapters/chi"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/slidelogtest"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
)

func TestHTTPSuiteMemory(t *testing.T) {
	slidelogtest.RunHTTPSuite(t, slidelogtest.MemoryStores(), newServer)
}

func TestHTTPSuiteCluster(t *testing.T) {
	slidelogtest.RunHTTPSuite(t, redistest.ClusterStores(t), newServer)
}

// TestProxySuite runs the app behind real nginx and HAProxy, attacked
// from another loopback address.
func TestProxySuite(t *testing.T) {
	slidelogtest.RunProxySuite(t, newServer)
}

// newServer builds app with chi: the suite's factory.
func newServer(_ *testing.T, app slidelogtest.HTTPApp) slidelogtest.HTTPServe {
	r := chi.NewRouter()
	if app.Global != nil {
		r.Use(middleware(app.Global))
	}
	for _, rt := range app.Routes {
		status := rt.Status
		if status == 0 {
			status = http.StatusOK
		}
		pattern := rt.Pattern
		var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set(slidelogtest.RouteHeader, pattern)
			w.WriteHeader(status)
			_, _ = io.WriteString(w, "ok")
		})
		router := chi.Router(r)
		if rt.Middleware != nil {
			router = r.With(middleware(rt.Middleware))
		}
		method := rt.Method
		if method == "" {
			method = http.MethodGet
		}
		router.Method(method, slidelogtest.BracePattern(rt.Pattern), h)
	}
	return slidelogtest.ServeHandler(r)
}

// middleware installs the suite's middleware: its options as they are,
// and slidechi's own handlers for DeniedBody and ErrorBody.
func middleware(m *slidelogtest.HTTPMiddleware) func(http.Handler) http.Handler {
	opts := append([]httplimit.Option(nil), m.Options...)
	if m.DeniedBody != "" {
		opts = append(opts, slidechi.WithDeniedHandler(func(w http.ResponseWriter, _ *http.Request, _ slidelog.Result) {
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = io.WriteString(w, m.DeniedBody)
		}))
	}
	if m.ErrorBody != "" {
		opts = append(opts, slidechi.WithErrorHandler(func(w http.ResponseWriter, _ *http.Request, _ error) {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, m.ErrorBody)
		}))
	}
	return slidechi.Middleware(m.Limiter, opts...)
}

// FuzzMiddleware: no request, however crafted, panics the middleware or
// gets a 5xx.
func FuzzMiddleware(f *testing.F) { slidelogtest.FuzzHTTP(f, newServer) }
