package slidechi_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	slidechi "github.com/slidelog/slidelog/adapters/chi"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/slidelogtest"
)

// docs/testing.md shows the code between the markers below verbatim.

// --- docs/testing.md: chi begins ---

// newOrdersAPI is the application under test: the router your service
// builds, given the limiter to use.
func newOrdersAPI(l *slidelog.Limiter) http.Handler {
	r := chi.NewRouter()
	r.Use(slidechi.Middleware(l))
	r.Get("/orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "order "+chi.URLParam(r, "id"))
	})
	return r
}

func TestOrdersRateLimit(t *testing.T) {
	// A clock the test moves by hand: the window passes without sleeping.
	clock := slidelogtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	store := memstore.New(memstore.WithClock(clock.Now))
	t.Cleanup(func() { _ = store.Close() })
	l, err := slidelog.New(store, slidelog.Policy{Name: "orders", Limit: 2, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	api := newOrdersAPI(l)

	// get sends GET /orders/7 from the client at ip.
	get := func(ip string) *http.Response {
		req := slidelogtest.SetClientIP(httptest.NewRequest(http.MethodGet, "/orders/7", nil), ip)
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, req)
		return rec.Result()
	}

	for _, wantRemaining := range []int{1, 0} {
		resp := get("203.0.113.7")
		rl := slidelogtest.AssertAdmitted(t, resp)
		if got, ok := rl.Remaining(); !ok || got != wantRemaining {
			t.Errorf("remaining: got %d (known: %v), want %d", got, ok, wantRemaining)
		}
		if body, err := io.ReadAll(resp.Body); err != nil || string(body) != "order 7" {
			t.Errorf("body: got %q (%v), want %q", body, err, "order 7")
		}
	}

	rl := slidelogtest.AssertRateLimited(t, get("203.0.113.7"))
	if rl.RetryAfter != time.Minute {
		t.Errorf("Retry-After: got %v, want 1m0s", rl.RetryAfter)
	}

	slidelogtest.AssertAdmitted(t, get("198.51.100.1")) // another client, its own budget

	clock.Advance(time.Minute) // the first client's requests leave the window
	slidelogtest.AssertAdmitted(t, get("203.0.113.7"))
}

// --- docs/testing.md: chi ends ---
