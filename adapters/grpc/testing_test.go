package slidegrpc_test

import (
	"context"
	"net"
	"testing"
	"time"

	slidegrpc "github.com/slidelog/slidelog/adapters/grpc"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/slidelogtest"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
)

// docs/testing.md shows the code between the markers below verbatim.

// --- docs/testing.md: grpc begins ---

// newServer is the application under test: the gRPC server your service
// builds, given the limiter to use (here it serves grpc-go's health
// service).
func newServer(l *slidelog.Limiter) *grpc.Server {
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(slidegrpc.UnaryServerInterceptor(l)))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	return srv
}

func TestServerRateLimit(t *testing.T) {
	clock := slidelogtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	store := memstore.New(memstore.WithClock(clock.Now))
	t.Cleanup(func() { _ = store.Close() })
	l, err := slidelog.New(store, slidelog.Policy{Name: "calls", Limit: 2, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })

	// An in-memory listener whose connections say which client they are:
	// bufconn alone has no client address, which the default key needs.
	lis := bufconn.Listen(1 << 20)
	peers := slidelogtest.NewPeerListener(lis, func(ctx context.Context) (net.Conn, error) { return lis.DialContext(ctx) })
	srv := newServer(l)
	go func() { _ = srv.Serve(peers) }()
	t.Cleanup(srv.Stop)

	// client returns a health client whose calls come from ip.
	client := func(ip string) healthpb.HealthClient {
		conn, err := grpc.NewClient("passthrough:///bufnet",
			grpc.WithContextDialer(peers.DialFrom(ip)),
			grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return healthpb.NewHealthClient(conn)
	}
	alice, bob := client("203.0.113.7"), client("198.51.100.1")
	check := func(c healthpb.HealthClient) error {
		_, err := c.Check(t.Context(), &healthpb.HealthCheckRequest{})
		return err
	}

	for i := range 2 {
		if err := check(alice); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	err = check(alice)
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("third call: got %v, want ResourceExhausted", err)
	}
	var delay time.Duration // when to retry: the status's RetryInfo
	for _, d := range status.Convert(err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			delay = ri.GetRetryDelay().AsDuration()
		}
	}
	if delay != time.Minute {
		t.Errorf("retry delay: got %v, want 1m0s", delay)
	}
	if err := check(bob); err != nil { // another client, its own budget
		t.Errorf("another client: %v", err)
	}

	clock.Advance(time.Minute) // the first client's calls leave the window
	if err := check(alice); err != nil {
		t.Errorf("after a minute: %v", err)
	}
}

// --- docs/testing.md: grpc ends ---

// Over bufconn without a PeerListener no call has a client address: the
// default key fails every call with InvalidArgument, which is what
// PeerListener is for.
func TestBufconnWithoutPeerListener(t *testing.T) {
	l, err := slidelog.New(memstore.New(), slidelog.PerMinute(5))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	lis := bufconn.Listen(1 << 20)
	srv := newServer(l)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	_, err = healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("got %v, want InvalidArgument", err)
	}
}
