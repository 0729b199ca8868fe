package slidegrpc

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// UnaryServerInterceptor returns a unary server interceptor that
// rate-limits calls with l, or with the limiter WithMethodLimiters or
// httplimit.WithLimiterFunc chooses (l may then be nil for the methods
// they cover). The options are httplimit's, read for gRPC (see the
// package comment), with this package's WithMethodCosts and
// WithMethodLimiters.
//
// Each call is keyed (by default by peer address), checked, and given the
// rate-limit response header metadata. A denied call fails with
// DeniedStatus (codes.ResourceExhausted with a RetryInfo detail); a call
// with a bad identity, or on which the limiter could not decide, fails
// with ErrorStatus (InvalidArgument, Unavailable or Internal, never with
// the error's text). The handler is not called for either.
//
// It panics when an option is invalid, so that a misconfiguration shows
// at start-up, never per call.
func UnaryServerInterceptor(l *slidelog.Limiter, opts ...httplimit.Option) grpc.UnaryServerInterceptor {
	e := build("UnaryServerInterceptor", l, opts)
	refund := e.RefundsOnServerError()
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		d := e.Check(&call{ctx: ctx, method: info.FullMethod})
		if err := rejection(d); err != nil {
			if md := trailerMetadata(d); md != nil {
				_ = grpc.SetTrailer(ctx, md) // fails only when the call has already ended
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
}

// StreamServerInterceptor returns a stream server interceptor that
// rate-limits the opening of each stream as UnaryServerInterceptor does
// calls: one decision per stream, however many messages it carries.
//
// It panics when an option is invalid.
func StreamServerInterceptor(l *slidelog.Limiter, opts ...httplimit.Option) grpc.StreamServerInterceptor {
	e := build("StreamServerInterceptor", l, opts)
	refund := e.RefundsOnServerError()
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		d := e.Check(&call{ctx: ss.Context(), method: info.FullMethod})
		if err := rejection(d); err != nil {
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
}

// handleRefunding calls handler and then d.Finish with the class of its
// code (finishStatus); a panic in handler is Internal and goes on to the
// recovery interceptor outside the limiter (or crashes the server, as
// without the limiter) (Decision.Serve).
func handleRefunding(ctx context.Context, req any, handler grpc.UnaryHandler, d *httplimit.Decision) (resp any, err error) {
	d.Serve(func() int {
		resp, err = handler(ctx, req)
		return finishStatus(err)
	})
	return resp, err
}

// streamRefunding is handleRefunding for a stream.
func streamRefunding(srv any, ss grpc.ServerStream, handler grpc.StreamHandler, d *httplimit.Decision) (err error) {
	d.Serve(func() int {
		err = handler(srv, ss)
		return finishStatus(err)
	})
	return err
}

// DeniedStatus returns the status a denied call fails with:
// codes.ResourceExhausted, a message saying when to retry (whole seconds,
// rounded up, as the retry-after metadata), a RetryInfo detail with the
// exact delay and a QuotaFailure detail naming the violated policies. A
// denial of FailClosed checked nothing and violated no policy: its status
// carries the RetryInfo only, and a message saying the limiter was
// unavailable. It is for applications that call the limiter themselves;
// send PushbackMetadata(res) as the call's trailer beside it, so that
// grpc-go clients with a retry policy wait for the delay.
func DeniedStatus(res slidelog.Result) *status.Status {
	retry := &errdetails.RetryInfo{RetryDelay: durationpb.New(max(res.RetryAfter, 0))}
	if res.Unchecked() {
		st := status.New(codes.ResourceExhausted, "rate limiter unavailable; retry after "+httplimit.RetryAfterText(res.RetryAfter))
		if withDetails, err := st.WithDetails(retry); err == nil {
			return withDetails
		}
		return st
	}
	st := status.New(codes.ResourceExhausted, "rate limit exceeded; retry after "+httplimit.RetryAfterText(res.RetryAfter))
	quota := &errdetails.QuotaFailure{}
	for _, name := range res.Violated() {
		quota.Violations = append(quota.Violations, &errdetails.QuotaFailure_Violation{
			Subject:     "policy:" + name,
			Description: "rate limit policy " + strconv.Quote(name) + " exceeded",
		})
	}
	withDetails, err := st.WithDetails(retry, quota)
	if err != nil { // cannot happen: both details marshal
		return st
	}
	return withDetails
}

// PushbackMetadata returns the grpc-retry-pushback-ms trailer of the
// denial res: its RetryAfter in milliseconds, rounded up. A grpc-go client
// whose retry policy lists RESOURCE_EXHAUSTED waits that long before its
// next attempt instead of its own backoff (gRPC's retry design, A6). The
// interceptors send it on every denial; it is for applications that call
// the limiter themselves and answer with DeniedStatus.
func PushbackMetadata(res slidelog.Result) metadata.MD {
	return metadata.Pairs(PushbackKey, pushbackMillis(res.RetryAfter))
}

// PushbackKey is the trailer key gRPC clients read a server's retry
// pushback from.
const PushbackKey = "grpc-retry-pushback-ms"

func pushbackMillis(d time.Duration) string {
	ms := int64(0)
	if d > 0 {
		ms = int64((d + time.Millisecond - 1) / time.Millisecond)
	}
	return strconv.FormatInt(ms, 10)
}

// ErrorStatus returns the status of a call on which no decision could be
// made, with a generic message and never err's text:
// codes.InvalidArgument for a bad identity (err wraps
// slidelog.ErrInvalidKey: no peer address, an empty or malformed metadata
// value, an identity too long), codes.Internal for the server's own
// misconfiguration (httplimit.ErrMisconfigured, ErrInvalidCost,
// ErrInvalidOption), and codes.Unavailable for everything else (the store
// was unavailable, the call's context ended, the limiter was closed).
func ErrorStatus(err error) *status.Status {
	switch {
	case errors.Is(err, httplimit.ErrIdentityTooLong):
		return status.New(codes.InvalidArgument, "client identity too long")
	case errors.Is(err, slidelog.ErrInvalidKey):
		return status.New(codes.InvalidArgument, "no valid client identity in this call")
	case errors.Is(err, slidelog.ErrInvalidCost), errors.Is(err, slidelog.ErrInvalidOption), errors.Is(err, httplimit.ErrMisconfigured):
		return status.New(codes.Internal, "rate limiter misconfigured")
	}
	return status.New(codes.Unavailable, "rate limiter unavailable; try again later")
}

// rejection returns the error a call fails with, or nil to call the
// handler.
func rejection(d *httplimit.Decision) error {
	switch d.Outcome {
	case httplimit.OutcomeDenied:
		return DeniedStatus(d.Result).Err()
	case httplimit.OutcomeError:
		return ErrorStatus(d.Err).Err()
	}
	return nil
}

// trailerMetadata returns the metadata a rejected call ends with: the
// decision's header fields (the rate-limit fields and retry-after) and,
// on a denial, grpc-retry-pushback-ms. A rejection sends no header
// metadata, so that it is a trailers-only response, which a grpc-go client
// with a retry policy may retry: a call that received headers is
// committed and never retried.
func trailerMetadata(d *httplimit.Decision) metadata.MD {
	md := headerMetadata(d.Header)
	if d.Outcome == httplimit.OutcomeDenied {
		md = metadata.Join(md, PushbackMetadata(d.Result))
	}
	return md
}

// headerMetadata returns the decision's header fields as gRPC metadata
// (lower-case keys), or nil when there are none.
func headerMetadata(fields []httplimit.HeaderField) metadata.MD {
	if len(fields) == 0 {
		return nil
	}
	md := make(metadata.MD, len(fields))
	for _, f := range fields {
		if f.Append {
			md.Append(f.Name, f.Value)
		} else {
			md.Set(f.Name, f.Value)
		}
	}
	return md
}

// finishStatus maps a handler's error to the HTTP status class
// httplimit.Decision.Finish understands: 500 for a server-side code, so that
// httplimit.WithRefundOnServerError refunds the call. The code is the one
// grpc-go sends: a context error (the client cancelled, or its deadline
// passed) is Canceled or DeadlineExceeded, not Unknown, and is never
// refunded.
func finishStatus(err error) int {
	st, ok := status.FromError(err)
	if !ok {
		st = status.FromContextError(err)
	}
	switch st.Code() {
	case codes.Unknown, codes.Internal, codes.Unavailable, codes.DataLoss:
		return http.StatusInternalServerError
	}
	return http.StatusOK
}

// call presents one gRPC call to slidelog's engine: its method is POST,
// its path and route the full method, its headers the incoming metadata,
// its remote address the peer's.
type call struct {
	ctx    context.Context
	method string
}

func (c *call) Context() context.Context { return c.ctx }
func (c *call) Method() string           { return http.MethodPost }
func (c *call) Path() string             { return c.method }
func (c *call) Route() string            { return c.method }
func (c *call) Value(key any) any        { return c.ctx.Value(key) }
func (c *call) Native() any              { return c.ctx }

func (c *call) Header(name string) []string {
	return metadata.ValueFromIncomingContext(c.ctx, name)
}

// Network is the network of the call's connection ("tcp", "unix"): that
// of the server's end of it when known, else that of the peer's address;
// "" for a call without a peer. A server run through net/http
// (grpc.Server.ServeHTTP) reports every peer address as "tcp", even on a
// Unix socket, while the local address net/http records is the
// listener's.
func (c *call) Network() string {
	p, ok := peer.FromContext(c.ctx)
	switch {
	case !ok:
		return ""
	case p.LocalAddr != nil:
		return p.LocalAddr.Network()
	case p.Addr != nil:
		return p.Addr.Network()
	}
	return ""
}

func (c *call) RemoteAddr() string {
	if p, ok := peer.FromContext(c.ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}
