package slideconnect

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"connectrpc.com/connect"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/memstore"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Interceptor is a connect.Interceptor that rate-limits the unary calls
// and streams of the handlers it is given to (connect.WithInterceptors).
// Client-side calls pass through it unchanged. It is safe for concurrent
// use.
type Interceptor struct {
	e *httplimit.Engine
}

var _ connect.Interceptor = (*Interceptor)(nil)

// NewInterceptor returns an Interceptor that limits calls with l, or with
// the limiter httplimit.WithLimiterFunc chooses (l may then be nil for
// the calls it covers). The options are httplimit's, read for connect
// (see the package comment).
//
// It panics when an option is invalid, so that a misconfiguration shows
// at start-up, never per call.
func NewInterceptor(l *slidelog.Limiter, opts ...httplimit.Option) *Interceptor {
	e, err := httplimit.New(l, opts...)
	if err == nil {
		_, _, err = httplimit.Handlers[noHandler, noHandler](e)
	}
	if err != nil {
		panic("slideconnect: NewInterceptor: " + err.Error())
	}
	return &Interceptor{e: e}
}

// LimitByPeer returns a handler option that limits each client address
// to the policy p, counted in process memory: the common case in one
// statement,
//
//	path, handler := greetv1connect.NewGreetServiceHandler(greeter,
//		slideconnect.LimitByPeer(slidelog.PerMinute(100)))
//
// It is connect.WithInterceptors(NewInterceptor(l, opts...)) with a
// limiter of p on a memory store of its own, which lives as long as the
// program. For limits shared between instances, use NewInterceptor with a
// limiter on a Redis store.
//
// It decides a call after connect-go has read its request: set
// connect.WithReadMaxBytes beside it, or use NewInterceptor and
// Interceptor.Handler to deny before the body is read.
//
// Like regexp.MustCompile, it panics when p is invalid; it also panics
// when an option is invalid.
func LimitByPeer(p slidelog.Policy, opts ...httplimit.Option) connect.HandlerOption {
	return connect.WithInterceptors(NewInterceptor(slidelog.MustNew(memstore.New(), p), opts...))
}

// Handler returns next, the handler of a connect service (or a mux of
// such handlers, mounted at their procedures' paths), limited before the
// request body is read: each call is decided when its headers arrive,
// from the peer, the headers and the procedure (the request's path), and
// a denied call is answered in its own protocol (Connect, gRPC or
// gRPC-Web), with DeniedError's code, details and metadata, without
// reading a byte of its body. connect-go reads a unary call's whole
// request (without limit unless connect.WithReadMaxBytes sets one)
// before any interceptor runs, so an interceptor alone, LimitByPeer's
// included, reads every denied call's body first.
//
// Give the interceptor to the same handlers (connect.WithInterceptors):
// it then sends the rate-limit headers of the calls Handler admitted and
// applies httplimit.WithRefundOnServerError, without deciding again.
// A call that did not pass through Handler is decided by the interceptor,
// after its body is read. A key that needs a value your authentication
// sets (httplimit.ByContextValue) finds none before the body is read: put
// your authentication in front of Handler, or leave that key to the
// interceptor. A request that is not an RPC connect-go supports goes on
// to next, which refuses it.
//
// Handler decides a call before connect-go routes it, so it decides calls
// of procedures that do not exist too. Keyed by the procedure
// (httplimit.ByRoute, alone or in httplimit.Composite), each procedure
// name a client makes up is then an identity of its own: it costs a
// store key, kept for one window, though connect-go answers the call
// unimplemented (HTTP 404) and no handler runs. Made-up names do not
// touch a real procedure's budget, but a client can create keys at will.
// Key Handler by client (the default, the peer's address), and for
// per-procedure limits give the handlers a second Interceptor, keyed by
// route, with connect.WithInterceptors and without its Handler: an
// interceptor runs only for the procedures connect-go serves.
//
//	limit := slideconnect.NewInterceptor(l)
//	path, h := greetv1connect.NewGreetServiceHandler(greeter, connect.WithInterceptors(limit))
//	mux.Handle(path, limit.Handler(h))
func (i *Interceptor) Handler(next http.Handler) http.Handler {
	ew := connect.NewErrorWriter()
	key := decisionKey{i}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !ew.IsSupported(r) {
			next.ServeHTTP(w, r)
			return
		}
		d := i.e.Check(&call{ctx: r.Context(), procedure: r.URL.Path, header: r.Header, peer: r.RemoteAddr, native: r})
		if err := rejection(d); err != nil {
			_ = ew.Write(w, r, err) // fails only when the client has gone
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), key, d)))
	})
}

