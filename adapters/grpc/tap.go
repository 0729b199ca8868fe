package slidegrpc

import (
	"context"
	"sync"
	"sync/atomic"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"google.golang.org/grpc"
	"google.golang.org/grpc/tap"
)

// ServerOption returns a server option that rate-limits every call and
// stream with l, as UnaryServerInterceptor and StreamServerInterceptor
// do, but decides before the call's request message is read: in a
// tap.ServerInHandle (grpc.InTapHandle), when the call's headers arrive.
// A denied call costs the server its headers only, however large the
// message the client is sending; with the interceptors, grpc-go reads and
// decodes a unary call's whole message (up to grpc.MaxRecvMsgSize, 4 MB
// by default) before any interceptor runs, denied or not.
//
// The tap runs before grpc-go looks the method up, so until one of a
// method's calls has reached its handler the option's interceptors
// decide that method's calls instead, after their message is read: the
// name may be one the client made up, which httplimit.ByRoute would make
// a new identity per name. A call to a method the server does not have is
// not decided at all (grpc-go answers it Unimplemented). Give this option
// to grpc.NewServer before interceptors that may reject calls (an
// authentication interceptor): a method whose every call they reject
// before this option's interceptors run stays undecided in the tap.
//
// The decision can use what the headers carry: the peer, the metadata
// and the full method, as the default key (httplimit.ByClientIP),
// httplimit.ByHeader, httplimit.ByRoute, WithMethodCosts and
// WithMethodLimiters do. A key that needs a value an interceptor sets
// (httplimit.ByContextValue after your authentication interceptor) finds
// none here: use the interceptors, chained after that interceptor, for
// it.
//
// An admitted call gets the rate-limit header metadata, and
// httplimit.WithRefundOnServerError its refund, from interceptors the
// option chains after any given before it. A denied call fails with
// DeniedStatus (codes.ResourceExhausted, its RetryInfo and QuotaFailure
// details) in a trailers-only response, but without metadata:
// grpc-go's transport sends none on a call its tap refuses, so the
// trailer carries no rate-limit fields, retry-after or
// grpc-retry-pushback-ms, and a grpc-go client's retry policy waits its
// own backoff, not the delay. A call with a bad identity, or on which the
// limiter could not decide, fails with ErrorStatus.
//
// The tap runs in the connection's reader goroutine, which waits for the
// decision: the memory store decides in microseconds, while on Redis
// every new call on the connection waits one round trip (the limiter's
// timeouts and failure mode bound it). A server takes one tap handle
// (grpc.NewServer panics on a second grpc.InTapHandle). A server run
// through net/http (grpc.Server.ServeHTTP) calls none: the interceptors
// then decide each call themselves, after its message is read.
//
// It panics when an option is invalid, so that a misconfiguration shows
// at start-up.
func ServerOption(l *slidelog.Limiter, opts ...httplimit.Option) grpc.ServerOption {
	e := build("ServerOption", l, opts)
	key := new(tapKey) // this option's decisions only
	refund := e.RefundsOnServerError()
	served := new(methodSet)
	inTap := func(ctx context.Context, info *tap.Info) (context.Context, error) {
		if !served.has(info.FullMethodName) {
			// The tap runs before grpc-go looks the method up: a name
			// no handler has served yet may be one the client made up,
			// a new identity per name under httplimit.ByRoute. The
			// interceptors decide it, once grpc-go has found its
			// handler.
			return ctx, nil
		}
		d := e.Check(&call{ctx: ctx, method: info.FullMethodName})
		if err := rejection(d); err != nil {
			return ctx, err
		}
		return context.WithValue(ctx, key, d), nil
	}
	decided := func(ctx context.Context, method string) (*httplimit.Decision, error) {
		if d, ok := ctx.Value(key).(*httplimit.Decision); ok {
			return d, nil
		}
		// No tap decided (a method's first calls, or
		// grpc.Server.ServeHTTP, which calls none): decide now.
		served.add(method)
		d := e.Check(&call{ctx: ctx, method: method})
		return d, rejection(d)
	}
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		d, err := decided(ctx, info.FullMethod)
		if err != nil {
			if md := trailerMetadata(d); md != nil {
				_ = grpc.SetTrailer(ctx, md)
			}
			return nil, err
		}
		if md := headerMetadata(d.Header); md != nil {
			_ = grpc.SetHeader(ctx, md)
		}
		if !refund || !d.Result.Allowed {
			return handler(ctx, req)
		}
		return handleRefunding(ctx, req, handler, d)
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		d, err := decided(ss.Context(), info.FullMethod)
		if err != nil {
			if md := trailerMetadata(d); md != nil {
				ss.SetTrailer(md)
			}
			return err
		}
		if md := headerMetadata(d.Header); md != nil {
			_ = ss.SetHeader(md)
		}
		if !refund || !d.Result.Allowed {
			return handler(srv, ss)
		}
		return streamRefunding(srv, ss, handler, d)
	}
	return joinOptions("ServerOption", grpc.InTapHandle(inTap), grpc.ChainUnaryInterceptor(unary), grpc.ChainStreamInterceptor(stream))
}

// tapKey is the context key of a ServerOption's decisions.
type tapKey struct{ _ byte }

// maxServedMethods bounds a methodSet: past it, further methods (only a
// server with a grpc.UnknownServiceHandler serves that many) are decided
// by the interceptors alone.
const maxServedMethods = 4096

// methodSet is a bounded set of the full methods grpc-go has routed to a
// handler. It is safe for concurrent use.
type methodSet struct {
	m sync.Map
	n atomic.Int64
}

func (s *methodSet) has(method string) bool {
	_, ok := s.m.Load(method)
	return ok
}

func (s *methodSet) add(method string) {
	if s.has(method) || s.n.Load() >= maxServedMethods {
		return
	}
	if _, loaded := s.m.LoadOrStore(method, struct{}{}); !loaded {
		s.n.Add(1)
	}
}
