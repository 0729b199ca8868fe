package slidefiber_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	slidefiber "github.com/slidelog/slidelog/adapters/fiber"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/slidelogtest"
)

// docs/testing.md shows the code between the markers below verbatim.

// --- docs/testing.md: fiber begins ---

// newCartAPI is the application under test: the fiber app your service
// builds, given the limiter to use.
func newCartAPI(l *slidelog.Limiter) *fiber.App {
	app := fiber.New()
	app.Use(slidefiber.Middleware(l))
	app.Get("/cart", func(c *fiber.Ctx) error { return c.SendString("cart") })
	return app
}

func TestCartRateLimit(t *testing.T) {
	clock := slidelogtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	store := memstore.New(memstore.WithClock(clock.Now))
	t.Cleanup(func() { _ = store.Close() })
	l, err := slidelog.New(store, slidelog.Policy{Name: "cart", Limit: 1, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	app := newCartAPI(l)

	// get sends GET /cart from the client at ip. slidefiber.Test serves it
	// from req.RemoteAddr; app.Test would serve every request from
	// 0.0.0.0, one budget for all clients.
	get := func(ip string) *http.Response {
		req := slidelogtest.SetClientIP(httptest.NewRequest(http.MethodGet, "/cart", nil), ip)
		resp, err := slidefiber.Test(app, req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = resp.Body.Close() })
		return resp
	}

	resp := get("203.0.113.7")
	slidelogtest.AssertAdmitted(t, resp)
	body, err := io.ReadAll(resp.Body)
	if err != nil || string(body) != "cart" {
		t.Errorf("body: got %q (%v), want %q", body, err, "cart")
	}
	slidelogtest.AssertRateLimited(t, get("203.0.113.7"))
	slidelogtest.AssertAdmitted(t, get("198.51.100.1")) // another client, its own budget

	clock.Advance(time.Minute)
	slidelogtest.AssertAdmitted(t, get("203.0.113.7"))
}

// --- docs/testing.md: fiber ends ---
