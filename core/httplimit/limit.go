package slidelog

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"net/textproto"
	"strings"
	"time"
)

// HTTPSource is one incoming HTTP request as a framework adapter presents
// it to an HTTPLimiter. The adapters slidegin, slideecho, slidechi and
// slidefiber implement it; applications do not need to.
type HTTPSource interface {
	// Context is the request's context; store calls honour its deadline.
	Context() context.Context
	// Method is the request method, such as "GET".
	Method() string
	// Path is the request's path exactly as the framework's router
	// matches it against routes: escaped as received where the router
	// routes on the escaped path (chi, echo, fiber), never decoded or
	// cleaned by the adapter, so that a skip rule on it matches only what
	// the router will serve as that path.
	Path() string
	// Route is the pattern of the route the framework matched, such as
	// "/users/:id", or "" when it has not matched one.
	Route() string
	// Header returns every value of the named header field, in order,
	// whatever the case of the name in the request or in the call.
	Header(name string) []string
	// RemoteAddr is the address of the socket peer, such as
	// "192.0.2.1:54321": never a value read from a header.
	RemoteAddr() string
	// Value returns what the application stored for this request under
	// key: in the framework's per-request store (gin's and echo's Set,
	// fiber's Locals) or in the request's context; nil when nothing.
	Value(key any) any
	// Native returns the framework's own request object: *gin.Context,
	// echo.Context, *http.Request or *fiber.Ctx.
	Native() any
}

// HeaderValues returns every value of the header field name in h, whatever
// the case of its name in h: http.Header.Values finds only the canonical
// spelling, while code that writes h directly may have used another. It
// is for adapters built on net/http.
func HeaderValues(h http.Header, name string) []string {
	canonical := textproto.CanonicalMIMEHeaderKey(name)
	vs := h[canonical]
	for k, more := range h {
		if k != canonical && strings.EqualFold(k, name) {
			vs = append(vs[:len(vs):len(vs)], more...)
		}
	}
	return vs
}

// HTTPRequest is what key, skip, cost and limiter functions receive: the
// request, and its client address as the HTTPLimiter's client-IP options
// determine it.
type HTTPRequest struct {
	HTTPSource
	ip     *clientIPConfig
	addr   netip.Addr
	addrOK bool
	err    error
}

// NewHTTPRequest returns src as an HTTPRequest with the default client-IP
// settings (socket address only, IPv6 by /64). It is for testing key
// functions; HTTPLimiter builds its own with its options.
func NewHTTPRequest(src HTTPSource) *HTTPRequest {
	return &HTTPRequest{HTTPSource: src, ip: &clientIPConfig{ipv6Prefix: DefaultIPv6Prefix}}
}

// The methods below stand in for HTTPSource's on a request without a
// source (the zero HTTPRequest, or one built from a nil source), so that
// no key function can panic on one: it has no header, no address and no
// values, and its context is context.Background().

// Context returns the request's context, or context.Background().
func (r *HTTPRequest) Context() context.Context {
	if r == nil || r.HTTPSource == nil {
		return context.Background()
	}
	if ctx := r.HTTPSource.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}

// Method returns the request method, or "".
func (r *HTTPRequest) Method() string {
	if r == nil || r.HTTPSource == nil {
		return ""
	}
	return r.HTTPSource.Method()
}

// Path returns the request path as the router matches it (see
// HTTPSource), or "".
func (r *HTTPRequest) Path() string {
	if r == nil || r.HTTPSource == nil {
		return ""
	}
	return r.HTTPSource.Path()
}

// Route returns the matched route's pattern, or "".
func (r *HTTPRequest) Route() string {
	if r == nil || r.HTTPSource == nil {
		return ""
	}
	return r.HTTPSource.Route()
}

// Header returns every value of the named header field, or nil.
func (r *HTTPRequest) Header(name string) []string {
	if r == nil || r.HTTPSource == nil {
		return nil
	}
	return r.HTTPSource.Header(name)
}

// RemoteAddr returns the socket peer's address, or "".
func (r *HTTPRequest) RemoteAddr() string {
	if r == nil || r.HTTPSource == nil {
		return ""
	}
	return r.HTTPSource.RemoteAddr()
}

// Value returns the application's value for key, or nil.
func (r *HTTPRequest) Value(key any) any {
	if r == nil || r.HTTPSource == nil {
		return nil
	}
	return r.HTTPSource.Value(key)
}

