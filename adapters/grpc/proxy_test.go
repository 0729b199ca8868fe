package slidegrpc_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	slidegrpc "github.com/slidelog/slidelog/adapters/grpc"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/slidelogtest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// dialFrom returns a client of addr whose connections come from the
// loopback address from.
func dialFrom(t *testing.T, addr, from string) testgrpc.TestServiceClient {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			return d.DialContext(ctx, "tcp", a)
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return testgrpc.NewTestServiceClient(conn)
}

// listen starts a gRPC server with opts on 127.0.0.1 and returns its
// address; it stops when the test ends.
func listen(t *testing.T, opts ...grpc.ServerOption) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(opts...)
	testgrpc.RegisterTestServiceServer(srv, &testService{calls: make(chan string, 1000)})
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		if err := <-done; err != nil {
			t.Errorf("Serve after Stop: %v", err) // Stop makes Serve return nil
		}
	})
	return lis.Addr().String()
}

// spoofCalls makes 5 calls, each with a fresh spoofed x-forwarded-for,
// and counts their codes.
func spoofCalls(t *testing.T, client testgrpc.TestServiceClient) map[codes.Code]int {
	t.Helper()
	got := map[codes.Code]int{}
	for i := range 5 {
		ctx := metadata.AppendToOutgoingContext(t.Context(), "x-forwarded-for", fmt.Sprintf("198.51.100.%d", i+1))
		_, err := client.EmptyCall(ctx, &testgrpc.Empty{})
		got[status.Code(err)]++
	}
	return got
}

// TestTrustAllBehindNginx: ClientIP.AllPeersTrusted behind nginx's grpc_pass
// appending the peer to x-forwarded-for ($proxy_add_x_forwarded_for): a
// client on another loopback address spoofing x-forwarded-for metadata is
// one identity, the address nginx appended: 2 of 5 calls pass at limit 2.
// The trusted-proxy row spoofed directly (no nginx) keys by the peer.
func TestTrustAllBehindNginx(t *testing.T) {
	for _, tt := range []struct {
		name  string
		opts  []httplimit.Option
		nginx bool
	}{
		{"trust-all via nginx", []httplimit.Option{httplimit.WithClientIP(httplimit.ClientIP{AllPeersTrusted: true, Header: "X-Forwarded-For"})}, true},
		{"trusted nginx via nginx", []httplimit.Option{httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: []string{"127.0.0.1"}, Header: "X-Forwarded-For"})}, true},
		{"trusted nginx, app reached directly", []httplimit.Option{httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: []string{"127.0.0.1"}, Header: "X-Forwarded-For"})}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			store := newCountingMemory(t)
			addr := listen(t, interceptors(slidelogtest.NewLimiter(t, store, slidelog.Policy{Name: "peer", Limit: 2, Window: time.Minute}), tt.opts...)...)
			if tt.nginx {
				port := slidelogtest.StartNginx(t, "http2", fmt.Sprintf(`		location / {
			grpc_pass grpc://%s;
			grpc_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
		}`, addr))
				addr = fmt.Sprintf("127.0.0.1:%d", port)
			}
			got := spoofCalls(t, dialFrom(t, addr, slidelogtest.AttackerAddr))
			if got[codes.OK] != 2 || got[codes.ResourceExhausted] != 3 {
				t.Errorf("codes: got %v, want 2 OK and 3 ResourceExhausted", got)
			}
			want := "ip:" + slidelogtest.AttackerAddr
			if keys := store.Identities(); len(keys) != 1 || keys[want] < 3 {
				t.Errorf("identities: got %v, want only %s (denials may come from the deny cache)", keys, want)
			}
		})
	}
}

