package slideechov5_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v5"
	slideechov5 "github.com/slidelog/slidelog/adapters/echov5"
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

// A value set with c.Set by an auth middleware is the identity.
func TestKeyByContextValue(t *testing.T) {
	store := slidelogtest.NewCountingStore(memstore.New())
	l := slidelogtest.NewLimiter(t, store, slidelog.PerMinute(1))
	r := echo.New()
	r.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c *echo.Context) error { c.Set("user", c.QueryParam("u")); return next(c) }
	})
	r.Use(slideechov5.Middleware(l, httplimit.WithKeyFunc(httplimit.FirstOf(httplimit.ByContextValue("user"), httplimit.ByClientIP()))))
	r.GET("/", func(c *echo.Context) error { return c.NoContent(http.StatusOK) })
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
	want := map[string]int{"v:6:s:user:alice": 2, "v:6:s:user:bob": 1, "ip:192.0.2.1": 2}
	if got := store.Identities(); len(got) != len(want) || got["v:6:s:user:alice"] != 2 || got["ip:192.0.2.1"] != 2 {
		t.Errorf("identities: got %v, want %v", got, want)
	}
}

// Under e.Use, ByRoute sees echo's route pattern.
func TestKeyByRouteGlobal(t *testing.T) {
	l := slidelogtest.NewLimiter(t, memstore.New(), slidelog.PerMinute(1))
	r := echo.New()
	r.Use(slideechov5.Middleware(l, httplimit.WithKeyFunc(httplimit.ByRoute())))
	r.GET("/users/:id", func(c *echo.Context) error { return c.NoContent(http.StatusOK) })
	r.GET("/teams/:id", func(c *echo.Context) error { return c.NoContent(http.StatusOK) })
	for _, tt := range []struct {
		give string
		want int
	}{
		{"/users/1", 200}, {"/users/2", 429}, {"/teams/1", 200},
		// No route: ErrNoRoute (400), never one budget shared by every
		// unrouted request.
		{"/nowhere", 400}, {"/elsewhere", 400},
	} {
		if got := serve(r, tt.give, "192.0.2.1:1").Code; got != tt.want {
			t.Errorf("GET %s: got %d, want %d", tt.give, got, tt.want)
		}
	}
}

func TestInvalidOptionPanics(t *testing.T) {
	slidelogtest.CheckInvalidOptions(t, "slideechov5: ", func(l *slidelog.Limiter, opts ...httplimit.Option) { slideechov5.Middleware(l, opts...) })
}

// A handler that returns an error echo turns into a 5xx is refunded.
func TestRefundOnReturnedError(t *testing.T) {
	store := slidelogtest.NewCountingStore(memstore.New())
	l := slidelogtest.NewLimiter(t, store, slidelog.PerMinute(1))
	r := echo.New()
	r.Use(slideechov5.Middleware(l, httplimit.WithRefundOnServerError()))
	r.GET("/http-error", func(*echo.Context) error { return echo.NewHTTPError(http.StatusBadGateway, "") })
	r.GET("/plain-error", func(*echo.Context) error { return errors.New("boom") })
	r.GET("/not-found", func(*echo.Context) error { return echo.ErrNotFound })
	for _, tt := range []struct {
		give string
		want int
	}{
		{"/http-error", 502}, {"/plain-error", 500}, {"/http-error", 502}, {"/not-found", 404}, {"/plain-error", 429},
	} {
		if got := serve(r, tt.give, "192.0.2.1:1").Code; got != tt.want {
			t.Errorf("GET %s: got %d, want %d", tt.give, got, tt.want)
		}
	}
	if n := store.Refunds(); n != 3 {
		t.Errorf("refunds: got %d, want 3", n)
	}
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
	slideechov5.Middleware(l)(nil)
}

// LimitByIP limits each client IP in memory, in one statement.
func TestLimitByIP(t *testing.T) {
	r := echo.New()
	r.Use(slideechov5.LimitByIP(slidelog.Policy{Name: "ip", Limit: 1, Window: time.Minute}))
	r.GET("/", func(*echo.Context) error { return nil })
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
		"policy": func() { slideechov5.LimitByIP(slidelog.PerMinute(0)) },
		"option": func() {
			slideechov5.LimitByIP(slidelog.PerMinute(1), httplimit.WithClientIP(httplimit.ClientIP{IPv6Prefix: -1}))
		},
		"foreign handler": func() { slideechov5.LimitByIP(slidelog.PerMinute(1), httplimit.WithErrorHandler(func(error) {})) },
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