// Native returns the framework's request object, or nil.
func (r *HTTPRequest) Native() any {
	if r == nil || r.HTTPSource == nil {
		return nil
	}
	return r.HTTPSource.Native()
}

// HeaderValue returns the first value of the named header field, or "".
func (r *HTTPRequest) HeaderValue(name string) string {
	if vs := r.Header(name); len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// ClientIP returns the client's address: the socket peer's, or, when the
// peer is a trusted proxy (WithTrustedProxies), the rightmost address of
// the header named by WithClientIPHeader that is not a trusted proxy. Ports and zones are
// dropped and IPv4-mapped IPv6 addresses become IPv4. The error wraps
// ErrInvalidKey when the socket address is not an IP address.
func (r *HTTPRequest) ClientIP() (netip.Addr, error) {
	if r == nil {
		return netip.Addr{}, errNoClientAddr
	}
	if r.ip == nil {
		r.ip = &clientIPConfig{ipv6Prefix: DefaultIPv6Prefix}
	}
	if !r.addrOK && r.err == nil {
		r.addr, r.err = r.ip.clientIP(r.RemoteAddr(), r.Header)
		r.addrOK = r.err == nil
	}
	return r.addr, r.err
}

// ClientPrefix returns the group the client is limited as: its IPv4
// address, or the prefix of its IPv6 address (/64 unless WithIPv6Prefix).
func (r *HTTPRequest) ClientPrefix() (netip.Prefix, error) {
	a, err := r.ClientIP()
	if err != nil {
		return netip.Prefix{}, err
	}
	return IPPrefix(a, r.ip.ipv6Prefix), nil
}

// KeyFunc returns the identity a request is limited by. An error wrapping
// ErrInvalidKey (ErrNoKey among them) is the client's fault and is
// answered with 400; any other error goes to the error handler like a
// limiter error (503 by default). Build key functions from
// ByClientIP, ByHeader, ByContextValue, ByRoute, Composite and FirstOf.
type KeyFunc func(r *HTTPRequest) (string, error)

// SkipFunc reports whether a request bypasses the limiter entirely (no
// store call, no headers): health checks, allow-listed clients.
type SkipFunc func(r *HTTPRequest) bool

// CostFunc returns how many units a request costs, at least 1 and at most
// the smallest limit of the limiter's policies.
type CostFunc func(r *HTTPRequest) int

// LimiterFunc chooses the limiter for a request, for example by the plan
// tier in a claim the application's authentication has verified. A nil
// return means the limiter given to the middleware.
type LimiterFunc func(r *HTTPRequest) *Limiter

// ShadowFunc is told of each request that shadow mode let through but
// would have blocked: denied (err == nil, res.Allowed == false) or
// undecided (err != nil).
type ShadowFunc func(r *HTTPRequest, res Result, err error)

// HTTPOption configures an HTTPLimiter. The adapters offer the same
// options under the same names; the interface is sealed.
type HTTPOption interface {
	applyHTTP(*httpConfig) error
}

type httpConfig struct {
	keyFunc     KeyFunc
	skipFunc    SkipFunc
	cost        int
	costFunc    CostFunc
	limiterFunc LimiterFunc
	shadow      bool
	shadowFunc  ShadowFunc
	refund      bool
	headers     HeaderStyle
	ip          clientIPConfig
}

type httpOptionFunc func(*httpConfig) error

func (f httpOptionFunc) applyHTTP(c *httpConfig) error { return f(c) }

// WithKeyFunc sets how a request's identity is found. The default is
// ByClientIP().
func WithKeyFunc(f KeyFunc) HTTPOption {
	return httpOptionFunc(func(c *httpConfig) error {
		if f == nil {
			return fmt.Errorf("%w: nil key func", ErrInvalidOption)
		}
		c.keyFunc = f
		return nil
	})
}

// WithSkipFunc sets which requests bypass the limiter. The default skips
// none. See SkipPaths.
func WithSkipFunc(f SkipFunc) HTTPOption {
	return httpOptionFunc(func(c *httpConfig) error {
		c.skipFunc = f
		return nil
	})
}

// WithCost sets the cost of every request, for example 5 on a heavy
// endpoint. The default is 1.
func WithCost(n int) HTTPOption {
	return httpOptionFunc(func(c *httpConfig) error {
		if n < 1 {
			return fmt.Errorf("%w: cost %d, want >= 1", ErrInvalidOption, n)
		}
		c.cost = n
		return nil
	})
}

// WithCostFunc sets the cost per request; it overrides WithCost. A cost
// the limiter cannot take (below 1 or above its smallest limit) is a
// server error (500), never an admission.
func WithCostFunc(f CostFunc) HTTPOption {
	return httpOptionFunc(func(c *httpConfig) error {
		c.costFunc = f
		return nil
	})
}

// WithLimiterFunc chooses the limiter, and so the policies, per request.
// When it returns nil, the middleware's own limiter is used; when that is
// nil too, the request is answered as a server error (500).
func WithLimiterFunc(f LimiterFunc) HTTPOption {
	return httpOptionFunc(func(c *httpConfig) error {
		c.limiterFunc = f
		return nil
	})
}

// WithShadowMode makes the middleware decide, record admissions and send
// rate-limit headers, but never block: a denied request, a request with a
// bad identity and a request the limiter could not decide all go on to
// the handler, and report (when not nil) is told of each. Use it to roll
// out a new limit safely. Off by default.
func WithShadowMode(report ShadowFunc) HTTPOption {
	return httpOptionFunc(func(c *httpConfig) error {
		c.shadow = true
		c.shadowFunc = report
		return nil
	})
}

// WithRefundOnServerError makes the middleware refund an admitted request
// whose handler answered with a 5xx status, so that failures the server
// caused do not use up the client's quota. Off by default: with it, a
// client that can make the handler fail is not limited on that route.
func WithRefundOnServerError() HTTPOption {
	return httpOptionFunc(func(c *httpConfig) error {
		c.refund = true
		return nil
	})
}

// WithHeaders chooses the rate-limit response headers. The default is
// HeadersIETF.
func WithHeaders(s HeaderStyle) HTTPOption {
	return httpOptionFunc(func(c *httpConfig) error {
		if s > HeadersNone {
			return fmt.Errorf("%w: header style %d", ErrInvalidOption, s)
		}
		c.headers = s
		return nil
	})
}

// WithTrustedProxies sets the proxies whose forwarding header is
// believed, as CIDRs ("10.0.0.0/8") or single addresses. It needs
// WithClientIPHeader, which names the one header those proxies write. The
// client is then the rightmost address of that header that is not a
// trusted proxy. By default no proxy is trusted and the client is always
// the socket peer, whatever headers it sends. A malformed CIDR, or one
// that holds every address ("0.0.0.0/0", "::/0"), is an ErrInvalidOption.
func WithTrustedProxies(cidrs ...string) HTTPOption {
	return httpOptionFunc(func(c *httpConfig) error {
		ps, err := ParseTrustedProxies(cidrs...)
		if err != nil {
			return err
		}
		c.ip.trusted = append(c.ip.trusted, ps...)
		return nil
	})
}

// WithAllPeersTrusted makes every socket peer a trusted proxy. Use it only
// when no client can reach the application except through your proxies
// (a private network behind a load balancer whose addresses you cannot
// list); otherwise any client can send the header and choose its
// identity. It needs WithClientIPHeader.
func WithAllPeersTrusted() HTTPOption {
	return httpOptionFunc(func(c *httpConfig) error {
		c.ip.trustAll = true
		return nil
	})
}

// WithClientIPHeader names the one forwarding header the trusted proxies
// (WithTrustedProxies) write the client's address into, such as
// "X-Forwarded-For" (AWS ALB, Envoy, nginx with
// $proxy_add_x_forwarded_for), "X-Real-IP" (nginx with $remote_addr),
// "Forwarded" (RFC 7239, its for= parameters) or "CF-Connecting-IP"
// (Cloudflare). Every other forwarding header is ignored, so a client
// cannot override the proxy's header with one of its own. The name's case
// does not matter. Its values are read as comma-separated addresses, from
// the right. It needs WithTrustedProxies or WithAllPeersTrusted.
func WithClientIPHeader(name string) HTTPOption {
	return httpOptionFunc(func(c *httpConfig) error {
		if !validHeaderName(name) {
			return fmt.Errorf("%w: client IP header %q is not a header field name", ErrInvalidOption, name)
		}
		c.ip.header = name
		c.ip.forwarded = strings.EqualFold(name, "Forwarded")
		return nil
	})
}

// validHeaderName reports whether name is an RFC 9110 token.
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// WithIPv6Prefix sets the prefix length (1 to 128) by which client IPv6
// addresses are grouped into one identity. The default is
// DefaultIPv6Prefix (/64).
func WithIPv6Prefix(bits int) HTTPOption {
	return httpOptionFunc(func(c *httpConfig) error {
		if bits < 1 || bits > 128 {
			return fmt.Errorf("%w: IPv6 prefix /%d, want 1..128", ErrInvalidOption, bits)
		}
		c.ip.ipv6Prefix = bits
		return nil
	})
}

// HTTPLimiter is the framework-neutral rate-limiting middleware the
// adapters share: it finds a request's identity, rejects bad identities
// before any store call, asks the limiter, and says which headers to send
// and whether to call the handler. It is safe for concurrent use.
//
// Limiters with different policies on one store, such as per-route
// limits, never share a log (see Request.Namespace). Limiters with
// identical policies do share one: for separate budgets on two routes,
// name their policies differently or key by route.
type HTTPLimiter struct {
	limiter *Limiter
	cfg     httpConfig
}

// NewHTTPLimiter returns an HTTPLimiter that asks l, or the limiter
// chosen by WithLimiterFunc. l may be nil only with WithLimiterFunc. It
// fails with ErrInvalidOption.
func NewHTTPLimiter(l *Limiter, opts ...HTTPOption) (*HTTPLimiter, error) {
	cfg := httpConfig{keyFunc: ByClientIP(), cost: 1, ip: clientIPConfig{ipv6Prefix: DefaultIPv6Prefix}}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.applyHTTP(&cfg); err != nil {
			return nil, err
		}
	}
	if l == nil && cfg.limiterFunc == nil {
		return nil, fmt.Errorf("%w: nil limiter and no limiter func", ErrInvalidOption)
	}
	trusts := len(cfg.ip.trusted) > 0 || cfg.ip.trustAll
	if trusts && cfg.ip.header == "" {
		return nil, fmt.Errorf("%w: trusted proxies but no client IP header: name the one header your proxy writes with WithClientIPHeader", ErrInvalidOption)
	}
	if !trusts && cfg.ip.header != "" {
		return nil, fmt.Errorf("%w: client IP header %q but no trusted proxy: add WithTrustedProxies", ErrInvalidOption, cfg.ip.header)
	}
	return &HTTPLimiter{limiter: l, cfg: cfg}, nil
}

