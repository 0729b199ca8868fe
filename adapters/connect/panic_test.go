package slideconnect_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	slideconnect "github.com/slidelog/slidelog/adapters/connect"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/slidelogtest"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// serveRecovered serves the handlers behind connect.WithRecover, which
// answers a panic with internal, and the limiter (at two a minute) with
// opts, inside it.
func serveRecovered(t *testing.T, store slidelog.Store, opts ...httplimit.Option) *server {
	t.Helper()
	l := slidelogtest.NewLimiter(t, store, slidelog.Policy{Name: "panic", Limit: 2, Window: time.Minute})
	return serve(t,
		connect.WithRecover(func(context.Context, connect.Spec, http.Header, any) error {
			return connect.NewError(connect.CodeInternal, errors.New("handler panicked"))
		}),
		connect.WithInterceptors(slideconnect.NewInterceptor(l, opts...)))
}

// panickingCall makes a unary call or opens a stream whose handler
// panics, and returns its code.
func panickingCall(t *testing.T, s *server, stream bool) connect.Code {
	t.Helper()
	req := connect.NewRequest(&healthpb.HealthCheckRequest{Service: "panic"})
	if !stream {
		client := connect.NewClient[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse](s.http, s.url+checkProcedure)
		_, err := client.CallUnary(t.Context(), req)
		return connect.CodeOf(err)
	}
	client := connect.NewClient[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse](s.http, s.url+watchProcedure)
	st, err := client.CallServerStream(t.Context(), req)
	if err != nil {
		return connect.CodeOf(err)
	}
	defer st.Close()
	for st.Receive() {
	}
	return connect.CodeOf(st.Err())
}

// A call whose handler panics, answered internal by connect.WithRecover
// outside the limiter, is refunded like one that fails with internal
// itself.
func TestRefundOnPanic(t *testing.T) {
	for _, stream := range []bool{false, true} {
		name := "unary"
		if stream {
			name = "stream"
		}
		t.Run(name, func(t *testing.T) {
			store := slidelogtest.NewCountingStore(memstore.New())
			s := serveRecovered(t, store, httplimit.WithRefundOnServerError())
			for i := range 4 {
				if got := panickingCall(t, s, stream); got != connect.CodeInternal {
					t.Errorf("call %d: got %v, want internal", i+1, got)
				}
			}
			if got := store.Refunds(); got != 4 {
				t.Errorf("refunds: got %d, want 4", got)
			}
		})
	}
}

// Without WithRefundOnServerError, a call whose handler panics still
// counts.
func TestPanicCountsWithoutRefund(t *testing.T) {
	store := slidelogtest.NewCountingStore(memstore.New())
	s := serveRecovered(t, store)
	for i, want := range []connect.Code{connect.CodeInternal, connect.CodeInternal, connect.CodeResourceExhausted, connect.CodeResourceExhausted} {
		if got := panickingCall(t, s, false); got != want {
			t.Errorf("call %d: got %v, want %v", i+1, got, want)
		}
	}
	if got := store.Refunds(); got != 0 {
		t.Errorf("refunds: got %d, want 0", got)
	}
}
