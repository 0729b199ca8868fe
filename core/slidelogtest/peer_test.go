package slidelogtest_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/slidelog/slidelog/core/slidelogtest"
)

// Each client of a PeerListener is the address it dialed from, and a
// connection without a preamble never reaches the server.
func TestPeerListener(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(r.RemoteAddr))
	}))
	addr := srv.Listener.Addr().String()
	peers := slidelogtest.NewPeerListener(srv.Listener, func(ctx context.Context) (net.Conn, error) {
		return new(net.Dialer).DialContext(ctx, "tcp", addr)
	})
	srv.Listener = peers
	srv.Start()
	t.Cleanup(srv.Close)

	for _, ip := range []string{"203.0.113.7", "2001:db8::1"} {
		resp, err := peers.ClientFrom(t, ip).Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		var b [64]byte
		n, _ := resp.Body.Read(b[:])
		_ = resp.Body.Close()
		host, _, err := net.SplitHostPort(string(b[:n]))
		if err != nil || host != ip {
			t.Errorf("RemoteAddr: got %q, want %s and a port", b[:n], ip)
		}
	}

	plain := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(plain.CloseIdleConnections)
	if resp, err := plain.Get(srv.URL); err == nil {
		_ = resp.Body.Close()
		t.Errorf("a client without a preamble: got %s, want no response", resp.Status)
	}

	defer func() {
		if recover() == nil {
			t.Error("DialFrom(\"not-an-ip\") did not panic")
		}
	}()
	peers.DialFrom("not-an-ip")
}
