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
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

const (
	emptyCall  = "/grpc.testing.TestService/EmptyCall"
	unaryCall  = "/grpc.testing.TestService/UnaryCall"
	streamCall = "/grpc.testing.TestService/StreamingOutputCall"
)

// testService answers EmptyCall and UnaryCall, and streams one response
// per ResponseParameters entry. It fails a call whose metadata has
// "fail" with codes.Internal, and counts the calls that reached it.
type testService struct {
	testgrpc.UnimplementedTestServiceServer
	calls chan string
}

func (s *testService) reached(ctx context.Context, method string) error {
	s.calls <- method
	if len(metadata.ValueFromIncomingContext(ctx, "panic")) > 0 {
		panic("handler failed")
	}
	if len(metadata.ValueFromIncomingContext(ctx, "fail")) > 0 {
		return status.Error(codes.Internal, "handler failed")
	}
	if len(metadata.ValueFromIncomingContext(ctx, "hang")) > 0 {
		<-ctx.Done()
		return ctx.Err() // as a handler whose database call the client's deadline cut short
	}
	if len(metadata.ValueFromIncomingContext(ctx, "own-deadline")) > 0 {
		// As a handler whose database call ran out of a deadline of the
		// server's own: the client is still there.
		return fmt.Errorf("inventory lookup: %w", context.DeadlineExceeded)
	}
	return nil
}

func (s *testService) EmptyCall(ctx context.Context, _ *testgrpc.Empty) (*testgrpc.Empty, error) {
	if err := s.reached(ctx, emptyCall); err != nil {
		return nil, err
	}
	return &testgrpc.Empty{}, nil
}

func (s *testService) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	if err := s.reached(ctx, unaryCall); err != nil {
		return nil, err
	}
	return &testgrpc.SimpleResponse{}, nil
}

func (s *testService) StreamingOutputCall(req *testgrpc.StreamingOutputCallRequest, stream grpc.ServerStreamingServer[testgrpc.StreamingOutputCallResponse]) error {
	if err := s.reached(stream.Context(), streamCall); err != nil {
		return err
	}
	for range req.GetResponseParameters() {
		if err := stream.Send(&testgrpc.StreamingOutputCallResponse{}); err != nil {
			return err
		}
	}
	return nil
}

// Reached returns how many calls reached the handlers so far.
func (s *testService) Reached() int { return len(s.calls) }

// serve starts a gRPC server with opts on a real TCP listener on
// 127.0.0.1 and returns a client of it; both stop when the test ends.
func serve(t *testing.T, opts ...grpc.ServerOption) (testgrpc.TestServiceClient, *testService) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(opts...)
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
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return testgrpc.NewTestServiceClient(conn), svc
}

// interceptors returns the server options that install both interceptors.
func interceptors(l *slidelog.Limiter, opts ...httplimit.Option) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(slidegrpc.UnaryServerInterceptor(l, opts...)),
		grpc.ChainStreamInterceptor(slidegrpc.StreamServerInterceptor(l, opts...)),
	}
}

// newCountingMemory returns a CountingStore on a new memory store, which
// is closed when the test ends.
func newCountingMemory(t *testing.T) *slidelogtest.CountingStore {
	t.Helper()
	store := slidelogtest.NewCountingStore(memstore.New())
	t.Cleanup(func() { _ = store.Store.(io.Closer).Close() })
	return store
}

// stores are the stores the adapter is tested on: memory and the test
// Redis Cluster.
func stores(t *testing.T) map[string]slidelogtest.NewStoreFunc {
	return map[string]slidelogtest.NewStoreFunc{
		"memory":  slidelogtest.MemoryStores(),
		"cluster": redistest.ClusterStores(t),
	}
}

// newStore builds a store with newStore, wrapped to count its calls, and
// closes it when the test ends.
func newStore(t *testing.T, newStore slidelogtest.NewStoreFunc) *slidelogtest.CountingStore {
	t.Helper()
	s := newStore(t, nil)
	t.Cleanup(func() {
		if c, ok := s.(io.Closer); ok {
			_ = c.Close()
		}
	})
	return slidelogtest.NewCountingStore(s)
}

// retryInfo returns the RetryInfo detail of err's status, or nil.
func retryInfo(err error) *errdetails.RetryInfo {
	for _, d := range status.Convert(err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri
		}
	}
	return nil
}

