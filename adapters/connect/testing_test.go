package slideconnect_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"connectrpc.com/connect"
	slideconnect "github.com/slidelog/slidelog/adapters/connect"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/slidelogtest"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// docs/testing.md shows the code between the markers below verbatim.

// --- docs/testing.md: connect begins ---

// newHandler is the application under test: the handler your service
// builds, given the limiter to use (here a health check, with grpc-go's
// messages).
func newHandler(l *slidelog.Limiter) http.Handler {
	const procedure = "/grpc.health.v1.Health/Check"
	mux := http.NewServeMux()
	mux.Handle(procedure, connect.NewUnaryHandler(procedure,
		func(context.Context, *connect.Request[healthpb.HealthCheckRequest]) (*connect.Response[healthpb.HealthCheckResponse], error) {
			return connect.NewResponse(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}), nil
		},
		connect.WithInterceptors(slideconnect.NewInterceptor(l))))
	return mux
}

func TestHandlerRateLimit(t *testing.T) {
	clock := slidelogtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	store := memstore.New(memstore.WithClock(clock.Now))
	t.Cleanup(func() { _ = store.Close() })
	l, err := slidelog.New(store, slidelog.Policy{Name: "calls", Limit: 2, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })

	// An httptest server whose connections say which client they are:
	// otherwise every client is 127.0.0.1, one budget for all.
	srv := httptest.NewUnstartedServer(newHandler(l))
	addr := srv.Listener.Addr().String()
	peers := slidelogtest.NewPeerListener(srv.Listener, func(ctx context.Context) (net.Conn, error) {
		return new(net.Dialer).DialContext(ctx, "tcp", addr)
	})
	srv.Listener = peers
	srv.Start()
	t.Cleanup(srv.Close)

	// client returns a Connect client whose calls come from ip.
	client := func(ip string) *connect.Client[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse] {
		return connect.NewClient[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse](
			peers.ClientFrom(t, ip), srv.URL+"/grpc.health.v1.Health/Check")
	}
	alice, bob := client("203.0.113.7"), client("198.51.100.1")
	check := func(c *connect.Client[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse]) error {
		_, err := c.CallUnary(t.Context(), connect.NewRequest(&healthpb.HealthCheckRequest{}))
		return err
	}

	for i := range 2 {
		if err := check(alice); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	err = check(alice)
	if connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Fatalf("third call: got %v, want resource_exhausted", err)
	}
	var cerr *connect.Error
	if !errors.As(err, &cerr) || cerr.Meta().Get("Retry-After") != "60" {
		t.Errorf("Retry-After: got %v, want 60", err)
	}
	if err := check(bob); err != nil { // another client, its own budget
		t.Errorf("another client: %v", err)
	}

	clock.Advance(time.Minute) // the first client's calls leave the window
	if err := check(alice); err != nil {
		t.Errorf("after a minute: %v", err)
	}
}

// --- docs/testing.md: connect ends ---
