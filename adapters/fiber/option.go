package slidefiber

import (
	"github.com/gofiber/fiber/v2"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
)

type (
	deniedFunc = func(c *fiber.Ctx, res slidelog.Result) error
	errorFunc  = func(c *fiber.Ctx, err error) error
)

// WithDeniedHandler replaces the response to a denied request. The
// rate-limit header fields and Retry-After are already set. The default
// answers 429 with httplimit.DeniedProblem(res) as
// application/problem+json. Its error goes to the framework like a handler's. nil keeps the default.
func WithDeniedHandler(h func(c *fiber.Ctx, res slidelog.Result) error) httplimit.Option {
	return httplimit.WithDeniedHandler(h)
}

// WithErrorHandler replaces the response to a request on which no
// decision could be made: a bad identity (err wraps
// slidelog.ErrInvalidKey) or a limiter error. It must not send err's text
// to the client. The default answers with httplimit.ErrorProblem(err):
// 400 or 431 for a bad identity, 503 when the limiter is unavailable, 500
// when it is misconfigured; the request is never let through. nil keeps
// the default.
func WithErrorHandler(h func(c *fiber.Ctx, err error) error) httplimit.Option {
	return httplimit.WithErrorHandler(h)
}
