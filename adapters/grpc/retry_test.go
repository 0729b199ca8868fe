package slidegrpc_test

import (
	"context"
	"io"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/ratelimit"
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

// retryConfig is gRPC's standard retry policy (A6) for RESOURCE_EXHAUSTED:
// its own backoff is short, so only the server's pushback can make a
// retry wait for the window.
const retryConfig = `{"methodConfig":[{"name":[{"service":"grpc.testing.TestService"}],
 "retryPolicy":{"maxAttempts":3,"initialBackoff":"0.01s","maxBackoff":"0.01s",
 "backoffMultiplier":1.0,"retryableStatusCodes":["RESOURCE_EXHAUSTED"]}}]}`

// retryWindow is the window of the policies the retry tests use: short,
// so that a client waiting for it finishes the test quickly.
const retryWindow = 300 * time.Millisecond

// attempts counts the calls that reach the server, before any limiter.
type attempts struct{ n atomic.Int64 }

func (a *attempts) options() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			a.n.Add(1)
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			a.n.Add(1)
			return h(srv, ss)
		}),
	}
}

// serveWithClientOptions is serve with the client's dial options.
func serveWithClientOptions(t *testing.T, server []grpc.ServerOption, client ...grpc.DialOption) testgrpc.TestServiceClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(server...)
	testgrpc.RegisterTestServiceServer(srv, &testService{calls: make(chan string, 1000)})
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	conn, err := grpc.NewClient(lis.Addr().String(),
		append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, client...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return testgrpc.NewTestServiceClient(conn)
}

// A grpc-go client with a retry policy for RESOURCE_EXHAUSTED waits for
// the pushback the denial carries and succeeds once the window has room:
// two attempts, unary and streaming, with slidelog's interceptors and with
// go-grpc-middleware's ratelimit interceptors in the chain.
func TestClientRetryPolicy(t *testing.T) {
	for _, tt := range []struct {
		name   string
		server func(l *slidelog.Limiter) []grpc.ServerOption
	}{
		{"interceptors", func(l *slidelog.Limiter) []grpc.ServerOption { return interceptors(l) }},
		{"go-grpc-middleware", func(l *slidelog.Limiter) []grpc.ServerOption {
			lim := slidegrpc.NewMiddlewareLimiter(l)
			return []grpc.ServerOption{
				grpc.ChainUnaryInterceptor(ratelimit.UnaryServerInterceptor(lim)),
				grpc.ChainStreamInterceptor(ratelimit.StreamServerInterceptor(lim)),
			}
		}},
	} {
		for _, kind := range []string{"unary", "stream"} {
			t.Run(tt.name+"/"+kind, func(t *testing.T) {
				store := memstore.New()
				t.Cleanup(func() { _ = store.Close() })
				l, err := slidelog.New(store, slidelog.Policy{Name: "retry", Limit: 1, Window: retryWindow})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = l.Close() })
				var a attempts
				client := serveWithClientOptions(t, append(a.options(), tt.server(l)...), grpc.WithDefaultServiceConfig(retryConfig))
				call := func() error {
					if kind == "unary" {
						_, err := client.EmptyCall(t.Context(), &testgrpc.Empty{})
						return err
					}
					stream, err := client.StreamingOutputCall(t.Context(), &testgrpc.StreamingOutputCallRequest{
						ResponseParameters: make([]*testgrpc.ResponseParameters, 1)})
					if err != nil {
						return err
					}
					for {
						if _, err := stream.Recv(); err == io.EOF {
							return nil
						} else if err != nil {
							return err
						}
					}
				}
				if err := call(); err != nil {
					t.Fatalf("first call: %v", err)
				}
				a.n.Store(0)
				start := time.Now()
				err = call()
				elapsed := time.Since(start)
				t.Logf("retried call: attempts %d, elapsed %v, code %v", a.n.Load(), elapsed.Round(time.Millisecond), status.Code(err))
				if err != nil {
					t.Fatalf("retried call: got %v, want OK after waiting for the window", err)
				}
				if got := a.n.Load(); got != 2 {
					t.Errorf("attempts: got %d, want 2 (denied, then admitted after the pushback)", got)
				}
				if elapsed < retryWindow/2 {
					t.Errorf("elapsed: got %v, want the client to have waited for the window", elapsed)
				}
			})
		}
	}
}

