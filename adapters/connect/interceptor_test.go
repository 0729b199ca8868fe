package slideconnect_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	slideconnect "github.com/slidelog/slidelog/adapters/connect"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/slidelogtest"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// The handlers serve grpc.health.v1.Health with grpc-go's generated
// messages, so that connect-go's client (Connect protocol) and grpc-go's
// client (gRPC) call the same handler with no generated connect code.
const (
	checkProcedure = "/grpc.health.v1.Health/Check"
	watchProcedure = "/grpc.health.v1.Health/Watch"
)

// server counts the calls that reached its handlers.
type server struct {
	url     string
	reached atomic.Int64
	http    *http.Client
}

// serve starts the health handlers behind interceptor on a real loopback
// listener speaking HTTP/1.1 and cleartext HTTP/2 (for gRPC).
func serve(t *testing.T, opts ...connect.HandlerOption) *server {
	t.Helper()
	s := &server{}
	mux := http.NewServeMux()
	mux.Handle(checkProcedure, connect.NewUnaryHandler(checkProcedure,
		func(ctx context.Context, req *connect.Request[healthpb.HealthCheckRequest]) (*connect.Response[healthpb.HealthCheckResponse], error) {
			s.reached.Add(1)
			if req.Msg.GetService() == "panic" {
				panic("handler failed")
			}
			if req.Msg.GetService() == "fail" {
				return nil, connect.NewError(connect.CodeInternal, errors.New("handler failed"))
			}
			if req.Msg.GetService() == "hang" {
				<-ctx.Done()
				return nil, ctx.Err() // as a handler whose database call the client's deadline cut short
			}
			if req.Msg.GetService() == "own-deadline" {
				// As a handler whose database call ran out of a deadline
				// of the server's own: the client is still there.
				return nil, fmt.Errorf("inventory lookup: %w", context.DeadlineExceeded)
			}
			return connect.NewResponse(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}), nil
		}, opts...))
	mux.Handle(watchProcedure, connect.NewServerStreamHandler(watchProcedure,
		func(ctx context.Context, req *connect.Request[healthpb.HealthCheckRequest], stream *connect.ServerStream[healthpb.HealthCheckResponse]) error {
			s.reached.Add(1)
			if req.Msg.GetService() == "panic" {
				panic("handler failed")
			}
			for range 2 {
				if err := stream.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}); err != nil {
					return err
				}
			}
			return nil
		}, opts...))
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	transport := &http.Transport{}
	s.http = &http.Client{Transport: transport}
	t.Cleanup(func() {
		transport.CloseIdleConnections()
		srv.Close()
	})
	s.url = srv.URL
	return s
}

// grpcClient returns a grpc-go health client of s.
func (s *server) grpcClient(t *testing.T, opts ...grpc.DialOption) healthpb.HealthClient {
	t.Helper()
	conn, err := grpc.NewClient(strings.TrimPrefix(s.url, "http://"),
		append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return healthpb.NewHealthClient(conn)
}

// check calls Check with connect-go's client over the Connect protocol.
func (s *server) check(t *testing.T, header http.Header) (*connect.Response[healthpb.HealthCheckResponse], error) {
	client := connect.NewClient[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse](s.http, s.url+checkProcedure)
	req := connect.NewRequest(&healthpb.HealthCheckRequest{})
	for k, vs := range header {
		req.Header()[k] = vs
	}
	return client.CallUnary(t.Context(), req)
}

// watch opens Watch with connect-go's client and reads it to the end,
// returning its response header and the stream's error.
func (s *server) watch(t *testing.T) (http.Header, int, error) {
	client := connect.NewClient[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse](s.http, s.url+watchProcedure)
	stream, err := client.CallServerStream(t.Context(), connect.NewRequest(&healthpb.HealthCheckRequest{}))
	if err != nil {
		return nil, 0, err
	}
	defer stream.Close()
	n := 0
	for stream.Receive() {
		n++
	}
	return stream.ResponseHeader(), n, stream.Err()
}

func stores(t *testing.T) map[string]slidelogtest.NewStoreFunc {
	return map[string]slidelogtest.NewStoreFunc{
		"memory":  slidelogtest.MemoryStores(),
		"cluster": redistest.ClusterStores(t),
	}
}

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

func retryDelay(details []any) (time.Duration, bool) {
	for _, d := range details {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration(), true
		}
	}
	return 0, false
}

