package slidegin_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	slidegin "github.com/slidelog/slidelog/adapters/gin"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/slidelogtest"
)

// docs/testing.md shows the code between the markers below verbatim.

// --- docs/testing.md: gin begins ---

// newReportsAPI is the application under test: signed-in users are
// limited by account (the token check is a stand-in for your auth
// middleware), everyone else by client IP.
func newReportsAPI(l *slidelog.Limiter) *gin.Engine {
	r := gin.New()
	r.Use(func(c *gin.Context) {
		if token := c.GetHeader("Authorization"); strings.HasPrefix(token, "Bearer user-") {
			c.Set("user", strings.TrimPrefix(token, "Bearer ")) // after verifying the token
		}
		c.Next()
	})
	r.Use(slidegin.Middleware(l, httplimit.WithKeyFunc(
		httplimit.FirstOf(httplimit.ByContextValue("user"), httplimit.ByClientIP()))))
	r.GET("/reports", func(c *gin.Context) { c.String(http.StatusOK, "reports") })
	return r
}

func TestReportsRateLimit(t *testing.T) {
	clock := slidelogtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	store := memstore.New(memstore.WithClock(clock.Now))
	t.Cleanup(func() { _ = store.Close() })
	l, err := slidelog.New(store, slidelog.Policy{Name: "reports", Limit: 1, Window: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	api := newReportsAPI(l)

	// get sends GET /reports from the client at ip, signed in as user
	// unless user is "".
	get := func(ip, user string) *http.Response {
		req := slidelogtest.SetClientIP(httptest.NewRequest(http.MethodGet, "/reports", nil), ip)
		if user != "" {
			req.Header.Set("Authorization", "Bearer "+user)
		}
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, req)
		return rec.Result()
	}

	slidelogtest.AssertAdmitted(t, get("203.0.113.7", "user-alice"))
	slidelogtest.AssertRateLimited(t, get("198.51.100.1", "user-alice")) // alice from another address: same account
	slidelogtest.AssertAdmitted(t, get("203.0.113.7", "user-bob"))       // bob behind the same address: his own budget
	slidelogtest.AssertAdmitted(t, get("203.0.113.7", ""))               // anonymous: by address
	rl := slidelogtest.AssertRateLimited(t, get("203.0.113.7", ""))
	if rl.RetryAfter != 10*time.Second {
		t.Errorf("Retry-After: got %v, want 10s", rl.RetryAfter)
	}

	clock.Advance(10 * time.Second)
	slidelogtest.AssertAdmitted(t, get("198.51.100.1", "user-alice"))
}

// --- docs/testing.md: gin ends ---