// TestBehindHAProxy: the HAProxy row as written, `option forwardfor` on
// an HTTP/2 frontend and backend (`proto h2`), with HAProxy's address
// trusted or every peer trusted, with the interceptors and with
// ServerOption (which reads x-forwarded-for in its tap): HAProxy appends
// the address it saw after the client's own x-forwarded-for, so a client
// on another loopback address spoofing it is one identity, 2 of 5 calls
// at limit 2. With `option forwardfor if-none`, which the page warns
// against, HAProxy passes the client's value on and every spoofed value
// is an identity of its own.
func TestBehindHAProxy(t *testing.T) {
	trusted := []httplimit.Option{httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: []string{"127.0.0.1"}, Header: "X-Forwarded-For"})}
	trustAll := []httplimit.Option{httplimit.WithClientIP(httplimit.ClientIP{AllPeersTrusted: true, Header: "X-Forwarded-For"})}
	for _, tt := range []struct {
		name     string
		opts     []httplimit.Option
		tap      bool
		frontend string
		spoofed  bool
	}{
		{"trusted", trusted, false, "\toption forwardfor", false},
		{"trust-all", trustAll, false, "\toption forwardfor", false},
		{"trusted, ServerOption", trusted, true, "\toption forwardfor", false},
		{"if-none", trusted, false, "\toption forwardfor if-none", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			store := newCountingMemory(t)
			l := slidelogtest.NewLimiter(t, store, slidelog.Policy{Name: "peer", Limit: 2, Window: time.Minute})
			opts := interceptors(l, tt.opts...)
			if tt.tap {
				opts = []grpc.ServerOption{slidegrpc.ServerOption(l, tt.opts...)}
			}
			addr := listen(t, opts...)
			port := slidelogtest.StartHAProxy(t, "proto h2", tt.frontend, "\tserver app "+addr+" proto h2")
			got := spoofCalls(t, dialFrom(t, fmt.Sprintf("127.0.0.1:%d", port), slidelogtest.AttackerAddr))
			if tt.spoofed {
				if got[codes.OK] != 5 || len(store.Identities()) != 5 {
					t.Errorf("if-none: got %v and identities %v, want 5 OK under 5 spoofed identities (the hazard the page warns of)", got, store.Identities())
				}
				return
			}
			if got[codes.OK] != 2 || got[codes.ResourceExhausted] != 3 {
				t.Errorf("codes: got %v, want 2 OK and 3 ResourceExhausted", got)
			}
			want := "ip:" + slidelogtest.AttackerAddr
			if keys := store.Identities(); len(keys) != 1 || keys[want] < 3 {
				t.Errorf("identities: got %v, want only %s (denials may come from the deny cache)", keys, want)
			}
		})
	}
}

// TestMetadataSentTwice: ByHeader refuses metadata sent twice, so a
// client's own value before a gateway's never becomes the key.
func TestMetadataSentTwice(t *testing.T) {
	store := newCountingMemory(t)
	client, svc := serve(t, interceptors(slidelogtest.NewLimiter(t, store, slidelog.Policy{Name: "user", Limit: 2, Window: time.Minute}), httplimit.WithKeyFunc(httplimit.ByHeader("x-user-id")))...)
	ctx := metadata.AppendToOutgoingContext(t.Context(), "x-user-id", "victim", "x-user-id", "gateway-user")
	if _, err := client.EmptyCall(ctx, &testgrpc.Empty{}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("x-user-id twice: got %v, want InvalidArgument", err)
	}
	if store.Takes() != 0 || svc.Reached() != 0 {
		t.Errorf("store calls %d, handler calls %d: want 0 and 0", store.Takes(), svc.Reached())
	}
}

// TestMintedIPv6Prefixes: behind a trusted proxy, a client rotating /64s
// of two /48s through x-forwarded-for cannot fill a small memory store
// and lock a new client out: past 64 /64s, a /48's further ones share its
// identity.
func TestMintedIPv6Prefixes(t *testing.T) {
	const table, minted = 200, 1000
	store := slidelogtest.NewCountingStore(memstore.New(memstore.WithMaxKeys(table)))
	t.Cleanup(func() { _ = store.Store.(io.Closer).Close() })
	client, _ := serve(t, interceptors(slidelogtest.NewLimiter(t, store, slidelog.Policy{Name: "minted", Limit: 1, Window: time.Minute}),
		httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: []string{"127.0.0.1"}, Header: "x-forwarded-for"}))...)
	call := func(xff string) error {
		_, err := client.EmptyCall(metadata.AppendToOutgoingContext(t.Context(), "x-forwarded-for", xff), &testgrpc.Empty{})
		return err
	}
	for i := range minted {
		if err := call(fmt.Sprintf("2001:db8:%x:%x::1", 0xa0+i%2, i/2)); err != nil && status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("minted /64 %d: %v", i, err)
		}
	}
	if err := call("2001:db8:ff:1::1"); err != nil {
		t.Errorf("new client: got %v, want admitted", err)
	}
	if n, most := len(store.Identities()), 2*(httplimit.DefaultIPv6PrefixesPerNetwork+1)+1; n > most {
		t.Errorf("identities: got %d, want at most %d", n, most)
	}
}
