package slidechi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"
)

// BenchmarkRoute measures request.Route, the lookup ByRoute makes per
// request, for a limiter on the root router (r.Use, before chi has
// routed): chi's Find of the pattern, and the stub check that follows
// it (unstub: one cached mountOf per router the pattern passes), which
// the "find-only" row leaves out.
func BenchmarkRoute(b *testing.B) {
	ok := func(http.ResponseWriter, *http.Request) {}
	root := chi.NewRouter()
	root.Get("/users/{id}", ok)
	root.Route("/api", func(s chi.Router) { s.Get("/orders/{id}", ok) })
	for _, path := range []string{"/users/2", "/api/orders/2"} {
		r := httptest.NewRequest("GET", path, nil)
		rctx := chi.NewRouteContext()
		rctx.Routes = root
		r = r.WithContext(context.WithValue(r.Context(), chi.RouteCtxKey, rctx))
		b.Run(path+"/Route", func(b *testing.B) {
			for b.Loop() {
				if (request{r}).Route() == "" {
					b.Fatal("no route")
				}
			}
		})
		b.Run(path+"/find-only", func(b *testing.B) {
			for b.Loop() {
				if root.Find(chi.NewRouteContext(), "GET", path) == "" {
					b.Fatal("no route")
				}
			}
		})
	}
}
