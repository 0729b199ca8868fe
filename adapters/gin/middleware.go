package slidegin

import (
	"context"
	"strings"

	"github.com/gin-gonic/gin"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/memstore"
)

// LimitByIP returns middleware that limits each client IP address to the
// policy p, counted in process memory: the common case in one statement,
//
//	engine.Use(slidegin.LimitByIP(slidelog.PerMinute(100)))
//
// It is Middleware with a limiter of p on a memory store of its own,
// which lives as long as the program; opts are Middleware's. The client
// is the socket peer unless httplimit.WithClientIP says otherwise, as
// for Middleware. For limits shared between instances, use
// Middleware with a limiter on a Redis store.
//
// Like regexp.MustCompile, it panics when p is invalid, so that a
// constant policy that cannot work shows at start-up; it also panics when
// an option is invalid.
func LimitByIP(p slidelog.Policy, opts ...httplimit.Option) gin.HandlerFunc {
	return Middleware(slidelog.MustNew(memstore.New(), p), opts...)
}

// Middleware returns gin middleware that rate-limits requests with l, or
// with the limiter httplimit.WithLimiterFunc chooses (l may then be nil). Use it
// with engine.Use, on a group, or on one route; different limiters on
// different routes and groups give per-route limits. The options are
// httplimit's, with this package's WithDeniedHandler and
// WithErrorHandler.
//
// It panics when an option is invalid (such as a malformed CIDR), so that
// a misconfiguration shows at start-up, never per request.
func Middleware(l *slidelog.Limiter, opts ...httplimit.Option) gin.HandlerFunc {
	e, err := httplimit.New(l, opts...)
	if err != nil {
		panic("slidegin: " + err.Error())
	}
	denied, onError, err := httplimit.Handlers[deniedFunc, errorFunc](e)
	if err != nil {
		panic("slidegin: " + err.Error())
	}
	if denied == nil {
		denied = defaultDenied
	}
	if onError == nil {
		onError = defaultError
	}
	refund := e.RefundsOnServerError()
	return func(c *gin.Context) {
		d := e.Check(request{c})
		d.SetHeader(c.Writer.Header())
		switch d.Outcome {
		case httplimit.OutcomeDenied:
			denied(c, d.Result)
			c.Abort()
		case httplimit.OutcomeError:
			onError(c, d.Err)
			c.Abort()
		default:
			if !refund || !d.Result.Allowed {
				// No refunds, or skipped or let through by shadow mode:
				// nothing to refund, so no status to watch.
				c.Next()
				return
			}
			nextRefunding(c, d)
		}
	}
}

// nextRefunding calls the handlers after the middleware and then d.Finish
// with the status they answered; a panic in them goes on to the recovery
// middleware outside the limiter (gin.Recovery) as a 500
// (Decision.Serve).
func nextRefunding(c *gin.Context, d *httplimit.Decision) {
	d.Serve(func() int {
		c.Next()
		return c.Writer.Status()
	})
}

func defaultDenied(c *gin.Context, res slidelog.Result) {
	p := httplimit.DeniedProblem(res)
	c.Data(p.Status, httplimit.ProblemContentType, p.JSON())
}

func defaultError(c *gin.Context, err error) {
	p := httplimit.ErrorProblem(err)
	c.Data(p.Status, httplimit.ProblemContentType, p.JSON())
}

// request presents a gin request to slidelog.
type request struct{ c *gin.Context }

func (r request) Context() context.Context { return r.c.Request.Context() }
func (r request) Method() string           { return r.c.Request.Method }
func (r request) Route() string            { return r.c.FullPath() }
func (r request) RemoteAddr() string       { return r.c.Request.RemoteAddr }
func (r request) Native() any              { return r.c }

// Path is the route gin matched when it has no parameters (gin has routed
// the request before any middleware runs, on the decoded path by default),
// otherwise the escaped path as received.
func (r request) Path() string {
	if full := r.c.FullPath(); full != "" && !strings.ContainsAny(full, ":*") {
		return full
	}
	if raw := r.c.Request.URL.RawPath; raw != "" {
		return raw
	}
	return r.c.Request.URL.Path
}

func (r request) Header(name string) []string {
	return httplimit.HeaderValues(r.c.Request.Header, name)
}

func (r request) Value(key any) any {
	if v, ok := r.c.Get(key); ok {
		return v
	}
	return r.c.Request.Context().Value(key)
}
