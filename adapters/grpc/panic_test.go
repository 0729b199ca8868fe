package slidegrpc_test

import (
	"io"
	"testing"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	slidegrpc "github.com/slidelog/slidelog/adapters/grpc"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/slidelogtest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// recovered is the server options of the limiter (at two a minute) with
// opts, set up by limit, behind go-grpc-middleware's recovery
// interceptors, which answer a panic with Internal.
func recovered(t *testing.T, store slidelog.Store, limit func(*slidelog.Limiter, ...httplimit.Option) []grpc.ServerOption, opts ...httplimit.Option) []grpc.ServerOption {
	t.Helper()
	l := slidelogtest.NewLimiter(t, store, slidelog.Policy{Name: "panic", Limit: 2, Window: time.Minute})
	internal := recovery.WithRecoveryHandler(func(any) error { return status.Error(codes.Internal, "handler panicked") })
	return append([]grpc.ServerOption{
		grpc.ChainUnaryInterceptor(recovery.UnaryServerInterceptor(internal)),
		grpc.ChainStreamInterceptor(recovery.StreamServerInterceptor(internal)),
	}, limit(l, opts...)...)
}

// limitSetups are the two ways of adding the limiter to a server.
var limitSetups = []struct {
	name string
	opts func(l *slidelog.Limiter, opts ...httplimit.Option) []grpc.ServerOption
}{
	{"interceptors", interceptors},
	{"ServerOption", func(l *slidelog.Limiter, opts ...httplimit.Option) []grpc.ServerOption {
		return []grpc.ServerOption{slidegrpc.ServerOption(l, opts...)}
	}},
}

// panickingCall makes a unary or a stream call whose handler panics and
// returns its code.
func panickingCall(t *testing.T, client testgrpc.TestServiceClient, stream bool) codes.Code {
	t.Helper()
	ctx := metadata.AppendToOutgoingContext(t.Context(), "panic", "1")
	if !stream {
		_, err := client.EmptyCall(ctx, &testgrpc.Empty{})
		return status.Code(err)
	}
	s, err := client.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{})
	if err != nil {
		return status.Code(err)
	}
	if _, err = s.Recv(); err == io.EOF {
		return codes.OK
	}
	return status.Code(err)
}

// A call whose handler panics, answered Internal by a recovery
// interceptor outside the limiter, is refunded like one that fails with
// Internal itself.
func TestRefundOnPanic(t *testing.T) {
	for _, setup := range limitSetups {
		for _, stream := range []bool{false, true} {
			name := setup.name + "/unary"
			if stream {
				name = setup.name + "/stream"
			}
			t.Run(name, func(t *testing.T) {
				store := newCountingMemory(t)
				client, _ := serve(t, recovered(t, store, setup.opts, httplimit.WithRefundOnServerError())...)
				for i := range 4 {
					if got := panickingCall(t, client, stream); got != codes.Internal {
						t.Errorf("call %d: got %v, want Internal", i+1, got)
					}
				}
				if got := store.Refunds(); got != 4 {
					t.Errorf("refunds: got %d, want 4", got)
				}
			})
		}
	}
}

// Without WithRefundOnServerError, a call whose handler panics still
// counts.
func TestPanicCountsWithoutRefund(t *testing.T) {
	for _, setup := range limitSetups {
		t.Run(setup.name, func(t *testing.T) {
			store := newCountingMemory(t)
			client, _ := serve(t, recovered(t, store, setup.opts)...)
			for i, want := range []codes.Code{codes.Internal, codes.Internal, codes.ResourceExhausted, codes.ResourceExhausted} {
				if got := panickingCall(t, client, false); got != want {
					t.Errorf("call %d: got %v, want %v", i+1, got, want)
				}
			}
			if got := store.Refunds(); got != 0 {
				t.Errorf("refunds: got %d, want 0", got)
			}
		})
	}
}