// assertDenied checks that err is a denial with a RetryInfo delay in
// (0, 60s] and a retry-after trailer that is the delay in whole seconds,
// rounded up.
func assertDenied(t *testing.T, err error, trailer metadata.MD) {
	t.Helper()
	if got := status.Code(err); got != codes.ResourceExhausted {
		t.Fatalf("code: got %v (%v), want ResourceExhausted", got, err)
	}
	ri := retryInfo(err)
	if ri == nil {
		t.Fatalf("details: got %v, want a RetryInfo", status.Convert(err).Details())
	}
	delay := ri.GetRetryDelay().AsDuration()
	if delay <= 0 || delay > time.Minute {
		t.Errorf("RetryInfo delay: got %v, want in (0, 1m]", delay)
	}
	if got, want := first(trailer, "retry-after"), slidegrpc.RetryAfterSeconds(delay); got != want {
		t.Errorf("retry-after: got %q, want %q", got, want)
	}
}

func first(md metadata.MD, key string) string {
	if vs := md.Get(key); len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// Unary calls and streams get the rate-limit metadata; the call over the
// limit fails with ResourceExhausted and a RetryInfo, and never reaches
// the handler.
func TestDenial(t *testing.T) {
	for name, ns := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Run("unary", func(t *testing.T) {
				l := slidelogtest.NewLimiter(t, newStore(t, ns), slidelog.Policy{Name: "unary", Limit: 2, Window: time.Minute})
				client, svc := serve(t, interceptors(l)...)
				for i, want := range []string{`"unary";r=1;t=60`, `"unary";r=0;t=60`} {
					var header metadata.MD
					if _, err := client.EmptyCall(t.Context(), &testgrpc.Empty{}, grpc.Header(&header)); err != nil {
						t.Fatalf("call %d: %v", i+1, err)
					}
					if got := first(header, "ratelimit"); got != want {
						t.Errorf("call %d ratelimit: got %q, want %q", i+1, got, want)
					}
					if got := first(header, "ratelimit-policy"); got != `"unary";q=2;w=60` {
						t.Errorf("call %d ratelimit-policy: got %q, want %q", i+1, got, `"unary";q=2;w=60`)
					}
				}
				var trailer metadata.MD
				_, err := client.EmptyCall(t.Context(), &testgrpc.Empty{}, grpc.Trailer(&trailer))
				assertDenied(t, err, trailer)
				if got := first(trailer, "ratelimit"); got != `"unary";r=0;t=60` {
					t.Errorf("denied ratelimit: got %q, want %q", got, `"unary";r=0;t=60`)
				}
				if got := svc.Reached(); got != 2 {
					t.Errorf("handler calls: got %d, want 2", got)
				}
			})
			t.Run("stream", func(t *testing.T) {
				l := slidelogtest.NewLimiter(t, newStore(t, ns), slidelog.Policy{Name: "stream", Limit: 1, Window: time.Minute})
				client, svc := serve(t, interceptors(l)...)
				req := &testgrpc.StreamingOutputCallRequest{ResponseParameters: make([]*testgrpc.ResponseParameters, 3)}
				stream, err := client.StreamingOutputCall(t.Context(), req)
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for {
					if _, err := stream.Recv(); err == io.EOF {
						break
					} else if err != nil {
						t.Fatalf("admitted stream: %v", err)
					}
					n++
				}
				if n != 3 {
					t.Errorf("admitted stream messages: got %d, want 3 (one decision per stream)", n)
				}
				if header, _ := stream.Header(); first(header, "ratelimit") != `"stream";r=0;t=60` {
					t.Errorf("stream ratelimit: got %q, want %q", first(header, "ratelimit"), `"stream";r=0;t=60`)
				}
				stream, err = client.StreamingOutputCall(t.Context(), req)
				if err != nil {
					t.Fatal(err)
				}
				_, err = stream.Recv()
				assertDenied(t, err, stream.Trailer())
				if got := svc.Reached(); got != 1 {
					t.Errorf("handler calls: got %d, want 1", got)
				}
			})
		})
	}
}

