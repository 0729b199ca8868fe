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
// It is ServerOption with a limiter of p on a memory store of its own,
// which lives as long as the program; opts are ServerOption's. A call is
// decided when its headers arrive, before its message is read, so a
// denied call costs the server nothing of what the client sends. The
// client is the peer address unless httplimit.WithClientIP says
// otherwise. For limits shared between
// instances, use ServerOption (or the interceptors) with a limiter on a
// Redis store.
//
// Like regexp.MustCompile, it panics when p is invalid, so that a
// constant policy that cannot work shows at start-up; it also panics when
// an option is invalid.
func LimitByPeer(p slidelog.Policy, opts ...httplimit.Option) grpc.ServerOption {
	return ServerOption(slidelog.MustNew(memstore.New(), p), opts...)
}

// joinOptions joins server options into one, or panics.
func joinOptions(who string, opts ...grpc.ServerOption) grpc.ServerOption {
	join, ok := joinServerOptions.(func(...grpc.ServerOption) grpc.ServerOption)
	if !ok || join == nil {
		panic("slidegrpc: " + who + ": this grpc-go cannot join server options; use UnaryServerInterceptor and StreamServerInterceptor")
	}
	return join(opts...)
}

// joinServerOptions is grpc-go's own function joining server options into
// one, as its orca and opentelemetry packages use it.
//
//go:linkname joinServerOptions google.golang.org/grpc/internal.JoinServerOptions
var joinServerOptions any