// connectDetails returns the decoded details of a connect error.
func connectDetails(t *testing.T, err error) []any {
	t.Helper()
	var ce *connect.Error
	if !errors.As(err, &ce) {
		t.Fatalf("got %v, want a *connect.Error", err)
	}
	var out []any
	for _, d := range ce.Details() {
		v, err := d.Value()
		if err != nil {
			t.Fatalf("detail %s: %v", d.Type(), err)
		}
		out = append(out, v)
	}
	return out
}

// assertDenied checks a denial's RetryInfo delay, and that meta (the
// Connect error's metadata or the gRPC trailer) carries the rate-limit
// state, retry-after and grpc-retry-pushback-ms.
func assertDenied(t *testing.T, details []any, meta func(string) string, wantState string) {
	t.Helper()
	delay, ok := retryDelay(details)
	if !ok || delay <= 0 || delay > time.Minute {
		t.Fatalf("RetryInfo: got %v (found %v), want a delay in (0, 1m]", delay, ok)
	}
	if got, want := meta("retry-after"), strconv.FormatInt(int64((delay+time.Second-1)/time.Second), 10); got != want {
		t.Errorf("retry-after: got %q, want %q", got, want)
	}
	ms, err := strconv.ParseInt(meta("grpc-retry-pushback-ms"), 10, 64)
	if err != nil || time.Duration(ms)*time.Millisecond < delay || time.Duration(ms-1)*time.Millisecond >= delay {
		t.Errorf("grpc-retry-pushback-ms: got %q, want %v rounded up to ms", meta("grpc-retry-pushback-ms"), delay)
	}
	if got := meta("ratelimit"); got != wantState {
		t.Errorf("ratelimit: got %q, want %q", got, wantState)
	}
	var quota bool
	for _, d := range details {
		_, q := d.(*errdetails.QuotaFailure)
		quota = quota || q
	}
	if !quota {
		t.Errorf("details: got %v, want a QuotaFailure", details)
	}
}

