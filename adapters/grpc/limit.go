package slidegrpc

import (
	"context"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// MiddlewareLimiter decides calls for go-grpc-middleware v2's ratelimit
// interceptors: it satisfies their ratelimit.Limiter interface, so
// applications that already chain
// ratelimit.UnaryServerInterceptor(limiter) can pass one. It keys calls
// like this package's interceptors and takes the same options. It is
// safe for concurrent use.
//
// go-grpc-middleware answers every error of Limit with
// codes.ResourceExhausted and a message of its own that quotes the
// error's text, without details; the rate-limit metadata still reaches
// the client. For RetryInfo details and distinct codes for bad identities
// and an unavailable limiter, use UnaryServerInterceptor and
// StreamServerInterceptor instead.
type MiddlewareLimiter struct {
	e *httplimit.Engine
}

// NewMiddlewareLimiter returns a MiddlewareLimiter that asks l, or the
// limiter WithMethodLimiters or httplimit.WithLimiterFunc chooses. It
// panics when an option is invalid, and on
// httplimit.WithRefundOnServerError: go-grpc-middleware
// never tells a Limiter how the handler answered.
func NewMiddlewareLimiter(l *slidelog.Limiter, opts ...httplimit.Option) *MiddlewareLimiter {
	e := build("NewMiddlewareLimiter", l, opts)
	if e.RefundsOnServerError() {
		panic("slidegrpc: NewMiddlewareLimiter: WithRefundOnServerError needs the handler's status, which go-grpc-middleware's ratelimit interceptors do not report; use UnaryServerInterceptor")
	}
	return &MiddlewareLimiter{e: e}
}

// Limit decides the call whose server context ctx is: its full method
// comes from grpc.Method(ctx). It sets the rate-limit header metadata on
// the call and returns nil to admit it; otherwise it sets the rate-limit
// metadata, retry-after and grpc-retry-pushback-ms as the call's trailer
// (so that the denial is trailers-only and a client's retry policy
// applies) and returns an error whose text is
// DeniedStatus's or ErrorStatus's message (never internal error text) and
// whose GRPCStatus method returns that status, details included.
func (m *MiddlewareLimiter) Limit(ctx context.Context) error {
	method, _ := grpc.Method(ctx)
	d := m.e.Check(&call{ctx: ctx, method: method})
	if err := rejection(d); err != nil {
		if md := trailerMetadata(d); md != nil {
			_ = grpc.SetTrailer(ctx, md) // fails outside a server call: nothing to send then
		}
		return &limitError{st: status.Convert(err)}
	}
	if md := headerMetadata(d.Header); md != nil {
		_ = grpc.SetHeader(ctx, md)
	}
	return nil
}

// limitError carries a rejection's status through go-grpc-middleware,
// which formats the error with %s.
type limitError struct{ st *status.Status }

func (e *limitError) Error() string              { return e.st.Message() }
func (e *limitError) GRPCStatus() *status.Status { return e.st }
