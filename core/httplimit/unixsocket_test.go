package httplimit_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/slidelogtest"
)

// httpSource presents a net/http request, as the net/http adapters do.
type httpSource struct{ r *http.Request }

func (s httpSource) Context() context.Context { return s.r.Context() }
func (s httpSource) Method() string           { return s.r.Method }
func (s httpSource) Path() string             { return s.r.URL.Path }
func (s httpSource) Route() string            { return "" }
func (s httpSource) Header(name string) []string {
	return httplimit.HeaderValues(s.r.Header, name)
}
func (s httpSource) RemoteAddr() string { return s.r.RemoteAddr }
func (s httpSource) Value(key any) any  { return s.r.Context().Value(key) }
func (s httpSource) Native() any        { return s.r }

// networkSource is a source that says its connection's network.
type networkSource struct {
	*source
	network string
}

func (s networkSource) Network() string { return s.network }

// pipeListener hands out the server ends of net.Pipe connections: an
// in-memory listener whose peers have no IP address.
type pipeListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   *sync.Once
}

func (l pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}
func (l pipeListener) Close() error   { l.once.Do(func() { close(l.closed) }); return nil }
func (l pipeListener) Addr() net.Addr { return &net.UnixAddr{Name: "pipe", Net: "pipe"} }

// unixTestLimiter returns a limiter of 10 a minute on a new memory store,
// with no deny cache, closed when the test ends.
func unixTestLimiter(t *testing.T) *slidelog.Limiter {
	t.Helper()
	return slidelogtest.NewLimiter(t, memstore.New(), slidelog.PerMinute(10), slidelog.WithDenyCache(0))
}

// keyingHandler checks each request with e and sends to keys the identity
// ByClientIP gives it, "error" if e could not key it (ErrInvalidKey), or
// "error: " and the error of any other failure.
func keyingHandler(e *httplimit.Engine, keys chan<- string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d := e.Check(httpSource{r})
		key := "error"
		if d.Outcome != httplimit.OutcomeError {
			key, _ = httplimit.ByClientIP()(d.Request)
		} else if !errors.Is(d.Err, slidelog.ErrInvalidKey) {
			key = "error: " + d.Err.Error()
		}
		keys <- key
	})
}

// serveUntilCleanup serves handler on ln until the test ends, then closes
// the server and waits for Serve to return.
func serveUntilCleanup(t *testing.T, ln net.Listener, handler http.Handler) {
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
}

// TestUnixSocketProxyTrustsUnixPeersOnly: with ClientIP.UnixSocketProxy, a
// request over a real Unix socket is keyed by the proxy's X-Real-IP; the
// same request over an in-memory listener (net.Pipe), with no socket
// address at all, or from an Incoming whose network is not "unix", is keyed
// as without the option: no address, 400, no store call.
func TestUnixSocketProxyTrustsUnixPeersOnly(t *testing.T) {
	e := newEngine(t, unixTestLimiter(t), httplimit.WithClientIP(httplimit.ClientIP{UnixSocketProxy: true, Header: "X-Real-IP"}))
	keys := make(chan string, 1)
	handler := keyingHandler(e, keys)
	serve := func(ln net.Listener) { serveUntilCleanup(t, ln, handler) }
	get := func(dial func(ctx context.Context, _, _ string) (net.Conn, error)) string {
		c := &http.Client{Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}, Timeout: 30 * time.Second}
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://app/", nil)
		req.Header.Set("X-Real-IP", "203.0.113.5")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return <-keys
	}

	dir, err := os.MkdirTemp("", "slidelog-unix-") // short: a socket path is at most ~100 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := filepath.Join(dir, "app.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	serve(ln)
	var d net.Dialer
	if got := get(func(ctx context.Context, _, _ string) (net.Conn, error) { return d.DialContext(ctx, "unix", sock) }); got != "ip:203.0.113.5" {
		t.Errorf("over a Unix socket: got %s, want ip:203.0.113.5", got)
	}

	pipes := pipeListener{conns: make(chan net.Conn), closed: make(chan struct{}), once: new(sync.Once)}
	serve(pipes)
	if got := get(func(context.Context, string, string) (net.Conn, error) {
		client, server := net.Pipe()
		pipes.conns <- server
		return client, nil
	}); got != "error" {
		t.Errorf("over net.Pipe: got %s, want no client address (400)", got)
	}

	for _, src := range []httplimit.Incoming{
		newSource("", "X-Real-IP", "203.0.113.5"),
		newSource("@", "X-Real-IP", "203.0.113.5"),
		networkSource{newSource("@", "X-Real-IP", "203.0.113.5"), "pipe"},
		networkSource{newSource("", "X-Real-IP", "203.0.113.5"), ""},
	} {
		if d := e.Check(src); d.Outcome != httplimit.OutcomeError || !errors.Is(d.Err, slidelog.ErrInvalidKey) {
			t.Errorf("%+v: got %v (%v), want an ErrInvalidKey error", src, d.Outcome, d.Err)
		}
	}
	if d := e.Check(networkSource{newSource("@", "X-Real-IP", "203.0.113.5"), "unix"}); d.Outcome != httplimit.OutcomeNext {
		t.Errorf("a NetworkIncoming on unix: got %v (%v), want admitted", d.Outcome, d.Err)
	}
}

// TestUnixPeerNamedLikeAnAddress: a Unix-socket peer's address is the
// path its client bound its own socket to, which the client chooses. A
// client that binds to a file named "198.51.100.7" (or after a trusted
// proxy, "127.0.0.1") must not be keyed as that IP address, nor be
// taken for a trusted proxy whose header it then writes: without
// ClientIP.UnixSocketProxy, a Unix-socket peer has no client address
// (400), whatever its socket's name.
func TestUnixPeerNamedLikeAnAddress(t *testing.T) {
	dir, err := os.MkdirTemp("", "slidelog-unix-") // short: a socket path is at most ~100 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	t.Chdir(dir) // the client binds to relative names, as any local process can
	sock := filepath.Join(dir, "app.sock")
	for _, tt := range []struct {
		name  string
		opts  []httplimit.Option
		bind  string
		xff   string
		wantK string
	}{
		{"default", nil, "198.51.100.7", "", "error"},
		{"default, with a port", nil, "198.51.100.8:80", "", "error"},
		{"trusted proxy's address", []httplimit.Option{httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: []string{"127.0.0.1"}, Header: "X-Forwarded-For"})}, "127.0.0.1", "203.0.113.5", "error"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEngine(t, unixTestLimiter(t), tt.opts...)
			keys := make(chan string, 1)
			_ = os.Remove(sock)
			ln, err := net.Listen("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			serveUntilCleanup(t, ln, keyingHandler(e, keys))

			_ = os.Remove(tt.bind)
			d := net.Dialer{LocalAddr: &net.UnixAddr{Name: tt.bind, Net: "unix"}}
			c := &http.Client{Transport: &http.Transport{
				DialContext:       func(ctx context.Context, _, _ string) (net.Conn, error) { return d.DialContext(ctx, "unix", sock) },
				DisableKeepAlives: true,
			}, Timeout: 30 * time.Second}
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://app/", nil)
			if tt.xff != "" {
				req.Header.Set("X-Forwarded-For", tt.xff)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if got := <-keys; got != tt.wantK {
				t.Errorf("client bound to %q: got %s, want %s (no client address)", tt.bind, got, tt.wantK)
			}
		})
	}
}