func first(md metadata.MD, key string) string {
	if vs := md.Get(key); len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// connect-go's client over the Connect protocol and grpc-go's client over
// gRPC call the same handler and share one budget per client address; a
// denial is resource_exhausted with RetryInfo, QuotaFailure and the
// rate-limit metadata, unary and streaming.
func TestDenial(t *testing.T) {
	for name, ns := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Run("unary", func(t *testing.T) {
				l := slidelogtest.NewLimiter(t, newStore(t, ns), slidelog.Policy{Name: "unary", Limit: 2, Window: time.Minute})
				s := serve(t, connect.WithInterceptors(slideconnect.NewInterceptor(l)))
				resp, err := s.check(t, nil)
				if err != nil {
					t.Fatalf("connect call 1: %v", err)
				}
				if got := resp.Header().Get("RateLimit"); got != `"unary";r=1;t=60` {
					t.Errorf("connect call 1 RateLimit: got %q, want %q", got, `"unary";r=1;t=60`)
				}
				var header metadata.MD
				if _, err := s.grpcClient(t).Check(t.Context(), &healthpb.HealthCheckRequest{}, grpc.Header(&header)); err != nil {
					t.Fatalf("grpc call 2: %v", err)
				}
				if got := first(header, "ratelimit"); got != `"unary";r=0;t=60` {
					t.Errorf("grpc call 2 ratelimit: got %q, want %q", got, `"unary";r=0;t=60`)
				}

				_, err = s.check(t, nil)
				if got := connect.CodeOf(err); got != connect.CodeResourceExhausted {
					t.Fatalf("connect call 3: got %v (%v), want resource_exhausted", got, err)
				}
				var ce *connect.Error
				errors.As(err, &ce)
				assertDenied(t, connectDetails(t, err), ce.Meta().Get, `"unary";r=0;t=60`)
				if got := ce.Meta().Get("RateLimit-Policy"); got != `"unary";q=2;w=60` {
					t.Errorf("connect denial RateLimit-Policy: got %q, want %q", got, `"unary";q=2;w=60`)
				}

				var trailer metadata.MD
				_, err = s.grpcClient(t).Check(t.Context(), &healthpb.HealthCheckRequest{}, grpc.Trailer(&trailer))
				if got := status.Code(err); got != codes.ResourceExhausted {
					t.Fatalf("grpc call 4: got %v (%v), want ResourceExhausted", got, err)
				}
				assertDenied(t, status.Convert(err).Details(), func(k string) string { return first(trailer, k) }, `"unary";r=0;t=60`)
				if got := s.reached.Load(); got != 2 {
					t.Errorf("handler calls: got %d, want 2", got)
				}
			})
			t.Run("stream", func(t *testing.T) {
				l := slidelogtest.NewLimiter(t, newStore(t, ns), slidelog.Policy{Name: "stream", Limit: 1, Window: time.Minute})
				s := serve(t, connect.WithInterceptors(slideconnect.NewInterceptor(l)))
				header, n, err := s.watch(t)
				if err != nil || n != 2 {
					t.Fatalf("connect stream: %d messages, %v; want 2, nil (one decision per stream)", n, err)
				}
				if got := header.Get("RateLimit"); got != `"stream";r=0;t=60` {
					t.Errorf("stream RateLimit: got %q, want %q", got, `"stream";r=0;t=60`)
				}
				_, _, err = s.watch(t)
				if got := connect.CodeOf(err); got != connect.CodeResourceExhausted {
					t.Fatalf("connect stream 2: got %v (%v), want resource_exhausted", got, err)
				}
				var ce *connect.Error
				errors.As(err, &ce)
				assertDenied(t, connectDetails(t, err), ce.Meta().Get, `"stream";r=0;t=60`)

				stream, err := s.grpcClient(t).Watch(t.Context(), &healthpb.HealthCheckRequest{})
				if err != nil {
					t.Fatal(err)
				}
				_, err = stream.Recv()
				if got := status.Code(err); got != codes.ResourceExhausted {
					t.Fatalf("grpc stream: got %v (%v), want ResourceExhausted", got, err)
				}
				assertDenied(t, status.Convert(err).Details(), func(k string) string { return first(stream.Trailer(), k) }, `"stream";r=0;t=60`)
				if got := s.reached.Load(); got != 1 {
					t.Errorf("handler calls: got %d, want 1", got)
				}
			})
		})
	}
}

// Calls are keyed by the peer address, by default; forwarding headers
// only from trusted proxies; or by a header or the procedure.
func TestKeys(t *testing.T) {
	for _, tt := range []struct {
		name   string
		opts   []httplimit.Option
		header http.Header
		want   string
	}{
		{"peer, forwarding ignored", nil, http.Header{"X-Forwarded-For": {"203.0.113.9"}}, "ip:127.0.0.1"},
		{"trusted proxy", []httplimit.Option{httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: []string{"127.0.0.1"}, Header: "X-Forwarded-For"})},
			http.Header{"X-Forwarded-For": {"203.0.113.9"}}, "ip:203.0.113.9"},
		{"header", []httplimit.Option{httplimit.WithKeyFunc(httplimit.ByHeader("X-Api-Key"))}, http.Header{"X-Api-Key": {"k1"}}, "h:x-api-key:k1"},
		{"procedure", []httplimit.Option{httplimit.WithKeyFunc(httplimit.ByRoute())}, nil, "r:" + checkProcedure},
	} {
		t.Run(tt.name, func(t *testing.T) {
			store := newStore(t, slidelogtest.MemoryStores())
			l := slidelogtest.NewLimiter(t, store, slidelog.Policy{Name: "keys", Limit: 10, Window: time.Minute})
			s := serve(t, connect.WithInterceptors(slideconnect.NewInterceptor(l, tt.opts...)))
			if _, err := s.check(t, tt.header); err != nil {
				t.Fatal(err)
			}
			ids := store.Identities()
			if len(ids) != 1 || ids[tt.want] != 1 {
				t.Errorf("identities: got %v, want %s once", ids, tt.want)
			}
		})
	}
}