// By default a call is keyed by its peer address; forwarding metadata is
// believed only from a trusted proxy, and only the one named key.
func TestKeyByPeer(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts []httplimit.Option
		want string
	}{
		{"default ignores forwarding", nil, "ip:127.0.0.1"},
		{"trusted peer, named key", []httplimit.Option{
			httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: []string{"127.0.0.1"}, Header: "X-Forwarded-For"}),
		}, "ip:198.51.100.7"},
		{"trusted peer, other key named", []httplimit.Option{
			httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: []string{"127.0.0.0/8"}, Header: "cf-connecting-ip"}),
		}, "ip:127.0.0.1"},
		{"untrusted peer", []httplimit.Option{
			httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: []string{"10.0.0.0/8"}, Header: "x-forwarded-for"}),
		}, "ip:127.0.0.1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			store := newCountingMemory(t)
			client, _ := serve(t, interceptors(slidelogtest.NewLimiter(t, store, slidelog.Policy{Name: "peer", Limit: 10, Window: time.Minute}), tt.opts...)...)
			ctx := metadata.AppendToOutgoingContext(t.Context(),
				"x-forwarded-for", "203.0.113.9, 198.51.100.7", "x-real-ip", "192.0.2.99")
			if _, err := client.EmptyCall(ctx, &testgrpc.Empty{}); err != nil {
				t.Fatal(err)
			}
			if got := store.Identities(); len(got) != 1 || got[tt.want] != 1 {
				t.Errorf("identities: got %v, want only %s once", got, tt.want)
			}
		})
	}
}

// httplimit.ByHeader keys by a metadata value; a call without it fails
// with InvalidArgument before any store call. httplimit.ByRoute keys by
// full method.
func TestKeyByMetadataAndMethod(t *testing.T) {
	t.Run("metadata", func(t *testing.T) {
		store := newCountingMemory(t)
		client, svc := serve(t, interceptors(slidelogtest.NewLimiter(t, store, slidelog.Policy{Name: "key", Limit: 1, Window: time.Minute}), httplimit.WithKeyFunc(httplimit.ByHeader("x-api-key")))...)
		for _, tt := range []struct {
			give string
			want codes.Code
		}{{"alice", codes.OK}, {"alice", codes.ResourceExhausted}, {"bob", codes.OK}, {"", codes.InvalidArgument}} {
			ctx := t.Context()
			if tt.give != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, "x-api-key", tt.give)
			}
			_, err := client.EmptyCall(ctx, &testgrpc.Empty{})
			if got := status.Code(err); got != tt.want {
				t.Errorf("key %q: got %v, want %v", tt.give, got, tt.want)
			}
		}
		if got := store.Takes(); got != 3 {
			t.Errorf("store calls: got %d, want 3 (none for the call without a key)", got)
		}
		if got := svc.Reached(); got != 2 {
			t.Errorf("handler calls: got %d, want 2", got)
		}
		if got := store.Identities(); got["h:x-api-key:alice"] != 2 || got["h:x-api-key:bob"] != 1 {
			t.Errorf("identities: got %v, want h:x-api-key:alice twice, h:x-api-key:bob once", got)
		}
	})
	t.Run("full method", func(t *testing.T) {
		store := newCountingMemory(t)
		client, _ := serve(t, interceptors(slidelogtest.NewLimiter(t, store, slidelog.Policy{Name: "method", Limit: 1, Window: time.Minute}), httplimit.WithKeyFunc(httplimit.ByRoute()))...)
		if _, err := client.EmptyCall(t.Context(), &testgrpc.Empty{}); err != nil {
			t.Fatal(err)
		}
		if _, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{}); err != nil {
			t.Errorf("UnaryCall after EmptyCall: got %v, want its own budget", err)
		}
		if _, err := client.EmptyCall(t.Context(), &testgrpc.Empty{}); status.Code(err) != codes.ResourceExhausted {
			t.Errorf("second EmptyCall: got %v, want ResourceExhausted", err)
		}
		if got := store.Identities(); got["r:"+emptyCall] != 2 || got["r:"+unaryCall] != 1 {
			t.Errorf("identities: got %v, want r:%s twice, r:%s once", got, emptyCall, unaryCall)
		}
	})
}