// decisionKey is the context key of the decisions an Interceptor's
// Handler made.
type decisionKey struct{ i *Interceptor }

// decide returns the decision Handler made for the call, or decides it.
func (i *Interceptor) decide(ctx context.Context, c *call) *httplimit.Decision {
	if d, ok := ctx.Value(decisionKey{i}).(*httplimit.Decision); ok {
		return d
	}
	return i.e.Check(c)
}

// WrapUnary limits a unary handler; a unary client passes through.
func (i *Interceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			return next(ctx, req)
		}
		d := i.decide(ctx, &call{ctx: ctx, procedure: req.Spec().Procedure, header: req.Header(), peer: req.Peer().Addr, native: req})
		if err := rejection(d); err != nil {
			return nil, err
		}
		var resp connect.AnyResponse
		var err error
		if i.e.RefundsOnServerError() && d.Result.Allowed {
			resp, err = unaryRefunding(ctx, req, next, d)
		} else {
			resp, err = next(ctx, req)
		}
		switch {
		case err != nil:
			var ce *connect.Error
			if errors.As(err, &ce) {
				setHeader(ce.Meta(), d.Header)
			}
		case resp != nil:
			setHeader(resp.Header(), d.Header)
		}
		return resp, err
	}
}

// WrapStreamingClient returns next: client streams are not limited.
func (i *Interceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

// WrapStreamingHandler limits the opening of each stream as WrapUnary
// does calls: one decision per stream, however many messages it carries.
func (i *Interceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		d := i.decide(ctx, &call{ctx: ctx, procedure: conn.Spec().Procedure, header: conn.RequestHeader(), peer: conn.Peer().Addr, native: conn})
		if err := rejection(d); err != nil {
			return err
		}
		setHeader(conn.ResponseHeader(), d.Header)
		if !i.e.RefundsOnServerError() || !d.Result.Allowed {
			return next(ctx, conn)
		}
		return streamRefunding(ctx, conn, next, d)
	}
}

// unaryRefunding calls next and then d.Finish with the class of its
// error's code (finishStatus); a panic in next is internal and goes on to
// connect.WithRecover's interceptor outside the limiter (or to net/http)
// (Decision.Serve).
func unaryRefunding(ctx context.Context, req connect.AnyRequest, next connect.UnaryFunc, d *httplimit.Decision) (resp connect.AnyResponse, err error) {
	d.Serve(func() int {
		resp, err = next(ctx, req)
		return finishStatus(err)
	})
	return resp, err
}

// streamRefunding is unaryRefunding for a stream.
func streamRefunding(ctx context.Context, conn connect.StreamingHandlerConn, next connect.StreamingHandlerFunc, d *httplimit.Decision) (err error) {
	d.Serve(func() int {
		err = next(ctx, conn)
		return finishStatus(err)
	})
	return err
}

// DeniedError returns the error a denied call fails with:
// connect.CodeResourceExhausted, a message saying when to retry (whole
// seconds, rounded up), a RetryInfo detail with the exact delay and a
// QuotaFailure detail naming the violated policies, and grpc-retry-pushback-ms
// in its metadata. A denial of FailClosed checked nothing and violated no
// policy: its error carries the RetryInfo only, and a message saying the
// limiter was unavailable. It is for applications that call the limiter
// themselves.
func DeniedError(res slidelog.Result) *connect.Error {
	details := []proto.Message{&errdetails.RetryInfo{RetryDelay: durationpb.New(max(res.RetryAfter, 0))}}
	msg := "rate limit exceeded; retry after " + httplimit.RetryAfterText(res.RetryAfter)
	if res.Unchecked() {
		msg = "rate limiter unavailable; retry after " + httplimit.RetryAfterText(res.RetryAfter)
	} else {
		quota := &errdetails.QuotaFailure{}
		for _, name := range res.Violated() {
			quota.Violations = append(quota.Violations, &errdetails.QuotaFailure_Violation{
				Subject:     "policy:" + name,
				Description: "rate limit policy " + strconv.Quote(name) + " exceeded",
			})
		}
		details = append(details, quota)
	}
	ce := connect.NewError(connect.CodeResourceExhausted, errors.New(msg))
	for _, m := range details {
		if d, err := connect.NewErrorDetail(m); err == nil { // cannot fail: both details marshal
			ce.AddDetail(d)
		}
	}
	ce.Meta().Set(PushbackKey, pushbackMillis(res.RetryAfter))
	return ce
}