// Outcome is what an adapter does with a request after Check.
type Outcome uint8

// Outcomes.
const (
	// OutcomeNext: call the handler (skipped, admitted, or let through by
	// shadow mode), then HTTPDecision.Finish.
	OutcomeNext Outcome = iota
	// OutcomeDenied: answer with the denied handler (by default 429 and
	// DeniedProblem); do not call the handler.
	OutcomeDenied
	// OutcomeError: no decision could be made; answer with the error
	// handler (by default ErrorProblem); do not call the handler.
	OutcomeError
)

// String returns "next", "denied" or "error".
func (o Outcome) String() string {
	switch o {
	case OutcomeNext:
		return "next"
	case OutcomeDenied:
		return "denied"
	case OutcomeError:
		return "error"
	}
	return "unknown"
}

// HTTPDecision is the HTTPLimiter's answer for one request.
type HTTPDecision struct {
	// Outcome says what the adapter does next.
	Outcome Outcome
	// Request is the request decided on.
	Request *HTTPRequest
	// Result is the limiter's decision; the zero Result when the request
	// was skipped or no decision was made.
	Result Result
	// Err is why no decision was made: an error wrapping ErrInvalidKey for
	// a bad identity, or the limiter's error. Never send its text to the
	// client.
	Err error
	// Skipped reports that the skip function let the request bypass the
	// limiter.
	Skipped bool
	// Header holds the response header fields to set, in order, before the
	// handler or the denied handler writes the response.
	Header []HeaderField

	limiter *Limiter
	refund  bool
}

