package slidefiber

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"strings"

	"github.com/gofiber/fiber/v2"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/memstore"
)

// LimitByIP returns middleware that limits each client IP address to the
// policy p, counted in process memory: the common case in one statement,
//
//	app.Use(slidefiber.LimitByIP(slidelog.PerMinute(100)))
//
// It is Middleware with a limiter of p on a memory store of its own,
// which lives as long as the program; opts are Middleware's. The client
// is the socket peer unless httplimit.WithClientIP says otherwise, as
// for Middleware. For limits shared between instances, use
// Middleware with a limiter on a Redis store; so too with fiber's
// Prefork, whose every child process has its own memory store (n
// children admit up to n times the limit).
//
// Like regexp.MustCompile, it panics when p is invalid, so that a
// constant policy that cannot work shows at start-up; it also panics when
// an option is invalid.
func LimitByIP(p slidelog.Policy, opts ...httplimit.Option) fiber.Handler {
	return Middleware(slidelog.MustNew(memstore.New(), p), opts...)
}

// Middleware returns fiber middleware that rate-limits requests with l, or
// with the limiter httplimit.WithLimiterFunc chooses (l may then be nil). Use it
// with app.Use, on a group, or on one route; different limiters on
// different routes and groups give per-route limits. The options are
// httplimit's, with this package's WithDeniedHandler and
// WithErrorHandler.
//
// It panics when an option is invalid (such as a malformed CIDR), so that
// a misconfiguration shows at start-up, never per request.
func Middleware(l *slidelog.Limiter, opts ...httplimit.Option) fiber.Handler {
	e, err := httplimit.New(l, opts...)
	if err != nil {
		panic("slidefiber: " + err.Error())
	}
	denied, onError, err := httplimit.Handlers[deniedFunc, errorFunc](e)
	if err != nil {
		panic("slidefiber: " + err.Error())
	}
	if denied == nil {
		denied = defaultDenied
	}
	if onError == nil {
		onError = defaultError
	}
	refund := e.RefundsOnServerError()
	return func(c *fiber.Ctx) error {
		d := e.Check(&request{c: c})
		for _, f := range httplimit.DistinctPolicyNames(d.Header, []string{c.GetRespHeader("RateLimit-Policy")}) {
			if f.Append {
				c.Append(f.Name, f.Value)
			} else {
				c.Set(f.Name, f.Value)
			}
		}
		switch d.Outcome {
		case httplimit.OutcomeDenied:
			return denied(c, d.Result)
		case httplimit.OutcomeError:
			return onError(c, d.Err)
		}
		if !refund || !d.Result.Allowed {
			// No refunds, or skipped or let through by shadow mode:
			// nothing to refund, so no status to watch.
			return c.Next()
		}
		return nextRefunding(c, d)
	}
}

// nextRefunding calls the handlers after the middleware and then
// d.Finish with the status their answer has or will have; a panic in them
// goes on to the recovery middleware outside the limiter (fiber's
// recover.New) as a 500 (Decision.Serve).
func nextRefunding(c *fiber.Ctx, d *httplimit.Decision) error {
	var err error
	d.Serve(func() int {
		err = c.Next()
		return status(c, err)
	})
	return err
}

// status is the status the response has or, when the handler returned an
// error that fiber's error handler has yet to write, will have.
func status(c *fiber.Ctx, err error) int {
	if err == nil {
		return c.Response().StatusCode()
	}
	var fe *fiber.Error
	if errors.As(err, &fe) {
		return fe.Code
	}
	return fiber.StatusInternalServerError
}

func defaultDenied(c *fiber.Ctx, res slidelog.Result) error {
	p := httplimit.DeniedProblem(res)
	c.Set(fiber.HeaderContentType, httplimit.ProblemContentType)
	return c.Status(p.Status).Send(p.JSON())
}

func defaultError(c *fiber.Ctx, err error) error {
	p := httplimit.ErrorProblem(err)
	c.Set(fiber.HeaderContentType, httplimit.ProblemContentType)
	return c.Status(p.Status).Send(p.JSON())
}

// request presents a fiber request to slidelog. Every string it returns is
// a copy: fasthttp reuses its buffers after the handler returns, and a
// store may keep a key.
type request struct{ c *fiber.Ctx }

func (r *request) Context() context.Context { return r.c.UserContext() }
func (r *request) Method() string           { return strings.Clone(r.c.Method()) }
func (r *request) RemoteAddr() string       { return r.c.Context().RemoteAddr().String() }
func (r *request) Network() string          { return r.c.Context().RemoteAddr().Network() }
func (r *request) Native() any              { return r.c }

// Route is the path of the route fiber is running: a route's pattern, or
// "" under app.Use or a group's Use, whose path is only a prefix that
// every route below it shares.
func (r *request) Route() string {
	rt := r.c.Route()
	if rt == nil || isUse(rt) {
		return ""
	}
	return strings.Clone(rt.Path)
}

// isUse reports whether rt was registered with Use, which fiber records
// only in an unexported field of its Route (fiber v2 has no other way to
// tell a prefix from a route's pattern).
func isUse(rt *fiber.Route) bool {
	f := reflect.ValueOf(rt).Elem().FieldByName("use")
	return f.IsValid() && f.Kind() == reflect.Bool && f.Bool()
}

// Path is the path fiber routes on (c.Path(): the path as received, or
// decoded with UnescapePath), never fasthttp's normalised URI path, which
// resolves "%2f" and dot segments that fiber's router does not.
func (r *request) Path() string { return strings.Clone(r.c.Path()) }

// Header compares names without regard to case: with fiber's
// DisableHeaderNormalizing, names keep the case the client sent, which
// PeekAll would match exactly.
func (r *request) Header(name string) []string {
	var vs []string
	want := []byte(name)
	r.c.Request().Header.VisitAll(func(k, v []byte) {
		if bytes.EqualFold(k, want) {
			vs = append(vs, string(v))
		}
	})
	return vs
}

func (r *request) Value(key any) any {
	if v := r.c.Locals(key); v != nil {
		return v
	}
	return r.c.UserContext().Value(key)
}
