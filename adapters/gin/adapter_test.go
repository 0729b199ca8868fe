package slidegin_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	slidegin "github.com/slidelog/slidelog/adapters/gin"
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
	r := gin.New()
	r.Use(func(c *gin.Context) { c.Set("user", c.Query("u")) })
	r.Use(slidegin.Middleware(l, httplimit.WithKeyFunc(httplimit.FirstOf(httplimit.ByContextValue("user"), httplimit.ByClientIP()))))
	r.GET("/", func(c *gin.Context) { c.Status(http.StatusOK) })
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

// Under engine.Use, ByRoute sees gin's full route pattern.
func TestKeyByRouteGlobal(t *testing.T) {
	l := slidelogtest.NewLimiter(t, memstore.New(), slidelog.PerMinute(1))
	r := gin.New()
	r.Use(slidegin.Middleware(l, httplimit.WithKeyFunc(httplimit.ByRoute())))
	r.GET("/users/:id", func(c *gin.Context) { c.Status(http.StatusOK) })
	r.GET("/teams/:id", func(c *gin.Context) { c.Status(http.StatusOK) })
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
	slidelogtest.CheckInvalidOptions(t, "slidegin: ", func(l *slidelog.Limiter, opts ...httplimit.Option) { slidegin.Middleware(l, opts...) })
}

// LimitByIP limits each client IP in memory, in one statement.
func TestLimitByIP(t *testing.T) {
	gin.SetMode(gin.TestMode)
	r := gin.New()
	r.Use(slidegin.LimitByIP(slidelog.Policy{Name: "ip", Limit: 1, Window: time.Minute}))
	r.GET("/", func(*gin.Context) {})
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
		"policy": func() { slidegin.LimitByIP(slidelog.PerMinute(0)) },
		"option": func() {
			slidegin.LimitByIP(slidelog.PerMinute(1), httplimit.WithClientIP(httplimit.ClientIP{IPv6Prefix: -1}))
		},
		"foreign handler": func() { slidegin.LimitByIP(slidelog.PerMinute(1), httplimit.WithErrorHandler(func(error) {})) },
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