// Check decides one request. It never blocks on anything but the store,
// and calls the store only for a valid identity.
//
// The limiter's failure mode shows through: an error (FailError) is
// OutcomeError, answered 503 by default; a FailClosed denial is
// OutcomeDenied like any other, answered 429 with Retry-After; a
// FailOpen or fallback admission is OutcomeNext.
//
// Check never panics: a panic in a key, skip, cost, limiter or shadow
// function, or in the store, is recovered and answered as an error
// wrapping ErrMisconfigured (500 by default; let through in shadow mode).
// A nil or zero HTTPLimiter answers every request that way.
func (h *HTTPLimiter) Check(src HTTPSource) (d *HTTPDecision) {
	if h == nil || h.cfg.keyFunc == nil {
		return &HTTPDecision{Request: &HTTPRequest{HTTPSource: src}, Outcome: OutcomeError,
			Err: fmt.Errorf("%w: HTTPLimiter not made by NewHTTPLimiter", ErrMisconfigured)}
	}
	r := &HTTPRequest{HTTPSource: src, ip: &h.cfg.ip}
	d = &HTTPDecision{Request: r}
	defer func() {
		if p := recover(); p != nil {
			*d = HTTPDecision{Request: r, Outcome: OutcomeError, Err: fmt.Errorf("%w: panic: %v", ErrMisconfigured, p)}
			if h.cfg.shadow {
				d.Outcome = OutcomeNext
			}
		}
	}()
	if h.cfg.skipFunc != nil && h.cfg.skipFunc(r) {
		d.Skipped = true
		return d
	}
	d.Result, d.limiter, d.Err = h.decide(r)
	switch {
	case d.Err != nil:
		d.Outcome = OutcomeError
	case !d.Result.Allowed:
		d.Outcome = OutcomeDenied
		d.Header = appendRateLimitHeaders(d.Header, h.cfg.headers, d.Result)
		d.Header = append(d.Header, HeaderField{Name: "Retry-After", Value: RetryAfterSeconds(d.Result.RetryAfter)})
	default:
		d.Header = appendRateLimitHeaders(d.Header, h.cfg.headers, d.Result)
		d.refund = h.cfg.refund
	}
	if h.cfg.shadow && d.Outcome != OutcomeNext {
		if d.Outcome == OutcomeDenied {
			d.Header = d.Header[:len(d.Header)-1] // no Retry-After on a response that is not a denial
		}
		if h.cfg.shadowFunc != nil {
			h.cfg.shadowFunc(r, d.Result, d.Err)
		}
		d.Outcome = OutcomeNext
	}
	return d
}

