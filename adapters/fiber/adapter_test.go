package slidefiber_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	slidefiber "github.com/slidelog/slidelog/adapters/fiber"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/slidelogtest"
)

type recorded struct{ Code int }

func serveApp(t *testing.T, app *fiber.App, path string) recorded {
	t.Helper()
	resp, err := app.Test(httptest.NewRequest(http.MethodGet, path, nil))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return recorded{resp.StatusCode}
}

// A value set with c.Set by an auth middleware is the identity.
func TestKeyByContextValue(t *testing.T) {
	store := slidelogtest.NewCountingStore(memstore.New())
	l := slidelogtest.NewLimiter(t, store, slidelog.PerMinute(1))
	r := fiber.New()
	r.Use(func(c *fiber.Ctx) error { c.Locals("user", c.Query("u")); return c.Next() })
	r.Use(slidefiber.Middleware(l, httplimit.WithKeyFunc(httplimit.FirstOf(httplimit.ByContextValue("user"), httplimit.ByClientIP()))))
	r.Get("/", func(c *fiber.Ctx) error { return c.SendStatus(http.StatusOK) })
	for _, tt := range []struct {
		give string
		want int
	}{
		{"/?u=alice", 200}, {"/?u=alice", 429}, {"/?u=bob", 200}, {"/", 200}, {"/", 429},
	} {
		if got := serveApp(t, r, tt.give).Code; got != tt.want {
			t.Errorf("GET %s: got %d, want %d", tt.give, got, tt.want)
		}
	}
	want := map[string]int{"v:6:s:user:alice": 2, "v:6:s:user:bob": 1, "ip:0.0.0.0": 2}
	if got := store.Identities(); len(got) != len(want) || got["v:6:s:user:alice"] != 2 || got["ip:0.0.0.0"] != 2 {
		t.Errorf("identities: got %v, want %v", got, want)
	}
}

// Under app.Use fiber has not matched the route: ByRoute fails with
// ErrNoRoute (400), never one budget for every route; on a route it sees
// the route's pattern.
func TestKeyByRouteUse(t *testing.T) {
	l := slidelogtest.NewLimiter(t, memstore.New(), slidelog.PerMinute(1))
	r := fiber.New()
	r.Use(slidefiber.Middleware(l, httplimit.WithKeyFunc(httplimit.ByRoute())))
	r.Get("/users/:id", func(c *fiber.Ctx) error { return c.SendStatus(http.StatusOK) })
	perRoute := slidefiber.Middleware(slidelogtest.NewLimiter(t, memstore.New(), slidelog.PerMinute(1)), httplimit.WithKeyFunc(httplimit.ByRoute()))
	r2 := fiber.New()
	r2.Get("/users/:id", perRoute, func(c *fiber.Ctx) error { return c.SendStatus(http.StatusOK) })
	r2.Get("/teams/:id", perRoute, func(c *fiber.Ctx) error { return c.SendStatus(http.StatusOK) })
	for _, tt := range []struct {
		app  *fiber.App
		give string
		want int
	}{
		{r, "/users/1", 400}, {r, "/users/2", 400},
		{r2, "/users/1", 200}, {r2, "/users/2", 429}, {r2, "/teams/1", 200}, {r2, "/teams/2", 429},
	} {
		if got := serveApp(t, tt.app, tt.give).Code; got != tt.want {
			t.Errorf("GET %s: got %d, want %d", tt.give, got, tt.want)
		}
	}
}

func TestInvalidOptionPanics(t *testing.T) {
	slidelogtest.CheckInvalidOptions(t, "slidefiber: ", func(l *slidelog.Limiter, opts ...httplimit.Option) { slidefiber.Middleware(l, opts...) })
}

// A handler that returns an error fiber turns into a 5xx is refunded.
func TestRefundOnReturnedError(t *testing.T) {
	store := slidelogtest.NewCountingStore(memstore.New())
	l := slidelogtest.NewLimiter(t, store, slidelog.PerMinute(1))
	r := fiber.New()
	r.Use(slidefiber.Middleware(l, httplimit.WithRefundOnServerError()))
	r.Get("/fiber-error", func(*fiber.Ctx) error { return fiber.ErrBadGateway })
	r.Get("/plain-error", func(*fiber.Ctx) error { return errors.New("boom") })
	r.Get("/not-found", func(*fiber.Ctx) error { return fiber.ErrNotFound })
	for _, tt := range []struct {
		give string
		want int
	}{
		{"/fiber-error", 502}, {"/plain-error", 500}, {"/fiber-error", 502}, {"/not-found", 404}, {"/plain-error", 429},
	} {
		if got := serveApp(t, r, tt.give).Code; got != tt.want {
			t.Errorf("GET %s: got %d, want %d", tt.give, got, tt.want)
		}
	}
	if n := store.Refunds(); n != 3 {
		t.Errorf("refunds: got %d, want 3", n)
	}
}

// LimitByIP limits each client IP in memory, in one statement.
func TestLimitByIP(t *testing.T) {
	app := fiber.New()
	app.Use(slidefiber.LimitByIP(slidelog.Policy{Name: "ip", Limit: 1, Window: time.Minute}))
	app.Get("/", func(*fiber.Ctx) error { return nil })
	send := serve(t, app)
	for _, tt := range []struct {
		remote string
		want   int
	}{
		{"192.0.2.1:1", 200}, {"192.0.2.1:2", 429}, {"192.0.2.2:1", 200}, {"[2001:db8::1]:1", 200}, {"[2001:db8::2]:1", 429},
	} {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.RemoteAddr = tt.remote
		resp := send(req)
		_ = resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("GET / from %s: got %d, want %d", tt.remote, resp.StatusCode, tt.want)
		}
	}
}

// An invalid policy, or an option of another adapter, panics at start-up.
func TestLimitByIPPanics(t *testing.T) {
	for name, f := range map[string]func(){
		"policy": func() { slidefiber.LimitByIP(slidelog.PerMinute(0)) },
		"option": func() {
			slidefiber.LimitByIP(slidelog.PerMinute(1), httplimit.WithClientIP(httplimit.ClientIP{IPv6Prefix: -1}))
		},
		"foreign handler": func() { slidefiber.LimitByIP(slidelog.PerMinute(1), httplimit.WithDeniedHandler(func(error) {})) },
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
