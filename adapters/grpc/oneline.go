package slidegrpc

import (
	_ "unsafe" // for go:linkname: grpc-go joins server options only internally

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/memstore"
	"google.golang.org/grpc"
)

// LimitByPeer returns a server option that limits each client address to
// the policy p, counted in process memory: the common case in one
// statement, for unary calls and streams alike,
//
//	srv := grpc.NewServer(slidegrpc.LimitByPeer(slidelog.PerMinute(100)))
//
// It is UnaryServerInterceptor and StreamServerInterceptor, chained after
// any interceptors given before it, with a limiter of p on a memory store
// of its own, which lives as long as the program; opts are theirs. The
// client is the peer address unless httplimit.WithTrustedProxies and
// httplimit.WithClientIPHeader say otherwise. For limits shared between
// instances, use the interceptors with a limiter on a Redis store.
//
// Like regexp.MustCompile, it panics when p is invalid, so that a
// constant policy that cannot work shows at start-up; it also panics when
// an option is invalid.
func LimitByPeer(p slidelog.Policy, opts ...httplimit.Option) grpc.ServerOption {
	l := slidelog.MustNew(memstore.New(), p)
	unary := grpc.ChainUnaryInterceptor(UnaryServerInterceptor(l, opts...))
	stream := grpc.ChainStreamInterceptor(StreamServerInterceptor(l, opts...))
	join, ok := joinServerOptions.(func(...grpc.ServerOption) grpc.ServerOption)
	if !ok || join == nil {
		panic("slidegrpc: LimitByPeer: this grpc-go cannot join server options; use UnaryServerInterceptor and StreamServerInterceptor")
	}
	return join(unary, stream)
}

// joinServerOptions is grpc-go's own function joining server options into
// one, as its orca and opentelemetry packages use it.
//
//go:linkname joinServerOptions google.golang.org/grpc/internal.JoinServerOptions
var joinServerOptions any