// WithMethodCosts charges listed methods more; WithMethodLimiters gives a
// method its own policy and budget; SkipPaths skips full methods.
func TestPerMethod(t *testing.T) {
	store := memstore.New()
	t.Cleanup(func() { _ = store.Close() })
	shared := slidelogtest.NewLimiter(t, store, slidelog.Policy{Name: "shared", Limit: 3, Window: time.Minute})
	streams := slidelogtest.NewLimiter(t, store, slidelog.Policy{Name: "streams", Limit: 1, Window: time.Minute})
	client, _ := serve(t, interceptors(shared,
		slidegrpc.WithMethodCosts(map[string]int{unaryCall: 2}),
		slidegrpc.WithMethodLimiters(map[string]*slidelog.Limiter{streamCall: streams}),
		httplimit.WithSkipFunc(httplimit.SkipPaths("/grpc.testing.TestService/CacheableUnaryCall")),
	)...)
	var header metadata.MD
	if _, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{}, grpc.Header(&header)); err != nil {
		t.Fatal(err)
	}
	if got := first(header, "ratelimit"); got != `"shared";r=1;t=60` {
		t.Errorf("UnaryCall (cost 2) ratelimit: got %q, want %q", got, `"shared";r=1;t=60`)
	}
	if _, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{}); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("second UnaryCall (cost 2, 1 left): got %v, want ResourceExhausted", err)
	}
	if _, err := client.EmptyCall(t.Context(), &testgrpc.Empty{}); err != nil {
		t.Errorf("EmptyCall (cost 1, 1 left): %v", err)
	}
	for i, want := range []codes.Code{codes.OK, codes.ResourceExhausted} {
		stream, err := client.StreamingOutputCall(t.Context(), &testgrpc.StreamingOutputCallRequest{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = stream.Recv()
		header, _ := stream.Header()
		if err != io.EOF {
			header = stream.Trailer() // a denial is trailers-only
		}
		if err == io.EOF {
			err = nil
		}
		if got := status.Code(err); got != want {
			t.Errorf("stream %d: got %v, want %v", i+1, got, want)
		}
		if got := first(header, "ratelimit-policy"); got != `"streams";q=1;w=60` {
			t.Errorf("stream %d ratelimit-policy: got %q, want the method's own policy", i+1, got)
		}
	}
	// Skipped: no decision, no metadata, reaches the unimplemented handler.
	header = nil
	_, err := client.CacheableUnaryCall(t.Context(), &testgrpc.SimpleRequest{}, grpc.Header(&header))
	if got := status.Code(err); got != codes.Unimplemented || first(header, "ratelimit") != "" {
		t.Errorf("skipped method: got %v with ratelimit %q, want Unimplemented and none", got, first(header, "ratelimit"))
	}
}

// A limiter that cannot decide fails the call with Unavailable and a
// generic message.
func TestUnavailable(t *testing.T) {
	store := memstore.New()
	t.Cleanup(func() { _ = store.Close() })
	l := slidelogtest.NewLimiter(t, store, slidelog.Policy{Name: "closed", Limit: 10, Window: time.Minute})
	client, svc := serve(t, interceptors(l)...)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := client.EmptyCall(t.Context(), &testgrpc.Empty{})
	st := status.Convert(err)
	if st.Code() != codes.Unavailable || st.Message() != "rate limiter unavailable; try again later" {
		t.Errorf("got %v %q, want Unavailable with the generic message", st.Code(), st.Message())
	}
	if got := svc.Reached(); got != 0 {
		t.Errorf("handler calls: got %d, want 0", got)
	}
}

// WithRefundOnServerError refunds calls whose handler failed with a
// server-side code.
func TestRefundOnServerError(t *testing.T) {
	for _, tt := range limitSetups {
		t.Run(tt.name, func(t *testing.T) {
			store := newCountingMemory(t)
			client, _ := serve(t, tt.opts(slidelogtest.NewLimiter(t, store, slidelog.Policy{Name: "refund", Limit: 1, Window: time.Minute}), httplimit.WithRefundOnServerError())...)
			failing := metadata.AppendToOutgoingContext(t.Context(), "fail", "1")
			for i, tt := range []struct {
				ctx  context.Context
				want codes.Code
			}{{failing, codes.Internal}, {failing, codes.Internal}, {t.Context(), codes.OK}, {t.Context(), codes.ResourceExhausted}} {
				if _, err := client.EmptyCall(tt.ctx, &testgrpc.Empty{}); status.Code(err) != tt.want {
					t.Errorf("call %d: got %v, want %v", i+1, status.Code(err), tt.want)
				}
			}
			if got := store.Refunds(); got != 2 {
				t.Errorf("refunds: got %d, want 2", got)
			}
		})
	}
}

// TestNoRefundForClientDeadline: a handler that returns its context's
// error when the client's deadline passes or the client cancels ends
// with DeadlineExceeded or Canceled on the wire (grpc-go's
// status.FromContextError), not a server-side code, so
// WithRefundOnServerError refunds nothing: otherwise a client that gives
// each call a deadline shorter than the handler's work would have every
// call's work done for free.
func TestNoRefundForClientDeadline(t *testing.T) {
	for _, tt := range limitSetups {
		t.Run(tt.name, func(t *testing.T) {
			store := newCountingMemory(t)
			client, svc := serve(t, tt.opts(slidelogtest.NewLimiter(t, store, slidelog.Policy{Name: "deadline", Limit: 2, Window: time.Minute}), httplimit.WithRefundOnServerError())...)
			hanging := metadata.AppendToOutgoingContext(t.Context(), "hang", "1")
			for i := range 5 {
				ctx, cancel := context.WithTimeout(hanging, 50*time.Millisecond)
				_, err := client.EmptyCall(ctx, &testgrpc.Empty{})
				cancel()
				want := codes.DeadlineExceeded
				if i >= 2 {
					want = codes.ResourceExhausted
				}
				if got := status.Code(err); got != want {
					t.Errorf("call %d: got %v, want %v", i+1, got, want)
				}
			}
			ctx, cancel := context.WithCancel(hanging)
			time.AfterFunc(50*time.Millisecond, cancel)
			_, _ = client.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{})
			if got := store.Refunds(); got != 0 {
				t.Errorf("refunds: got %d, want 0", got)
			}
			if got := svc.Reached(); got != 2 {
				t.Errorf("handler calls: got %d, want 2 (the limit)", got)
			}
		})
	}
}

