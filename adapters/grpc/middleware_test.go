package slidegrpc_test

import (
	"io"
	"strings"
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
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

var _ ratelimit.Limiter = (*slidegrpc.MiddlewareLimiter)(nil)

// A MiddlewareLimiter behind go-grpc-middleware's ratelimit interceptors
// keys like the interceptors (here by full method), sends the rate-limit
// metadata, and its denial reaches the client as ResourceExhausted with
// our message and no internal text.
func TestMiddlewareLimiter(t *testing.T) {
	for name, ns := range stores(t) {
		t.Run(name, func(t *testing.T) {
			store := newStore(t, ns)
			lim := slidegrpc.NewMiddlewareLimiter(slidelogtest.NewLimiter(t, store, slidelog.Policy{Name: "mw", Limit: 1, Window: time.Minute}), httplimit.WithKeyFunc(httplimit.ByRoute()))
			client, svc := serve(t,
				grpc.ChainUnaryInterceptor(ratelimit.UnaryServerInterceptor(lim)),
				grpc.ChainStreamInterceptor(ratelimit.StreamServerInterceptor(lim)))
			var header metadata.MD
			if _, err := client.EmptyCall(t.Context(), &testgrpc.Empty{}, grpc.Header(&header)); err != nil {
				t.Fatal(err)
			}
			if got := first(header, "ratelimit"); got != `"mw";r=0;t=60` {
				t.Errorf("ratelimit: got %q, want %q", got, `"mw";r=0;t=60`)
			}
			var trailer metadata.MD
			_, err := client.EmptyCall(t.Context(), &testgrpc.Empty{}, grpc.Trailer(&trailer))
			if st := status.Convert(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "rate limit exceeded; retry after ") {
				t.Errorf("denied: got %v %q, want ResourceExhausted quoting our message", st.Code(), st.Message())
			}
			if first(trailer, "retry-after") == "" || first(trailer, "grpc-retry-pushback-ms") == "" {
				t.Errorf("denied: trailer %v, want retry-after and grpc-retry-pushback-ms", trailer)
			}
			stream, err := client.StreamingOutputCall(t.Context(), &testgrpc.StreamingOutputCallRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := stream.Recv(); err != io.EOF {
				t.Errorf("stream (its own method, its own budget): %v", err)
			}
			if got := svc.Reached(); got != 2 {
				t.Errorf("handler calls: got %d, want 2", got)
			}
			if got := store.Identities(); got["r:"+emptyCall] != 2 || got["r:"+streamCall] != 1 {
				t.Errorf("identities: got %v, want r:%s twice, r:%s once", got, emptyCall, streamCall)
			}
		})
	}
}

// Limit's error carries the full status (details included) for callers
// that use it outside go-grpc-middleware; outside a server call it needs
// no transport stream.
func TestMiddlewareLimiterLimit(t *testing.T) {
	store := memstore.New()
	t.Cleanup(func() { _ = store.Close() })
	lim := slidegrpc.NewMiddlewareLimiter(slidelogtest.NewLimiter(t, store, slidelog.Policy{Name: "limit", Limit: 1, Window: time.Minute}), httplimit.WithKeyFunc(httplimit.ByHeader("x-api-key")))
	ctx := metadata.NewIncomingContext(t.Context(), metadata.Pairs("x-api-key", "k1"))
	if err := lim.Limit(ctx); err != nil {
		t.Fatalf("first: %v", err)
	}
	err := lim.Limit(ctx)
	if st, ok := status.FromError(err); !ok || st.Code() != codes.ResourceExhausted || retryInfo(err) == nil {
		t.Errorf("second: got %v, want a ResourceExhausted status with RetryInfo", err)
	}
	if st, _ := status.FromError(lim.Limit(t.Context())); st.Code() != codes.InvalidArgument {
		t.Errorf("no key: got %v, want InvalidArgument", st.Code())
	}
	defer func() {
		if recover() == nil {
			t.Error("NewMiddlewareLimiter with WithRefundOnServerError did not panic")
		}
	}()
	slidegrpc.NewMiddlewareLimiter(slidelogtest.NewLimiter(t, store, slidelog.Policy{Name: "refund", Limit: 1, Window: time.Minute}), httplimit.WithRefundOnServerError())
}
