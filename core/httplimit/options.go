package httplimit

import (
	"fmt"
	"reflect"
	"strings"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/internal/clientip"
)

// KeyFunc returns the identity a request is limited by. An error wrapping
// slidelog.ErrInvalidKey (ErrNoKey among them) is the client's fault and
// is answered with 400; any other error goes to the error handler like a
// limiter error (503 by default). Build key functions from ByClientIP,
// ByHeader, ByContextValue, ByRoute, Composite and FirstOf.
type KeyFunc func(r *Request) (string, error)

// SkipFunc reports whether a request bypasses the limiter entirely (no
// store call, no headers): health checks, allow-listed clients.
type SkipFunc func(r *Request) bool

// CostFunc returns how many units a request costs, at least 1 and at most
// the smallest limit of the limiter's policies.
type CostFunc func(r *Request) int

// LimiterFunc chooses the limiter for a request, for example by the plan
// tier in a claim the application's authentication has verified. A nil
// return means the limiter given to the middleware.
type LimiterFunc func(r *Request) *slidelog.Limiter

// ShadowFunc is told of each request that shadow mode let through but
// would have blocked: denied (err == nil, res.Allowed == false) or
// undecided (err != nil).
type ShadowFunc func(r *Request, res slidelog.Result, err error)

// DefaultIPv6Prefix is the prefix length by which client IPv6 addresses
// are grouped unless WithIPv6Prefix says otherwise: one host usually owns
// a whole /64, so keying by single IPv6 addresses would let it rotate
// through 2^64 identities.
const DefaultIPv6Prefix = 64

// Option configures an Engine, and so every adapter's middleware: the
// adapters take these options as they are. An invalid option makes New
// fail with slidelog.ErrInvalidOption (and an adapter's Middleware panic,
// at start-up). The interface is sealed: options are made by the With*
// functions of this package and by the adapters' WithDeniedHandler and
// WithErrorHandler.
type Option interface {
	apply(*config) error
}