// TestNoRefundForHandlerContextError: a handler that returns a context
// error of its own while its client waits (a downstream call out of the
// server's deadline) ends with DeadlineExceeded on the wire, as grpc-go
// sends it, not Unknown, so WithRefundOnServerError refunds nothing. The
// client's context stays live, so this is finishStatus's doing, not
// httplimit.Decision.Finish's check of a client gone.
func TestNoRefundForHandlerContextError(t *testing.T) {
	for _, tt := range limitSetups {
		t.Run(tt.name, func(t *testing.T) {
			store := newCountingMemory(t)
			client, svc := serve(t, tt.opts(slidelogtest.NewLimiter(t, store, slidelog.Policy{Name: "own", Limit: 2, Window: time.Minute}), httplimit.WithRefundOnServerError())...)
			ctx := metadata.AppendToOutgoingContext(t.Context(), "own-deadline", "1")
			for i := range 5 {
				_, err := client.EmptyCall(ctx, &testgrpc.Empty{})
				want := codes.DeadlineExceeded
				if i >= 2 {
					want = codes.ResourceExhausted
				}
				if got := status.Code(err); got != want {
					t.Errorf("call %d: got %v, want %v", i+1, got, want)
				}
			}
			if got := store.Refunds(); got != 0 {
				t.Errorf("refunds: got %d, want 0", got)
			}
			if got := svc.Reached(); got != 2 {
				t.Errorf("handler calls: got %d, want 2 (the limit)", got)
			}
		})
	}
}

