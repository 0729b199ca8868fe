package slidegrpc_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
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
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"
)

// rawCodec sends a message's encoding as it is, so that the test's client
// allocates nothing per call for the body it sends.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return "proto" }

// TestDenyBeforeRead: with ServerOption, five calls carrying 50 MiB
// messages to a spent budget (on a server that accepts 64 MiB messages)
// are denied with RetryInfo before their messages are read: the process,
// client and server together, allocates less than one message for all
// five (an interceptor would have read and decoded 250 MiB first).
func TestDenyBeforeRead(t *testing.T) {
	store := memstore.New()
	t.Cleanup(func() { _ = store.Close() })
	l, err := slidelog.New(store, slidelog.Policy{Name: "peer", Limit: 1, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(slidegrpc.ServerOption(l), grpc.MaxRecvMsgSize(64<<20))
	svc := &testService{calls: make(chan string, 1000)}
	testgrpc.RegisterTestServiceServer(srv, svc)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawCodec{}), grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })

	const method = "/grpc.testing.TestService/UnaryCall"
	small, _ := proto.Marshal(&testgrpc.SimpleRequest{})
	var out []byte
	if err := conn.Invoke(t.Context(), method, &small, &out); err != nil {
		t.Fatalf("first call: %v", err)
	}
	big, err := proto.Marshal(&testgrpc.SimpleRequest{Payload: &testgrpc.Payload{Body: make([]byte, 50<<20)}})
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range 5 {
		err := conn.Invoke(t.Context(), method, &big, &out)
		if status.Code(err) != codes.ResourceExhausted || retryInfo(err) == nil {
			t.Fatalf("50 MiB call %d: got %v, want ResourceExhausted with RetryInfo", i+1, err)
		}
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got >= 50<<20 {
		t.Errorf("allocated for five denied 50 MiB calls: got %d MiB, want less than one message (50 MiB)", got>>20)
	} else {
		t.Logf("allocated for five denied 50 MiB calls: %d KiB", got>>10)
	}
	if got := svc.Reached(); got != 1 {
		t.Errorf("handler calls: got %d, want 1", got)
	}
}

// serveOn serves the test service on lis with opts and returns a client
// dialing target with dial.
func serveOn(t *testing.T, lis net.Listener, target string, opts []grpc.ServerOption, dial ...grpc.DialOption) (testgrpc.TestServiceClient, *testService) {
	t.Helper()
	srv := grpc.NewServer(opts...)
	svc := &testService{calls: make(chan string, 1000)}
	testgrpc.RegisterTestServiceServer(srv, svc)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		if err := <-done; err != nil {
			t.Errorf("Serve after Stop: %v", err) // Stop makes Serve return nil
		}
	})
	conn, err := grpc.NewClient(target, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, dial...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return testgrpc.NewTestServiceClient(conn), svc
}

// TestUnixSocketProxyPeers: with httplimit.ClientIP.UnixSocketProxy, a call
// over a real Unix socket is keyed by the proxy's x-real-ip metadata; the
// same call over an in-memory listener (bufconn), whose peer has no IP
// address either, is keyed as without the option: InvalidArgument.
func TestUnixSocketProxyPeers(t *testing.T) {
	l, err := slidelog.New(memstore.New(), slidelog.Policy{Name: "unix", Limit: 1, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	opts := []grpc.ServerOption{slidegrpc.ServerOption(l, httplimit.WithClientIP(httplimit.ClientIP{UnixSocketProxy: true, Header: "x-real-ip"}))}
	dir, err := os.MkdirTemp("", "slidelog-grpc-") // short: a socket path is at most ~100 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := filepath.Join(dir, "app.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	client, _ := serveOn(t, lis, "unix://"+sock, opts)
	call := func(client testgrpc.TestServiceClient, ip string) codes.Code {
		ctx := metadata.AppendToOutgoingContext(t.Context(), "x-real-ip", ip)
		_, err := client.EmptyCall(ctx, &testgrpc.Empty{})
		return status.Code(err)
	}
	for _, tt := range []struct {
		ip   string
		want codes.Code
	}{{"203.0.113.5", codes.OK}, {"203.0.113.6", codes.OK}, {"203.0.113.5", codes.ResourceExhausted}} {
		if got := call(client, tt.ip); got != tt.want {
			t.Errorf("over a Unix socket, x-real-ip %s: got %v, want %v", tt.ip, got, tt.want)
		}
	}

	buf := bufconn.Listen(1 << 20)
	client, svc := serveOn(t, buf, "passthrough:///bufconn", opts,
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return buf.DialContext(ctx) }))
	if got := call(client, "203.0.113.7"); got != codes.InvalidArgument {
		t.Errorf("over bufconn: got %v, want InvalidArgument (no client address)", got)
	}
	if got := svc.Reached(); got != 0 {
		t.Errorf("handler calls over bufconn: got %d, want 0", got)
	}
}

