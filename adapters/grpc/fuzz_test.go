package slidegrpc_test

import (
	"context"
	"net"
	"net/netip"

	"testing"

	slidegrpc "github.com/slidelog/slidelog/adapters/grpc"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/slidelogtest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// FuzzMiddleware runs slidelogtest.FuzzRPC on the unary interceptor,
// called in process with the fuzzed metadata, peer and method.
func FuzzMiddleware(f *testing.F) {
	handler := func(context.Context, any) (any, error) { return nil, nil }
	slidelogtest.FuzzRPC(f, func(l *slidelog.Limiter, opts ...httplimit.Option) slidelogtest.RPCFuzzCall {
		interceptor := slidegrpc.UnaryServerInterceptor(l, opts...)
		return func(from, method, forwarded, apiKey string) slidelogtest.RPCReply {
			md := metadata.MD{}
			md.Append("x-forwarded-for", forwarded)
			md.Append("x-api-key", apiKey)
			ctx := metadata.NewIncomingContext(context.Background(), md)
			ctx = peer.NewContext(ctx, &peer.Peer{Addr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(from), 1234))})
			_, err := interceptor(ctx, nil, &grpc.UnaryServerInfo{FullMethod: method}, handler)
			return rpcReply(status.Convert(err))
		}
	})
}