// A client without a retry policy sees the whole denial at once: the
// status with its details, and the rate-limit metadata, retry-after and
// grpc-retry-pushback-ms in the trailers of a trailers-only response.
func TestDenialTrailers(t *testing.T) {
	for _, kind := range []string{"unary", "stream"} {
		t.Run(kind, func(t *testing.T) {
			store := memstore.New()
			t.Cleanup(func() { _ = store.Close() })
			l := slidelogtest.NewLimiter(t, store, slidelog.Policy{Name: "trailers", Limit: 1, Window: time.Minute})
			client, _ := serve(t, interceptors(l, httplimit.WithKeyFunc(httplimit.ByRoute()))...)
			var header, trailer metadata.MD
			call := func() error {
				if kind == "unary" {
					_, err := client.EmptyCall(t.Context(), &testgrpc.Empty{}, grpc.Header(&header), grpc.Trailer(&trailer))
					return err
				}
				stream, err := client.StreamingOutputCall(t.Context(), &testgrpc.StreamingOutputCallRequest{})
				if err != nil {
					return err
				}
				for {
					if _, err = stream.Recv(); err != nil {
						break
					}
				}
				header, _ = stream.Header()
				trailer = stream.Trailer()
				if err == io.EOF {
					return nil
				}
				return err
			}
			if err := call(); err != nil {
				t.Fatalf("first call: %v", err)
			}
			if got := first(header, "ratelimit"); got != `"trailers";r=0;t=60` {
				t.Errorf("admitted: ratelimit header %q, want %q", got, `"trailers";r=0;t=60`)
			}
			err := call()
			assertDenied(t, err, trailer)
			if got := first(trailer, "ratelimit"); got != `"trailers";r=0;t=60` {
				t.Errorf("denied: ratelimit trailer %q, want %q", got, `"trailers";r=0;t=60`)
			}
			if got := first(trailer, "ratelimit-policy"); got != `"trailers";q=1;w=60` {
				t.Errorf("denied: ratelimit-policy trailer %q, want %q", got, `"trailers";q=1;w=60`)
			}
			ms, perr := strconv.ParseInt(first(trailer, "grpc-retry-pushback-ms"), 10, 64)
			delay := retryInfo(err).GetRetryDelay().AsDuration()
			if perr != nil || time.Duration(ms)*time.Millisecond < delay || time.Duration(ms-1)*time.Millisecond >= delay {
				t.Errorf("grpc-retry-pushback-ms: got %q, want the RetryInfo delay %v rounded up to ms", first(trailer, "grpc-retry-pushback-ms"), delay)
			}
			if first(header, "ratelimit") != "" || first(header, "retry-after") != "" {
				t.Errorf("denied: header metadata %v, want none (trailers-only)", header)
			}
			if st := status.Convert(err); len(st.Details()) != 2 || st.Code() != codes.ResourceExhausted {
				t.Errorf("denied: details %v, want RetryInfo and QuotaFailure", st.Details())
			}
		})
	}
}

// LimitByPeer is one server option limiting unary calls and streams
// alike, per client address: admitted calls get the rate-limit header
// metadata, and a denial, decided in the tap before the message is read,
// is ResourceExhausted with its RetryInfo and QuotaFailure details but no
// metadata (grpc-go sends none for a call its tap refuses).
func TestLimitByPeer(t *testing.T) {
	client, svc := serve(t, slidegrpc.LimitByPeer(slidelog.Policy{Name: "peer", Limit: 2, Window: time.Minute}))
	var header metadata.MD
	if _, err := client.EmptyCall(t.Context(), &testgrpc.Empty{}, grpc.Header(&header)); err != nil {
		t.Fatal(err)
	}
	if got := first(header, "ratelimit-policy"); got != `"peer";q=2;w=60` {
		t.Errorf("admitted: ratelimit-policy: got %q, want %q", got, `"peer";q=2;w=60`)
	}
	stream, err := client.StreamingOutputCall(t.Context(), &testgrpc.StreamingOutputCallRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("stream: got %v, want EOF", err)
	}
	_, err = client.EmptyCall(t.Context(), &testgrpc.Empty{})
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted || len(st.Details()) != 2 || retryInfo(err) == nil {
		t.Errorf("denied: got %v, details %v, want ResourceExhausted with RetryInfo and QuotaFailure", err, st.Details())
	}
	if got := svc.Reached(); got != 2 {
		t.Errorf("handler calls: got %d, want 2", got)
	}
	defer func() {
		if recover() == nil {
			t.Error("LimitByPeer with an invalid policy did not panic")
		}
	}()
	slidegrpc.LimitByPeer(slidelog.Policy{})
}

// A FailClosed denial checked nothing: its status names no violated
// policy, and its message says the limiter was unavailable.
func TestDeniedStatusFailClosed(t *testing.T) {
	st := slidegrpc.DeniedStatus(slidelog.NewResult([]slidelog.PolicyResult{
		{Policy: slidelog.PerMinute(10), RetryAfter: time.Second}}, slidelog.SourceFailClosed))
	if got, want := st.Message(), "rate limiter unavailable; retry after 1 second"; got != want {
		t.Errorf("message: got %q, want %q", got, want)
	}
	if d := st.Details(); len(d) != 1 {
		t.Errorf("details: got %v, want the RetryInfo only", d)
	}
}