type config struct {
	keyFunc     KeyFunc
	skipFunc    SkipFunc
	cost        int
	costSet     bool
	costFunc    CostFunc
	limiterFunc LimiterFunc
	shadow      bool
	shadowFunc  ShadowFunc
	refund      bool
	headers     HeaderStyle
	ip          ipConfig
	denied      any
	onError     any
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

// WithKeyFunc sets how a request's identity is found. The default is
// ByClientIP().
func WithKeyFunc(f KeyFunc) Option {
	return optionFunc(func(c *config) error {
		if f == nil {
			return fmt.Errorf("%w: nil key func", slidelog.ErrInvalidOption)
		}
		c.keyFunc = f
		return nil
	})
}

// WithSkipFunc sets which requests bypass the limiter (no store call, no
// headers), such as health checks: SkipPaths("/healthz"). The default
// skips none.
func WithSkipFunc(f SkipFunc) Option {
	return optionFunc(func(c *config) error {
		c.skipFunc = f
		return nil
	})
}

// WithCost sets the cost of every request, for example 5 on a heavy
// endpoint. The default is 1. It cannot be combined with WithCostFunc.
func WithCost(n int) Option {
	return optionFunc(func(c *config) error {
		if n < 1 {
			return fmt.Errorf("%w: cost %d, want >= 1", slidelog.ErrInvalidOption, n)
		}
		c.cost, c.costSet = n, true
		return nil
	})
}

// WithCostFunc sets the cost per request. A cost the limiter cannot take
// (below 1 or above its smallest limit) is a server error (500), never an
// admission. It cannot be combined with WithCost, nor given twice (an
// adapter's option that sets costs, such as slidegrpc.WithMethodCosts, is
// one).
func WithCostFunc(f CostFunc) Option {
	return optionFunc(func(c *config) error {
		if f == nil {
			return fmt.Errorf("%w: nil cost func", slidelog.ErrInvalidOption)
		}
		if c.costFunc != nil {
			return fmt.Errorf("%w: two options set the cost function: use one", slidelog.ErrInvalidOption)
		}
		c.costFunc = f
		return nil
	})
}

// WithLimiterFunc chooses the limiter, and so the policies, per request.
// When it returns nil, the middleware's own limiter is used; when that is
// nil too, the request is answered as a server error (500). It cannot be
// given twice (an adapter's option that chooses limiters, such as
// slidegrpc.WithMethodLimiters, is one).
func WithLimiterFunc(f LimiterFunc) Option {
	return optionFunc(func(c *config) error {
		if f == nil {
			return fmt.Errorf("%w: nil limiter func", slidelog.ErrInvalidOption)
		}
		if c.limiterFunc != nil {
			return fmt.Errorf("%w: two options choose the limiter: use one", slidelog.ErrInvalidOption)
		}
		c.limiterFunc = f
		return nil
	})
}

// WithShadowMode makes the middleware decide, record admissions and send
// rate-limit headers, but never block: a denied request, a request with a
// bad identity and a request the limiter could not decide all go on to
// the handler, and report (when not nil) is told of each. Use it to roll
// out a new limit safely. Off by default.
func WithShadowMode(report ShadowFunc) Option {
	return optionFunc(func(c *config) error {
		c.shadow = true
		c.shadowFunc = report
		return nil
	})
}

// WithRefundOnServerError makes the middleware refund an admitted request
// whose handler answered with a 5xx status (for gRPC: Unknown, Internal,
// Unavailable or DataLoss), so that failures the server caused do not use
// up the client's quota. Off by default: with it, a client that can make
// the handler fail is not limited on that route.
func WithRefundOnServerError() Option {
	return optionFunc(func(c *config) error {
		c.refund = true
		return nil
	})
}

// WithHeaders chooses the rate-limit response headers. The default is
// HeadersIETF.
func WithHeaders(s HeaderStyle) Option {
	return optionFunc(func(c *config) error {
		if s > HeadersNone {
			return fmt.Errorf("%w: header style %d", slidelog.ErrInvalidOption, s)
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
// the socket peer, whatever headers it sends. It is independent of any
// trusted-proxy setting of the framework (such as gin's
// SetTrustedProxies). A malformed CIDR, or one that holds every address
// ("0.0.0.0/0", "::/0"), is an ErrInvalidOption.
func WithTrustedProxies(cidrs ...string) Option {
	return optionFunc(func(c *config) error {
		ps, err := clientip.ParseTrustedProxies(cidrs...)
		if err != nil {
			return fmt.Errorf("%w: %w", slidelog.ErrInvalidOption, err)
		}
		c.ip.Trusted = append(c.ip.Trusted, ps...)
		return nil
	})
}

// WithAllPeersTrusted makes every socket peer a trusted proxy, and only
// the socket peer: an address written in the header is never trusted for
// it, so from an appending header (X-Forwarded-For, Forwarded) the client
// is the rightmost entry, the one the peer appended, whatever the client
// wrote before it. Addresses listed with WithTrustedProxies are still
// walked past, for inner hops. Use it only when no client can reach the
// application except through your proxies (a private network behind a
// load balancer whose addresses you cannot list); otherwise any client
// can send the header and choose its identity. It needs
// WithClientIPHeader.
func WithAllPeersTrusted() Option {
	return optionFunc(func(c *config) error {
		c.ip.TrustAll = true
		return nil
	})
}

// WithUnixSocketProxy says that a peer on a Unix socket is your proxy,
// such as nginx with proxy_pass http://unix:/run/app.sock: the client is
// then read from the header named by WithClientIPHeader, and a request
// whose header holds no address is answered 400. Without it such a
// request has no client address, and ByClientIP answers every one 400.
// It trusts Unix-socket peers only (the Source's network is "unix", see
// NetworkSource): a TCP peer, and a peer whose address is not an IP
// address on any other connection (a net.Pipe, an in-memory listener, a
// gRPC call without a peer), is keyed as without it. It needs
// WithClientIPHeader. Give the socket file permissions that let only the
// proxy connect.
func WithUnixSocketProxy() Option {
	return optionFunc(func(c *config) error {
		c.ip.SocketProxy = true
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
// the right. It needs WithTrustedProxies, WithAllPeersTrusted or
// WithUnixSocketProxy.
func WithClientIPHeader(name string) Option {
	return optionFunc(func(c *config) error {
		if !validHeaderName(name) {
			return fmt.Errorf("%w: client IP header %q is not a header field name", slidelog.ErrInvalidOption, name)
		}
		c.ip.Header = name
		c.ip.Forwarded = strings.EqualFold(name, "Forwarded")
		return nil
	})
}

// WithIPv6Prefix sets the prefix length (1 to 128) by which client IPv6
// addresses are grouped into one identity. The default is
// DefaultIPv6Prefix (/64).
func WithIPv6Prefix(bits int) Option {
	return optionFunc(func(c *config) error {
		if bits < 1 || bits > 128 {
			return fmt.Errorf("%w: IPv6 prefix /%d, want 1..128", slidelog.ErrInvalidOption, bits)
		}
		c.ip.ipv6Prefix = bits
		return nil
	})
}

// WithIPv6Aggregation bounds how many identities IPv6 clients can mint
// by rotating prefixes, in each network and in total. A client prefix
// (the /64 of WithIPv6Prefix) keeps an identity of its own while its
// /network prefix (such as a /48, a site's allocation) has fewer than
// maxPrefixes client prefixes with identities of their own; the network's
// further prefixes share the network's identity ("ip:2001:db8:1::/48").
// Networks aggregate upward in turn: past maxPrefixes networks with
// identities of their own in one /(network-16) prefix (a /32), the
// further ones share that prefix's identity, and past those a /12's. One
// /32 holds at most an eighth of the client prefixes with identities of
// their own (4,096 of 32,768), so that its minted /64s leave the other
// /32s' clients identities of their own.
//
// A prefix keeps its identity as long as it stays active: it ends only
// after the prefix has not been seen for an hour, or for the longest
// window of the limiter given to New when that is longer, so that a
// client seen before keeps its window however many neighbours its
// network gains. A grant is never taken from an active prefix to give to
// another: when every identity is in use, newcomers share their
// network's. In all, at most MaxIPv6Identities IPv6 identities (41,984)
// exist at once, below the 100,000 keys of the memory store and of the
// limiter's fallback, whatever the number of /48s or /32s and however
// often they rotate, so minted prefixes cannot fill the store and lock
// new clients out: an IPv4 client, and an IPv6 client of a /32 the
// attacker does not hold, still get identities of their own. Prefixes
// are remembered by a keyed hash with a random key per process, so no
// client can craft prefixes that count as one; memory is about 6 MB when
// every table is full. The bound holds per middleware: layers that each
// key by client address on one store (per network, per host) each make
// up to MaxIPv6Identities identities of their own policy, so size the
// memory store's WithMaxKeys above their sum.
//
// The default is DefaultIPv6Network (/48) and
// DefaultIPv6PrefixesPerNetwork (64). Raise maxPrefixes when many real
// clients share one /48 (a large site). It applies to ByClientIP, the
// default key, also when WithIPv6Prefix groups by /48 or a shorter
// prefix. network must be 1..127 and shorter than WithIPv6Prefix's
// length, maxPrefixes 1..4,096; network 0
// turns the aggregation off, and with it the bound.
func WithIPv6Aggregation(network, maxPrefixes int) Option {
	return optionFunc(func(c *config) error {
		if network == 0 {
			c.ip.netBits = -1
			return nil
		}
		if network < 1 || network > 127 || maxPrefixes < 1 || maxPrefixes > maxIPv6PrefixesPerNetwork {
			return fmt.Errorf("%w: IPv6 aggregation /%d with %d prefixes, want /1../127 and 1..%d", slidelog.ErrInvalidOption, network, maxPrefixes, maxIPv6PrefixesPerNetwork)
		}
		c.ip.netBits, c.ip.netMax = network, maxPrefixes
		return nil
	})
}

// WithDeniedHandler sets the function that answers a denied request, of
// the adapter's own type, such as func(*gin.Context, slidelog.Result) for
// slidegin. Use the adapter's WithDeniedHandler, whose signature names the
// type, rather than this; an adapter's Middleware panics at start-up on a
// handler of another type. nil, or a nil function, keeps the adapter's
// default.
func WithDeniedHandler(h any) Option {
	return optionFunc(func(c *config) error {
		c.denied = nilIfNilFunc(h)
		return nil
	})
}

// WithErrorHandler sets the function that answers a request on which no
// decision could be made, of the adapter's own type, such as
// func(*gin.Context, error) for slidegin. Use the adapter's
// WithErrorHandler rather than this, as for WithDeniedHandler.
func WithErrorHandler(h any) Option {
	return optionFunc(func(c *config) error {
		c.onError = nilIfNilFunc(h)
		return nil
	})
}

// nilIfNilFunc returns nil for a nil function, and h otherwise.
func nilIfNilFunc(h any) any {
	if v := reflect.ValueOf(h); v.Kind() == reflect.Func && v.IsNil() {
		return nil
	}
	return h
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
