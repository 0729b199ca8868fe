package slidegin

import (
	"context"
	"strings"

	"github.com/gin-gonic/gin"
	slidelog "github.com/slidelog/slidelog/core"
)

// Middleware returns gin middleware that rate-limits requests with l, or
// with the limiter WithLimiterFunc chooses (l may then be nil). Use it
// with engine.Use, on a group, or on one route; different limiters on
// different routes and groups give per-route limits.
//
// It panics when an option is invalid (such as a malformed CIDR), so that
// a misconfiguration shows at start-up, never per request.
func Middleware(l *slidelog.Limiter, opts ...Option) gin.HandlerFunc {
	var cfg config
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	hl, err := slidelog.NewHTTPLimiter(l, cfg.core...)
	if err != nil {
		panic("slidegin: " + err.Error())
	}
	denied, onError := cfg.denied, cfg.onError
	if denied == nil {
		denied = defaultDenied
	}
	if onError == nil {
		onError = defaultError
	}
	return func(c *gin.Context) {
		d := hl.Check(request{c})
		h := c.Writer.Header()
		for _, f := range d.Header {
			if f.Append {
				h.Add(f.Name, f.Value)
			} else {
				h.Set(f.Name, f.Value)
			}
		}
		switch d.Outcome {
		case slidelog.OutcomeDenied:
			denied(c, d.Result)
			c.Abort()
		case slidelog.OutcomeError:
			onError(c, d.Err)
			c.Abort()
		default:
			c.Next()
			d.Finish(c.Writer.Status())
		}
	}
}

func defaultDenied(c *gin.Context, res slidelog.Result) {
	p := slidelog.DeniedProblem(res)
	c.Data(p.Status, slidelog.ProblemContentType, p.JSON())
}

func defaultError(c *gin.Context, err error) {
	p := slidelog.ErrorProblem(err)
	c.Data(p.Status, slidelog.ProblemContentType, p.JSON())
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
	return slidelog.HeaderValues(r.c.Request.Header, name)
}

func (r request) Value(key any) any {
	if v, ok := r.c.Get(key); ok {
		return v
	}
	return r.c.Request.Context().Value(key)
}