// PushbackKey is the metadata key gRPC clients read a server's retry
// pushback from (gRPC's retry design, A6).
const PushbackKey = "grpc-retry-pushback-ms"

// UndecidedError returns the error of a call on which no decision could
// be made, with a generic message and never err's text:
// connect.CodeInvalidArgument for a bad identity (err wraps
// slidelog.ErrInvalidKey: no peer address, an empty or malformed header,
// an identity too long), connect.CodeInternal for the server's own
// misconfiguration (httplimit.ErrMisconfigured, slidelog.ErrInvalidCost,
// slidelog.ErrInvalidOption), and connect.CodeUnavailable for everything
// else (the store was unavailable, the call's context ended, the limiter
// was closed).
func UndecidedError(err error) *connect.Error {
	switch {
	case errors.Is(err, httplimit.ErrIdentityTooLong):
		return connect.NewError(connect.CodeInvalidArgument, errors.New("client identity too long"))
	case errors.Is(err, slidelog.ErrInvalidKey):
		return connect.NewError(connect.CodeInvalidArgument, errors.New("no valid client identity in this call"))
	case errors.Is(err, slidelog.ErrInvalidCost), errors.Is(err, slidelog.ErrInvalidOption), errors.Is(err, httplimit.ErrMisconfigured):
		return connect.NewError(connect.CodeInternal, errors.New("rate limiter misconfigured"))
	}
	return connect.NewError(connect.CodeUnavailable, errors.New("rate limiter unavailable; try again later"))
}

// rejection returns the error a call fails with, or nil to call the
// handler. A denial's error carries the decision's header fields in its
// metadata, which connect sends as response headers (Connect) or
// trailers (gRPC, gRPC-Web).
func rejection(d *httplimit.Decision) error {
	switch d.Outcome {
	case httplimit.OutcomeDenied:
		ce := DeniedError(d.Result)
		setHeader(ce.Meta(), d.Header)
		return ce
	case httplimit.OutcomeError:
		return UndecidedError(d.Err)
	}
	return nil
}

// setHeader applies the decision's header fields to h.
func setHeader(h http.Header, fields []httplimit.HeaderField) {
	for _, f := range fields {
		if f.Append {
			h.Add(f.Name, f.Value)
		} else {
			h.Set(f.Name, f.Value)
		}
	}
}

// finishStatus maps a handler's error to the HTTP status class
// httplimit.Decision.Finish understands: 500 for a server-side code, so
// that httplimit.WithRefundOnServerError refunds the call. The code is the
// one connect-go sends: a context error that is not a *connect.Error (the
// client cancelled, or its deadline passed) is canceled or
// deadline_exceeded, not unknown, and is never refunded.
func finishStatus(err error) int {
	if err == nil {
		return http.StatusOK
	}
	var ce *connect.Error
	if !errors.As(err, &ce) && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return http.StatusOK
	}
	switch connect.CodeOf(err) {
	case connect.CodeUnknown, connect.CodeInternal, connect.CodeUnavailable, connect.CodeDataLoss:
		return http.StatusInternalServerError
	}
	return http.StatusOK
}

// noHandler is the handler type no option has: slideconnect answers with
// DeniedError and UndecidedError, and refuses an HTTP adapter's handlers.
type noHandler struct{}

// call presents one connect call to slidelog's engine: its method is
// POST, its path and route the procedure, its headers the request's, its
// remote address the peer's, its native object the connect.AnyRequest
// (unary) or connect.StreamingHandlerConn (streaming).
type call struct {
	ctx       context.Context
	procedure string
	header    http.Header
	peer      string
	native    any
}

func (c *call) Context() context.Context    { return c.ctx }
func (c *call) Method() string              { return http.MethodPost }
func (c *call) Path() string                { return c.procedure }
func (c *call) Route() string               { return c.procedure }
func (c *call) Header(name string) []string { return httplimit.HeaderValues(c.header, name) }
func (c *call) RemoteAddr() string          { return c.peer }
func (c *call) Value(key any) any           { return c.ctx.Value(key) }
func (c *call) Native() any                 { return c.native }

func pushbackMillis(d time.Duration) string {
	ms := int64(0)
	if d > 0 {
		ms = int64((d + time.Millisecond - 1) / time.Millisecond)
	}
	return strconv.FormatInt(ms, 10)
}
