package slidefiber_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	slidefiber "github.com/slidelog/slidelog/adapters/fiber"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/slidelogtest"
)

// Test serves each request from its RemoteAddr, so two clients have two
// budgets; app.Test serves all from 0.0.0.0, one budget.
func TestTestKeepsRemoteAddr(t *testing.T) {
	app := fiber.New()
	app.Use(slidefiber.LimitByIP(slidelog.Policy{Name: "test", Limit: 1, Window: time.Minute}))
	app.Post("/echo", func(c *fiber.Ctx) error { return c.Send(c.Body()) })
	send := func(ip string) *http.Response {
		t.Helper()
		req := slidelogtest.SetClientIP(httptest.NewRequest(http.MethodPost, "/echo", strings.NewReader("hi")), ip)
		resp, err := slidefiber.Test(app, req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = resp.Body.Close() })
		return resp
	}
	resp := send("203.0.113.7")
	if body, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusOK || string(body) != "hi" {
		t.Errorf("first client: got %d %q, want 200 \"hi\"", resp.StatusCode, body)
	}
	slidelogtest.AssertRateLimited(t, send("203.0.113.7"))
	slidelogtest.AssertAdmitted(t, send("2001:db8::1"))

	// app.Test: every request from 0.0.0.0, so the second client is denied.
	for i, want := range []int{http.StatusOK, http.StatusTooManyRequests} {
		req := slidelogtest.SetClientIP(httptest.NewRequest(http.MethodPost, "/echo", nil), []string{"198.51.100.1", "198.51.100.2"}[i])
		resp, err := app.Test(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("app.Test client %d: got %d, want %d", i+1, resp.StatusCode, want)
		}
	}

	if _, err := slidefiber.Test(app, &http.Request{Method: http.MethodGet, RemoteAddr: "not-an-address"}); err == nil {
		t.Error("Test with a bad RemoteAddr: got no error")
	}
}