// TestServerOptionServeHTTP: a server run through net/http
// (grpc.Server.ServeHTTP) calls no tap handle; ServerOption's
// interceptors then limit every call themselves, after reading it, with
// the full trailers-only denial.
func TestServerOptionServeHTTP(t *testing.T) {
	l, err := slidelog.New(memstore.New(), slidelog.Policy{Name: "peer", Limit: 1, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	srv := grpc.NewServer(slidegrpc.ServerOption(l))
	svc := &testService{calls: make(chan string, 1000)}
	testgrpc.RegisterTestServiceServer(srv, svc)
	hs := httptest.NewUnstartedServer(srv)
	hs.Config.Protocols = new(http.Protocols)
	hs.Config.Protocols.SetUnencryptedHTTP2(true)
	hs.Start()
	t.Cleanup(hs.Close)
	conn, err := grpc.NewClient(strings.TrimPrefix(hs.URL, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	client := testgrpc.NewTestServiceClient(conn)
	if _, err := client.EmptyCall(t.Context(), &testgrpc.Empty{}); err != nil {
		t.Fatal(err)
	}
	var trailer metadata.MD
	_, err = client.EmptyCall(t.Context(), &testgrpc.Empty{}, grpc.Trailer(&trailer))
	assertDenied(t, err, trailer)
	if got := svc.Reached(); got != 1 {
		t.Errorf("handler calls: got %d, want 1", got)
	}
}

// TestUnixSocketProxyServeHTTP: served through net/http
// (grpc.Server.ServeHTTP) on a Unix socket, whose peers grpc-go reports
// as "tcp" addresses, a call is keyed by the proxy's x-real-ip metadata
// as over grpc-go's own transport, not refused for want of a client
// address.
func TestUnixSocketProxyServeHTTP(t *testing.T) {
	unix := httplimit.WithClientIP(httplimit.ClientIP{UnixSocketProxy: true, Header: "x-real-ip"})
	for name, opts := range map[string]func(*slidelog.Limiter) []grpc.ServerOption{
		"ServerOption": func(l *slidelog.Limiter) []grpc.ServerOption {
			return []grpc.ServerOption{slidegrpc.ServerOption(l, unix)}
		},
		"interceptors": func(l *slidelog.Limiter) []grpc.ServerOption { return interceptors(l, unix) },
	} {
		t.Run(name, func(t *testing.T) {
			l, err := slidelog.New(memstore.New(), slidelog.Policy{Name: "unix", Limit: 1, Window: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Close() })
			srv := grpc.NewServer(opts(l)...)
			testgrpc.RegisterTestServiceServer(srv, &testService{calls: make(chan string, 1000)})
			dir, err := os.MkdirTemp("", "slidelog-grpc-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.RemoveAll(dir) })
			sock := filepath.Join(dir, "app.sock")
			lis, err := net.Listen("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			hs := &http.Server{Handler: srv, Protocols: new(http.Protocols)}
			hs.Protocols.SetUnencryptedHTTP2(true)
			done := make(chan error, 1)
			go func() { done <- hs.Serve(lis) }()
			t.Cleanup(func() {
				_ = hs.Close()
				if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
					t.Errorf("Serve: %v", err)
				}
			})
			conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = conn.Close() })
			client := testgrpc.NewTestServiceClient(conn)
			for _, tt := range []struct {
				ip   string
				want codes.Code
			}{{"203.0.113.5", codes.OK}, {"203.0.113.6", codes.OK}, {"203.0.113.5", codes.ResourceExhausted}} {
				ctx := metadata.AppendToOutgoingContext(t.Context(), "x-real-ip", tt.ip)
				if _, err := client.EmptyCall(ctx, &testgrpc.Empty{}); status.Code(err) != tt.want {
					t.Errorf("x-real-ip %s: got %v, want %v", tt.ip, err, tt.want)
				}
			}
		})
	}
}

// TestServerOptionUnknownMethods: the tap runs before grpc-go looks a
// method up, so a call's full method may be a name the client made up.
// Keyed by httplimit.ByRoute, such names must not each get a budget of
// their own (a store entry per name, never denied): ServerOption decides
// no call to a method no handler has served, which grpc-go answers with
// Unimplemented, and decides in the tap a method's calls once one has
// reached its handler.
func TestServerOptionUnknownMethods(t *testing.T) {
	for name, key := range map[string]httplimit.KeyFunc{
		"route":          httplimit.ByRoute(),
		"route and peer": httplimit.Composite(httplimit.ByRoute(), httplimit.ByClientIP()),
	} {
		t.Run(name, func(t *testing.T) {
			store := newCountingMemory(t)
			l := slidelogtest.NewLimiter(t, store, slidelog.Policy{Name: "method", Limit: 1, Window: time.Minute})
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			client, svc := serveOn(t, lis, lis.Addr().String(), []grpc.ServerOption{slidegrpc.ServerOption(l, httplimit.WithKeyFunc(key))})
			conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = conn.Close() })
			for i := range 100 {
				err := conn.Invoke(t.Context(), fmt.Sprintf("/made.Up/M%d", i), &testgrpc.Empty{}, &testgrpc.Empty{})
				if got := status.Code(err); got != codes.Unimplemented {
					t.Fatalf("made-up method %d: got %v, want Unimplemented", i, err)
				}
			}
			if got := store.Takes(); got != 0 {
				t.Errorf("store calls for 100 made-up methods: got %d, want 0 (identities %v)", got, store.Identities())
			}
			if _, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{}); err != nil {
				t.Fatal(err)
			}
			var trailer metadata.MD
			_, err = client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{}, grpc.Trailer(&trailer))
			if got := status.Code(err); got != codes.ResourceExhausted {
				t.Errorf("second UnaryCall: got %v, want ResourceExhausted", err)
			}
			if got := first(trailer, slidegrpc.PushbackKey); got != "" {
				t.Errorf("second UnaryCall's pushback: got %q, want none (denied in the tap, before its message is read)", got)
			}
			if got := svc.Reached(); got != 1 {
				t.Errorf("handler calls: got %d, want 1", got)
			}
		})
	}
}
