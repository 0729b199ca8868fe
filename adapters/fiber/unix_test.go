package slidefiber_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	slidefiber "github.com/slidelog/slidelog/adapters/fiber"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/slidelogtest"
)

// TestUnixSocketProxyListener: fiber serving on a real Unix socket, with
// httplimit.ClientIP.UnixSocketProxy: the peer's network is "unix", so the
// proxy's X-Real-IP names the client; without the header the request has
// no client address (400).
func TestUnixSocketProxyListener(t *testing.T) {
	mem := memstore.New()
	t.Cleanup(func() { _ = mem.Close() })
	store := slidelogtest.NewCountingStore(mem)
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Use(slidefiber.Middleware(slidelogtest.NewLimiter(t, store, slidelog.PerMinute(5)), httplimit.WithClientIP(httplimit.ClientIP{UnixSocketProxy: true, Header: "X-Real-IP"})))
	app.Get("/hello", func(c *fiber.Ctx) error { return c.SendString("hello") })
	dir, err := os.MkdirTemp("", "slidelog-fiber-") // short: a socket path is at most ~100 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := filepath.Join(dir, "app.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = app.Listener(ln) }()
	t.Cleanup(func() { _ = app.Shutdown(); <-done })

	var d net.Dialer
	c := &http.Client{Transport: &http.Transport{
		DialContext:       func(ctx context.Context, _, _ string) (net.Conn, error) { return d.DialContext(ctx, "unix", sock) },
		DisableKeepAlives: true,
	}, Timeout: 30 * time.Second}
	get := func(header ...string) int {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://app/hello", nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	if got := get("X-Real-IP", "203.0.113.9"); got != http.StatusOK {
		t.Errorf("with X-Real-IP: got %d, want 200", got)
	}
	if got := get(); got != http.StatusBadRequest {
		t.Errorf("without X-Real-IP: got %d, want 400", got)
	}
	if keys := store.Identities(); len(keys) != 1 || keys["ip:203.0.113.9"] != 1 {
		t.Errorf("identities: got %v, want only ip:203.0.113.9", keys)
	}
}
