package slideechov5

import (
	"github.com/labstack/echo/v5"
	slidelog "github.com/slidelog/slidelog/core"
)

// DeniedHandler writes the response to a request the limiter denied. The
// rate-limit header fields and Retry-After are already set. The default
// answers 429 with slidelog.DeniedProblem(res) as application/problem+json.
type DeniedHandler func(c *echo.Context, res slidelog.Result) error

// ErrorHandler writes the response to a request on which no decision
// could be made: a bad identity (err wraps slidelog.ErrInvalidKey) or a
// limiter error. It must not send err's text to the client. The default
// answers with slidelog.ErrorProblem(err): 400 or 431 for a bad identity,
// 503 when the limiter is unavailable, 500 when it is misconfigured; the
// request is never let through.
type ErrorHandler func(c *echo.Context, err error) error

// Option configures Middleware. Options are created by the With* functions
// of this package; the interface is sealed.
type Option interface {
	apply(*config)
}

type config struct {
	core    []slidelog.HTTPOption
	denied  DeniedHandler
	onError ErrorHandler
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

func coreOption(o slidelog.HTTPOption) Option {
	return optionFunc(func(c *config) { c.core = append(c.core, o) })
}

// WithKeyFunc sets how a request's identity is found; build it from
// slidelog.ByClientIP, ByHeader, ByContextValue, ByRoute, Composite and
// FirstOf. The default is slidelog.ByClientIP().
func WithKeyFunc(f slidelog.KeyFunc) Option { return coreOption(slidelog.WithKeyFunc(f)) }

// WithSkipFunc sets which requests bypass the limiter (no store call, no
// headers), such as health checks: slidelog.SkipPaths("/healthz"). The
// default skips none.
func WithSkipFunc(f slidelog.SkipFunc) Option { return coreOption(slidelog.WithSkipFunc(f)) }

// WithDeniedHandler replaces the response to a denied request. nil keeps
// the default.
func WithDeniedHandler(h DeniedHandler) Option {
	return optionFunc(func(c *config) { c.denied = h })
}

// WithErrorHandler replaces the response to a request on which no
// decision could be made. nil keeps the default.
func WithErrorHandler(h ErrorHandler) Option {
	return optionFunc(func(c *config) { c.onError = h })
}

// WithCost sets the cost of every request (default 1), for example 5 on a
// heavy endpoint.
func WithCost(n int) Option { return coreOption(slidelog.WithCost(n)) }

// WithCostFunc sets the cost per request; it overrides WithCost.
func WithCostFunc(f slidelog.CostFunc) Option { return coreOption(slidelog.WithCostFunc(f)) }

// WithLimiterFunc chooses the limiter per request, for example by the plan
// tier in a verified claim; a nil return means Middleware's limiter.
func WithLimiterFunc(f slidelog.LimiterFunc) Option {
	return coreOption(slidelog.WithLimiterFunc(f))
}

// WithShadowMode decides, records admissions and sends headers but never
// blocks; report, when not nil, is told of each request it would have
// blocked. Off by default.
func WithShadowMode(report slidelog.ShadowFunc) Option {
	return coreOption(slidelog.WithShadowMode(report))
}

// WithRefundOnServerError refunds an admitted request whose handler
// answered 5xx. Off by default.
func WithRefundOnServerError() Option { return coreOption(slidelog.WithRefundOnServerError()) }

// WithHeaders chooses the rate-limit header fields: slidelog.HeadersIETF
// (default), slidelog.HeadersLegacy or slidelog.HeadersNone.
func WithHeaders(s slidelog.HeaderStyle) Option { return coreOption(slidelog.WithHeaders(s)) }

// WithTrustedProxies sets the proxies (CIDRs or addresses) whose
// forwarding header, named by WithClientIPHeader, is believed. By default
// none: the client is the socket peer. It is independent of echo's IPExtractor. A CIDR holding every
// address ("0.0.0.0/0", "::/0") is refused; see WithAllPeersTrusted.
func WithTrustedProxies(cidrs ...string) Option {
	return coreOption(slidelog.WithTrustedProxies(cidrs...))
}

// WithClientIPHeader names the one header the trusted proxies write the
// client's address into: "X-Forwarded-For" (AWS ALB, Envoy), "X-Real-IP"
// (nginx with $remote_addr), "Forwarded" or "CF-Connecting-IP"
// (Cloudflare). Every other forwarding header is ignored. It is required
// with WithTrustedProxies.
func WithClientIPHeader(name string) Option {
	return coreOption(slidelog.WithClientIPHeader(name))
}

// WithAllPeersTrusted makes every socket peer a trusted proxy: only for an
// application no client can reach except through its proxies.
func WithAllPeersTrusted() Option { return coreOption(slidelog.WithAllPeersTrusted()) }

// WithIPv6Prefix sets the prefix length (1..128) by which client IPv6
// addresses are grouped; the default is /64.
func WithIPv6Prefix(bits int) Option { return coreOption(slidelog.WithIPv6Prefix(bits)) }