func (h *HTTPLimiter) decide(r *HTTPRequest) (Result, *Limiter, error) {
	l := h.limiter
	if h.cfg.limiterFunc != nil {
		if chosen := h.cfg.limiterFunc(r); chosen != nil {
			l = chosen
		}
	}
	if l == nil {
		return Result{}, nil, errNoLimiter
	}
	id, err := h.cfg.keyFunc(r)
	if err != nil {
		return Result{}, nil, err
	}
	if id == "" {
		return Result{}, nil, ErrNoKey
	}
	key := id
	if err := l.ValidateKey(key); err != nil {
		if key != "" {
			return Result{}, nil, fmt.Errorf("%w: %w", ErrIdentityTooLong, err)
		}
		return Result{}, nil, err
	}
	cost := h.cfg.cost
	if h.cfg.costFunc != nil {
		cost = h.cfg.costFunc(r)
	}
	res, err := l.AllowN(r.Context(), key, cost)
	return res, l, err
}

// Finish completes a decision once the handler has answered with status.
// With WithRefundOnServerError, an admitted request whose status is 5xx
// is refunded; a refund that fails is ignored (the request then simply
// counts). Finish is a no-op for every other decision.
func (d *HTTPDecision) Finish(status int) {
	if d == nil || !d.refund || status < 500 || status > 599 || !d.Result.Allowed {
		return
	}
	d.refund = false
	l := d.limiter
	if l == nil {
		return
	}
	// The client may be gone, but its entry must still go.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(d.Request.Context()), RefundTimeout)
	defer cancel()
	_ = l.Refund(ctx, d.Result)
}

// RefundTimeout bounds the store call Finish makes to refund a request.
const RefundTimeout = 2 * time.Second

// ErrNoKey reports that a key function found no identity in the request
// (no such header, no value in the context). FirstOf moves on to its next
// key function on it. It wraps ErrInvalidKey.
var ErrNoKey = fmt.Errorf("%w: no identity in request", ErrInvalidKey)

// ErrIdentityTooLong reports an identity longer than the limiter's maximum
// key length; it is answered with 431. It wraps ErrInvalidKey.
var ErrIdentityTooLong = fmt.Errorf("%w: identity too long", ErrInvalidKey)

var errNoLimiter = fmt.Errorf("%w: no limiter for request", ErrMisconfigured)