// Without an identity, or when the limiter cannot decide, the call fails
// with the gRPC adapter's codes and generic messages.
func TestUndecided(t *testing.T) {
	store := memstore.New()
	t.Cleanup(func() { _ = store.Close() })
	l := slidelogtest.NewLimiter(t, store, slidelog.Policy{Name: "undecided", Limit: 10, Window: time.Minute})
	s := serve(t, connect.WithInterceptors(slideconnect.NewInterceptor(l, httplimit.WithKeyFunc(httplimit.ByHeader("X-Api-Key")))))
	_, err := s.check(t, nil)
	if got := connect.CodeOf(err); got != connect.CodeInvalidArgument {
		t.Errorf("no key: got %v (%v), want invalid_argument", got, err)
	}
	_ = l.Close()
	_, err = s.check(t, http.Header{"X-Api-Key": {"k"}})
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeUnavailable || ce.Message() != "rate limiter unavailable; try again later" {
		t.Errorf("closed limiter: got %v, want unavailable with a generic message", err)
	}
	if got := s.reached.Load(); got != 0 {
		t.Errorf("handler calls: got %d, want 0", got)
	}
}

// A grpc-go client with a retry policy for RESOURCE_EXHAUSTED: net/http
// sends a denial's headers and trailers in two frames, never the
// trailers-only response grpc-go retries, so the client sees the denial
// after one attempt; a connect client retries on its own by reading
// RetryInfo or grpc-retry-pushback-ms.
func TestGRPCRetryPolicy(t *testing.T) {
	store := memstore.New()
	t.Cleanup(func() { _ = store.Close() })
	l := slidelogtest.NewLimiter(t, store, slidelog.Policy{Name: "retry", Limit: 1, Window: 300 * time.Millisecond})
	s := serve(t, connect.WithInterceptors(slideconnect.NewInterceptor(l)))
	client := s.grpcClient(t, grpc.WithDefaultServiceConfig(`{"methodConfig":[{"name":[{"service":"grpc.health.v1.Health"}],
 "retryPolicy":{"maxAttempts":3,"initialBackoff":"0.01s","maxBackoff":"0.01s","backoffMultiplier":1.0,"retryableStatusCodes":["RESOURCE_EXHAUSTED"]}}]}`))
	if _, err := client.Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var trailer metadata.MD
	_, err := client.Check(t.Context(), &healthpb.HealthCheckRequest{}, grpc.Trailer(&trailer))
	t.Logf("grpc-go retry policy against connect: handler calls %d, elapsed %v, code %v", s.reached.Load(), time.Since(start).Round(time.Millisecond), status.Code(err))
	if status.Code(err) != codes.ResourceExhausted || first(trailer, "grpc-retry-pushback-ms") == "" {
		t.Errorf("got %v with trailer %v, want the denial with its pushback", err, trailer)
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

// serveRefunding serves the test service behind an interceptor with
// WithRefundOnServerError of a limiter on store, a policy named name of
// limit a minute, and returns the server and a client of its health
// Check procedure.
func serveRefunding(t *testing.T, store slidelog.Store, name string, limit int) (*server, *connect.Client[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse]) {
	t.Helper()
	l := slidelogtest.NewLimiter(t, store, slidelog.Policy{Name: name, Limit: limit, Window: time.Minute})
	s := serve(t, connect.WithInterceptors(slideconnect.NewInterceptor(l, httplimit.WithRefundOnServerError())))
	return s, connect.NewClient[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse](s.http, s.url+checkProcedure)
}

// wantNoRefundAtLimit checks that store refunded nothing and that two
// calls, the limit, reached s's handlers.
func wantNoRefundAtLimit(t *testing.T, store *slidelogtest.CountingStore, s *server) {
	t.Helper()
	if got := store.Refunds(); got != 0 {
		t.Errorf("refunds: got %d, want 0", got)
	}
	if got := s.reached.Load(); got != 2 {
		t.Errorf("handler calls: got %d, want 2 (the limit)", got)
	}
}

// A handler that fails with a server-side code is refunded under
// WithRefundOnServerError.
func TestRefundOnServerError(t *testing.T) {
	store := memstore.New()
	t.Cleanup(func() { _ = store.Close() })
	_, client := serveRefunding(t, store, "refund", 1)
	for i := range 3 {
		_, err := client.CallUnary(t.Context(), connect.NewRequest(&healthpb.HealthCheckRequest{Service: "fail"}))
		if got := connect.CodeOf(err); got != connect.CodeInternal {
			t.Fatalf("failing call %d: got %v, want internal (refunded, so never denied)", i+1, got)
		}
	}
}

// TestNoRefundForClientDeadline: a handler that returns its context's
// error when the client's deadline passes ends with deadline_exceeded
// (connect-go's own code for it), not a server-side code, so
// WithRefundOnServerError refunds nothing: otherwise a client that gives
// each call a deadline shorter than the handler's work would have every
// call's work done for free.
func TestNoRefundForClientDeadline(t *testing.T) {
	store := newCountingMemory(t)
	s, client := serveRefunding(t, store, "deadline", 2)
	for i := range 5 {
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		_, err := client.CallUnary(ctx, connect.NewRequest(&healthpb.HealthCheckRequest{Service: "hang"}))
		cancel()
		want := connect.CodeDeadlineExceeded
		if i >= 2 {
			want = connect.CodeResourceExhausted
		}
		if got := connect.CodeOf(err); got != want {
			t.Errorf("call %d: got %v, want %v", i+1, got, want)
		}
	}
	wantNoRefundAtLimit(t, store, s)
}

// TestNoRefundForHandlerContextError: a handler that returns a context
// error of its own while its client waits (a downstream call out of the
// server's deadline) ends with deadline_exceeded, as connect-go sends it,
// not unknown, so WithRefundOnServerError refunds nothing. The client's
// context stays live, so this is finishStatus's doing, not
// httplimit.Decision.Finish's check of a client gone.
func TestNoRefundForHandlerContextError(t *testing.T) {
	store := newCountingMemory(t)
	s, client := serveRefunding(t, store, "own", 2)
	for i := range 5 {
		_, err := client.CallUnary(t.Context(), connect.NewRequest(&healthpb.HealthCheckRequest{Service: "own-deadline"}))
		want := connect.CodeDeadlineExceeded
		if i >= 2 {
			want = connect.CodeResourceExhausted
		}
		if got := connect.CodeOf(err); got != want {
			t.Errorf("call %d: got %v, want %v", i+1, got, want)
		}
	}
	wantNoRefundAtLimit(t, store, s)
}

// LimitByPeer is one handler option.
func TestLimitByPeer(t *testing.T) {
	s := serve(t, slideconnect.LimitByPeer(slidelog.Policy{Name: "peer", Limit: 1, Window: time.Minute}))
	if _, err := s.check(t, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.check(t, nil); connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Errorf("second call: got %v, want resource_exhausted", err)
	}
}

// DeniedError of a FailClosed denial invents no policy state.
func TestDeniedErrorFailClosed(t *testing.T) {
	ce := slideconnect.DeniedError(slidelog.Result{RetryAfter: time.Second, Source: slidelog.SourceFailClosed,
		Policy: slidelog.PerMinute(1), Limit: 1})
	if ce.Message() != "rate limiter unavailable; retry after 1 second" {
		t.Errorf("message: got %q", ce.Message())
	}
	if got := len(ce.Details()); got != 1 {
		t.Errorf("details: got %d, want 1 (RetryInfo only)", got)
	}
}
