package slideechov5

import (
	"context"

	"github.com/labstack/echo/v5"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/memstore"
)

// LimitByIP returns middleware that limits each client IP address to the
// policy p, counted in process memory: the common case in one statement,
//
//	e.Use(slideechov5.LimitByIP(slidelog.PerMinute(100)))
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
func LimitByIP(p slidelog.Policy, opts ...httplimit.Option) echo.MiddlewareFunc {
	return Middleware(slidelog.MustNew(memstore.New(), p), opts...)
}

// Middleware returns echo v5 middleware that rate-limits requests with l, or
// with the limiter httplimit.WithLimiterFunc chooses (l may then be nil). Use it
// with e.Use, on a group, or on one route; different limiters on
// different routes and groups give per-route limits. The options are
// httplimit's, with this package's WithDeniedHandler and
// WithErrorHandler.
//
// It panics when an option is invalid (such as a malformed CIDR), and the
// middleware panics when given a nil next handler, so that a
// misconfiguration shows at start-up, never per request.
func Middleware(l *slidelog.Limiter, opts ...httplimit.Option) echo.MiddlewareFunc {
	e, err := httplimit.New(l, opts...)
	if err != nil {
		panic("slideechov5: " + err.Error())
	}
	denied, onError, err := httplimit.Handlers[deniedFunc, errorFunc](e)
	if err != nil {
		panic("slideechov5: " + err.Error())
	}
	if denied == nil {
		denied = defaultDenied
	}
	if onError == nil {
		onError = defaultError
	}
	refund := e.RefundsOnServerError()
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		if next == nil {
			panic("slideechov5: Middleware(...)(nil): nil next handler")
		}
		return func(c *echo.Context) error {
			d := e.Check(request{c})
			d.SetHeader(c.Response().Header())
			switch d.Outcome {
			case httplimit.OutcomeDenied:
				return denied(c, d.Result)
			case httplimit.OutcomeError:
				return onError(c, d.Err)
			}
			if !refund || !d.Result.Allowed {
				// No refunds, or skipped or let through by shadow mode:
				// nothing to refund, so no status to watch.
				return next(c)
			}
			return nextRefunding(next, c, d)
		}
	}
}

// nextRefunding calls next and then d.Finish with the status its answer
// has or will have; a panic in next goes on to the recovery middleware
// outside the limiter (echo's middleware.Recover) as a 500
// (Decision.Serve).
func nextRefunding(next echo.HandlerFunc, c *echo.Context, d *httplimit.Decision) error {
	var err error
	d.Serve(func() int {
		err = next(c)
		return status(c, err)
	})
	return err
}

// status is the status the response has or, when the handler returned an
// error that echo's error handler has yet to write, will have.
func status(c *echo.Context, err error) int {
	_, code := echo.ResolveResponseStatus(c.Response(), err)
	return code
}

func defaultDenied(c *echo.Context, res slidelog.Result) error {
	p := httplimit.DeniedProblem(res)
	return c.Blob(p.Status, httplimit.ProblemContentType, p.JSON())
}

func defaultError(c *echo.Context, err error) error {
	p := httplimit.ErrorProblem(err)
	return c.Blob(p.Status, httplimit.ProblemContentType, p.JSON())
}

// request presents an echo request to slidelog.
type request struct{ c *echo.Context }

func (r request) Context() context.Context { return r.c.Request().Context() }
func (r request) Method() string           { return r.c.Request().Method }
func (r request) Route() string            { return r.c.Path() }
func (r request) RemoteAddr() string       { return r.c.Request().RemoteAddr }
func (r request) Native() any              { return r.c }

// Path is the path as echo's router matches it: the escaped form when the
// request has one, as in echo v4's GetPath.
func (r request) Path() string {
	u := r.c.Request().URL
	if u.RawPath != "" {
		return u.RawPath
	}
	return u.Path
}

func (r request) Header(name string) []string {
	return httplimit.HeaderValues(r.c.Request().Header, name)
}

func (r request) Value(key any) any {
	if s, ok := key.(string); ok {
		if v := r.c.Get(s); v != nil {
			return v
		}
	}
	return r.c.Request().Context().Value(key)
}
