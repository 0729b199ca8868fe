package slidegrpc

import (
	"fmt"
	"maps"
	"strings"

	slidelog "github.com/slidelog/slidelog/core"
)

// Option configures UnaryServerInterceptor, StreamServerInterceptor and
// NewMiddlewareLimiter. Options are created by the With* functions of this
// package; the interface is sealed.
type Option interface {
	apply(*config) error
}

type config struct {
	core           []slidelog.HTTPOption
	cost           int
	costFunc       bool
	methodCosts    map[string]int
	methodLimiters map[string]*slidelog.Limiter
	limiterFunc    bool
	refund         bool
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

func coreOption(o slidelog.HTTPOption) Option {
	return optionFunc(func(c *config) error { c.core = append(c.core, o); return nil })
}

// WithKeyFunc sets how a call's identity is found; build it from
// slidelog.ByClientIP (the peer address), slidelog.ByHeader (a metadata
// value), slidelog.ByRoute (the full method), slidelog.ByContextValue,
// slidelog.Composite and slidelog.FirstOf. The default is
// slidelog.ByClientIP().
func WithKeyFunc(f slidelog.KeyFunc) Option { return coreOption(slidelog.WithKeyFunc(f)) }

// WithSkipFunc sets which calls bypass the limiter (no store call, no
// metadata), such as health checks:
// slidelog.SkipPaths("/grpc.health.v1.Health/Check") compares the full
// method. The default skips none.
func WithSkipFunc(f slidelog.SkipFunc) Option { return coreOption(slidelog.WithSkipFunc(f)) }

// WithCost sets the cost of every call (default 1), and of every method
// WithMethodCosts does not list.
func WithCost(n int) Option {
	return optionFunc(func(c *config) error {
		if n < 1 {
			return fmt.Errorf("%w: cost %d, want >= 1", slidelog.ErrInvalidOption, n)
		}
		c.cost = n
		return nil
	})
}

// WithCostFunc sets the cost per call; it overrides WithCost and cannot be
// combined with WithMethodCosts. A cost the limiter cannot take is
// answered with codes.Internal, never admitted.
func WithCostFunc(f slidelog.CostFunc) Option {
	return optionFunc(func(c *config) error {
		if f == nil {
			return fmt.Errorf("%w: nil cost func", slidelog.ErrInvalidOption)
		}
		c.costFunc = true
		c.core = append(c.core, slidelog.WithCostFunc(f))
		return nil
	})
}

// WithMethodCosts sets the cost of calls to the listed full methods (such
// as "/shop.Catalog/Search": 5); other methods cost WithCost's value (1
// by default). The map is copied. It cannot be combined with
// WithCostFunc.
func WithMethodCosts(costs map[string]int) Option {
	return optionFunc(func(c *config) error {
		for m, n := range costs {
			if err := checkFullMethod(m); err != nil {
				return err
			}
			if n < 1 {
				return fmt.Errorf("%w: cost %d for %s, want >= 1", slidelog.ErrInvalidOption, n, m)
			}
		}
		if c.methodCosts == nil {
			c.methodCosts = make(map[string]int, len(costs))
		}
		maps.Copy(c.methodCosts, costs)
		return nil
	})
}

// WithMethodLimiters gives the listed full methods their own limiters,
// and so their own policies and budgets (such as a tighter limit on
// "/shop.Checkout/Pay"); other methods use the limiter given to the
// interceptor. The map is copied. It cannot be combined with
// WithLimiterFunc.
func WithMethodLimiters(limiters map[string]*slidelog.Limiter) Option {
	return optionFunc(func(c *config) error {
		for m, l := range limiters {
			if err := checkFullMethod(m); err != nil {
				return err
			}
			if l == nil {
				return fmt.Errorf("%w: nil limiter for %s", slidelog.ErrInvalidOption, m)
			}
		}
		if c.methodLimiters == nil {
			c.methodLimiters = make(map[string]*slidelog.Limiter, len(limiters))
		}
		maps.Copy(c.methodLimiters, limiters)
		return nil
	})
}

// WithLimiterFunc chooses the limiter per call, for example by the plan
// tier in a verified claim; a nil return means the interceptor's limiter.
// It cannot be combined with WithMethodLimiters.
func WithLimiterFunc(f slidelog.LimiterFunc) Option {
	return optionFunc(func(c *config) error {
		if f == nil {
			return fmt.Errorf("%w: nil limiter func", slidelog.ErrInvalidOption)
		}
		c.limiterFunc = true
		c.core = append(c.core, slidelog.WithLimiterFunc(f))
		return nil
	})
}

// WithShadowMode decides, records admissions and sends the rate-limit
// metadata but never rejects a call; report, when not nil, is told of
// each call it would have rejected. Off by default.
func WithShadowMode(report slidelog.ShadowFunc) Option {
	return coreOption(slidelog.WithShadowMode(report))
}

// WithRefundOnServerError refunds an admitted call whose handler returned
// a server-side status: codes.Unknown, Internal, Unavailable or DataLoss.
// Off by default. NewMiddlewareLimiter refuses it: go-grpc-middleware's
// interceptor never reports the handler's status back.
func WithRefundOnServerError() Option {
	return optionFunc(func(c *config) error {
		c.refund = true
		c.core = append(c.core, slidelog.WithRefundOnServerError())
		return nil
	})
}

// WithHeaders chooses the rate-limit response metadata:
// slidelog.HeadersIETF (ratelimit-policy and ratelimit, the default),
// slidelog.HeadersLegacy (x-ratelimit-limit, -remaining, -reset) or
// slidelog.HeadersNone. retry-after is sent on every denial.
func WithHeaders(s slidelog.HeaderStyle) Option { return coreOption(slidelog.WithHeaders(s)) }

// WithTrustedProxies sets the proxies (CIDRs or addresses) whose
// forwarding metadata, named by WithClientIPHeader, is believed. By
// default none: the client is the peer address of the connection. A CIDR
// holding every address ("0.0.0.0/0", "::/0") is refused; see
// WithAllPeersTrusted.
func WithTrustedProxies(cidrs ...string) Option {
	return coreOption(slidelog.WithTrustedProxies(cidrs...))
}

// WithClientIPHeader names the one metadata key the trusted proxies write
// the client's address into, such as "x-forwarded-for" (Envoy) or
// "x-real-ip". Every other forwarding key is ignored; the client is the
// rightmost address in it that is not a trusted proxy. It is required
// with WithTrustedProxies and WithAllPeersTrusted.
func WithClientIPHeader(name string) Option {
	return coreOption(slidelog.WithClientIPHeader(name))
}

// WithAllPeersTrusted makes every peer a trusted proxy: only for a server
// no client can reach except through its proxies.
func WithAllPeersTrusted() Option { return coreOption(slidelog.WithAllPeersTrusted()) }

// WithIPv6Prefix sets the prefix length (1..128) by which client IPv6
// addresses are grouped; the default is /64.
func WithIPv6Prefix(bits int) Option { return coreOption(slidelog.WithIPv6Prefix(bits)) }

// checkFullMethod refuses a name that is not a gRPC full method,
// "/package.Service/Method".
func checkFullMethod(m string) error {
	svc, method, ok := strings.Cut(strings.TrimPrefix(m, "/"), "/")
	if !strings.HasPrefix(m, "/") || !ok || svc == "" || method == "" || strings.Contains(method, "/") {
		return fmt.Errorf("%w: %q is not a full method name like /package.Service/Method", slidelog.ErrInvalidOption, m)
	}
	return nil
}

// build applies opts and returns the engine they describe.
func build(who string, l *slidelog.Limiter, opts []Option) (*slidelog.HTTPLimiter, config) {
	cfg := config{cost: 1}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.apply(&cfg); err != nil {
			panic("slidegrpc: " + who + ": " + err.Error())
		}
	}
	if cfg.costFunc && cfg.methodCosts != nil {
		panic("slidegrpc: " + who + ": WithCostFunc and WithMethodCosts both set the cost: use one")
	}
	if cfg.limiterFunc && cfg.methodLimiters != nil {
		panic("slidegrpc: " + who + ": WithLimiterFunc and WithMethodLimiters both choose the limiter: use one")
	}
	core := append([]slidelog.HTTPOption(nil), cfg.core...)
	if !cfg.costFunc {
		costs, dflt := cfg.methodCosts, cfg.cost
		core = append(core, slidelog.WithCostFunc(func(r *slidelog.HTTPRequest) int {
			if n, ok := costs[r.Route()]; ok {
				return n
			}
			return dflt
		}))
	}
	if cfg.methodLimiters != nil {
		ls := cfg.methodLimiters
		core = append(core, slidelog.WithLimiterFunc(func(r *slidelog.HTTPRequest) *slidelog.Limiter { return ls[r.Route()] }))
	}
	hl, err := slidelog.NewHTTPLimiter(l, core...)
	if err != nil {
		panic("slidegrpc: " + who + ": " + err.Error())
	}
	return hl, cfg
}