func TestInvalidOptionPanics(t *testing.T) {
	store := memstore.New()
	t.Cleanup(func() { _ = store.Close() })
	l := slidelogtest.NewLimiter(t, store, slidelog.Policy{Name: "opts", Limit: 1, Window: time.Minute})
	for name, opts := range map[string]func() []httplimit.Option{
		"cidr": func() []httplimit.Option {
			return []httplimit.Option{httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: []string{"10.0.0.0/33"}})}
		},
		"no header": func() []httplimit.Option {
			return []httplimit.Option{httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: []string{"10.0.0.0/8"}})}
		},
		"header, no proxy": func() []httplimit.Option {
			return []httplimit.Option{httplimit.WithClientIP(httplimit.ClientIP{Header: "x-forwarded-for"})}
		},
		"cost": func() []httplimit.Option { return []httplimit.Option{httplimit.WithCost(0)} },
		"method cost": func() []httplimit.Option {
			return []httplimit.Option{slidegrpc.WithMethodCosts(map[string]int{emptyCall: 0})}
		},
		"method name": func() []httplimit.Option {
			return []httplimit.Option{slidegrpc.WithMethodCosts(map[string]int{"EmptyCall": 2})}
		},
		"limiter method name": func() []httplimit.Option {
			return []httplimit.Option{slidegrpc.WithMethodLimiters(map[string]*slidelog.Limiter{"/a/b/c": l})}
		},
		"nil method limit": func() []httplimit.Option {
			return []httplimit.Option{slidegrpc.WithMethodLimiters(map[string]*slidelog.Limiter{emptyCall: nil})}
		},
		"cost func and map": func() []httplimit.Option {
			return []httplimit.Option{httplimit.WithCostFunc(func(*httplimit.Request) int { return 1 }), slidegrpc.WithMethodCosts(map[string]int{emptyCall: 2})}
		},
		"cost and map": func() []httplimit.Option {
			return []httplimit.Option{httplimit.WithCost(2), slidegrpc.WithMethodCosts(map[string]int{emptyCall: 2})}
		},
		"limiter func and map": func() []httplimit.Option {
			return []httplimit.Option{httplimit.WithLimiterFunc(func(*httplimit.Request) *slidelog.Limiter { return nil }),
				slidegrpc.WithMethodLimiters(map[string]*slidelog.Limiter{emptyCall: l})}
		},
		"http handler": func() []httplimit.Option {
			return []httplimit.Option{httplimit.WithDeniedHandler(func(error) {})}
		},
	} {
		t.Run(name, func(t *testing.T) {
			assert := func(build func()) {
				t.Helper()
				defer func() {
					if recover() == nil {
						t.Error("did not panic")
					}
				}()
				build()
			}
			assert(func() { slidegrpc.UnaryServerInterceptor(l, opts()...) })
			assert(func() { slidegrpc.StreamServerInterceptor(l, opts()...) })
			assert(func() { slidegrpc.NewMiddlewareLimiter(l, opts()...) })
		})
	}
	t.Run("nil limiter", func(t *testing.T) {
		defer func() {
			if recover() == nil {
				t.Error("did not panic")
			}
		}()
		slidegrpc.UnaryServerInterceptor(nil)
	})
}

func TestErrorStatus(t *testing.T) {
	for _, tt := range []struct {
		give error
		want codes.Code
	}{
		{httplimit.ErrNoKey, codes.InvalidArgument},
		{httplimit.ErrIdentityTooLong, codes.InvalidArgument},
		{httplimit.ErrMisconfigured, codes.Internal},
		{slidelog.ErrInvalidCost, codes.Internal},
		{slidelog.ErrUnavailable, codes.Unavailable},
		{context.DeadlineExceeded, codes.Unavailable},
		{slidelog.ErrClosed, codes.Unavailable},
	} {
		st := slidegrpc.ErrorStatus(tt.give)
		if st.Code() != tt.want {
			t.Errorf("ErrorStatus(%v): got %v, want %v", tt.give, st.Code(), tt.want)
		}
		if msg := st.Message(); msg == tt.give.Error() || len(st.Details()) != 0 {
			t.Errorf("ErrorStatus(%v): message %q and details %v carry the error", tt.give, msg, st.Details())
		}
	}
}

func TestDeniedStatus(t *testing.T) {
	p := slidelog.Policy{Name: "per-minute", Limit: 1, Window: time.Minute}
	res := slidelog.NewResult([]slidelog.PolicyResult{{Policy: p, Allowed: false, RetryAfter: 1500 * time.Millisecond}}, memstore.Source)
	st := slidegrpc.DeniedStatus(res)
	if st.Code() != codes.ResourceExhausted || st.Message() != "rate limit exceeded; retry after 2 seconds" {
		t.Errorf("got %v %q, want ResourceExhausted, retry after 2 seconds", st.Code(), st.Message())
	}
	if got := retryInfo(st.Err()).GetRetryDelay().AsDuration(); got != res.RetryAfter {
		t.Errorf("RetryInfo delay: got %v, want %v", got, res.RetryAfter)
	}
	var subjects []string
	for _, d := range st.Details() {
		if q, ok := d.(*errdetails.QuotaFailure); ok {
			for _, v := range q.GetViolations() {
				subjects = append(subjects, v.GetSubject())
			}
		}
	}
	if len(subjects) != 1 || subjects[0] != "policy:per-minute" {
		t.Errorf("QuotaFailure subjects: got %v, want [policy:per-minute]", subjects)
	}
}
