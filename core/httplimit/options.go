package httplimit

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/internal/clientip"
)

// KeyFunc returns the identity a request is limited by. An error wrapping
// slidelog.ErrInvalidKey (ErrNoKey among them) is the client's fault and
// is answered with 400; any other error goes to the error handler like a
// limiter error (503 by default), and is logged (see Engine.Check). Build
// key functions from ByClientIP, ByHeader, ByContextValue, ByRoute,
// Composite and FirstOf.
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
// undecided (err != nil; an error wrapping ErrMisconfigured, with the
// zero Result, when a key, skip, cost or limiter function panicked). A
// panic in it is recovered and logged (kind shadow_func_panic), and the
// request goes on.
type ShadowFunc func(r *Request, res slidelog.Result, err error)

// DefaultIPv6Prefix is the prefix length by which client IPv6 addresses
// are grouped unless ClientIP.IPv6Prefix says otherwise: one host usually owns
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
	ipSet       bool
	// oldIP gathers the deprecated client-IP options (oldIPSet: one was
	// given), checked as one ClientIP once every option is applied.
	oldIP    ClientIP
	oldIPSet bool
	denied   any
	onError  any
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
// nil too, the request is answered as a server error (500, an error
// wrapping ErrMisconfigured; in shadow mode, let through and reported),
// and logged at ERROR to slog.Default() (kind no_limiter), at most once
// every 10 seconds (see Engine.Check). It cannot be given twice (an
// adapter's option that chooses limiters, such as
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
// the handler, and report (when not nil) is told of each, as is a
// request whose key, skip, cost or limiter function panicked. Use it to
// roll out a new limit safely. Off by default.
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
// up the client's quota. A handler that panics failed too, whatever it
// wrote (an aborted response, http.ErrAbortHandler, included): the
// adapters refund the request as the panic passes, and do not recover it,
// so that it reaches the recovery middleware outside the limiter as
// before. A request whose client went away is not refunded, whatever the
// handler answered: one whose context, as the limiter received it, is
// canceled or past its deadline when the handler returns (see
// Decision.Finish). Otherwise a client could disconnect, or let its
// deadline pass, mid-request, and have the 500 or the aborted response
// that a handler gives for a done context refunded every time. Off by
// default: with it, a client that can make the handler fail is not
// limited on that route.
func WithRefundOnServerError() Option {
	return optionFunc(func(c *config) error {
		c.refund = true
		return nil
	})
}

// WithHeaders chooses the rate-limit response headers. The default is
// HeadersIETF, with which New refuses a limiter whose policy names are not
// printable ASCII (see HeadersIETF).
func WithHeaders(s HeaderStyle) Option {
	return optionFunc(func(c *config) error {
		if s > HeadersNone {
			return fmt.Errorf("%w: header style %d", slidelog.ErrInvalidOption, s)
		}
		c.headers = s
		return nil
	})
}

// ClientIP says who the client of a request is, for ByClientIP (the
// default key) and Request.ClientIP, and how IPv6 clients are grouped.
// Give it with WithClientIP. Every field's zero value is the default, so
// the zero ClientIP keys every request by its socket peer, IPv6 by /64,
// aggregated per /48.
//
// The client is the socket peer, whatever headers it sends, unless the
// peer is a proxy you trust: listed in TrustedProxies, any peer with
// AllPeersTrusted, a Unix-socket peer with UnixSocketProxy. The client is
// then read from the one header those proxies write, named by Header: the
// rightmost address in it that is not listed in TrustedProxies. Every
// other forwarding header is ignored, so a client cannot override the
// proxy's header with one of its own. Header and a way to trust a proxy
// go together: one without the other is refused. This is independent of
// any trusted-proxy setting of the framework (such as gin's
// SetTrustedProxies).
//
// IPv6 addresses are grouped by IPv6Prefix (/64), since one host usually
// owns a whole /64. So that minted prefixes cannot fill the store and
// lock new clients out, a client prefix keeps an identity of its own
// only while its network (IPv6Network, a /48) has fewer than
// IPv6PrefixesPerNetwork (64) client prefixes with identities of their
// own; the network's further prefixes share the network's identity
// ("ip:2001:db8:1::/48"). Networks aggregate upward in turn: past
// IPv6PrefixesPerNetwork networks with identities of their own in one
// /(network-16) prefix (a /32), the further ones share that prefix's
// identity, and past those a /12's. One /32 holds at most an eighth of
// the client prefixes with identities of their own (4,096 of 32,768), so
// that its minted /64s leave the other /32s' clients identities of their
// own.
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
// often they rotate: an IPv4 client, and an IPv6 client of a /32 the
// attacker does not hold, still get identities of their own. Prefixes
// are remembered by a keyed hash with a random key per process, so no
// client can craft prefixes that count as one; the tables hold 4.8 MB
// of heap when every one is full (TestIPv6TablesFullMemory). The bound
// holds per middleware: layers that each key by client address on one
// store (per network, per host) each make up to MaxIPv6Identities
// identities of their own policy, so size the memory store's WithMaxKeys
// above their sum. The aggregation applies also when IPv6Prefix groups
// by /48 or a shorter prefix.
//
// Ports and zones are dropped and IPv4-mapped IPv6 addresses become IPv4
// before any of this.
type ClientIP struct {
	// TrustedProxies are the proxies whose Header is believed, as CIDRs
	// ("10.0.0.0/8") or single addresses. A malformed CIDR, one that
	// holds every address ("0.0.0.0/0", "::/0", "::ffff:0:0/96"), and a
	// list that together holds every IPv4 or every IPv6 address
	// ("0.0.0.0/1" with "128.0.0.0/1") are refused. Default: none, and
	// the client is the socket peer.
	TrustedProxies []string
	// AllPeersTrusted makes every socket peer a trusted proxy, and only
	// the socket peer: an address written in Header is never trusted for
	// it, so from an appending header (X-Forwarded-For, Forwarded) the
	// client is the rightmost entry, the one the peer appended, whatever
	// the client wrote before it. Addresses in TrustedProxies are still
	// walked past, for inner hops. Set it only when no client can reach
	// the application except through your proxies (a private network
	// behind a load balancer whose addresses you cannot list); otherwise
	// any client can send the header and choose its identity. Default:
	// off.
	AllPeersTrusted bool
	// UnixSocketProxy says that a peer on a Unix socket is your proxy,
	// such as nginx with proxy_pass http://unix:/run/app.sock: the client
	// is then read from Header, and a request whose header holds no
	// address is answered 400. Without it such a request has no client
	// address, and ByClientIP answers every one 400. It trusts
	// Unix-socket peers only (the Incoming's network is "unix", see
	// NetworkIncoming): a TCP peer, and a peer whose address is not an IP
	// address on any other connection (a net.Pipe, an in-memory listener,
	// a gRPC call without a peer), is keyed as without it. Give the
	// socket file permissions that let only the proxy connect. Default:
	// off.
	UnixSocketProxy bool
	// Header names the one forwarding header the trusted proxies write
	// the client's address into, such as "X-Forwarded-For" (AWS ALB,
	// Envoy, nginx with $proxy_add_x_forwarded_for), "X-Real-IP" (nginx
	// with $remote_addr), "Forwarded" (RFC 7239, its for= parameters) or
	// "CF-Connecting-IP" (Cloudflare). The name's case does not matter.
	// Its values are read as comma-separated addresses, from the right.
	// It is required with TrustedProxies, AllPeersTrusted or
	// UnixSocketProxy, and refused without them. Default: none.
	Header string
	// IPv6Prefix is the prefix length (1 to 128) by which client IPv6
	// addresses are grouped into one identity. Default (0):
	// DefaultIPv6Prefix, /64.
	IPv6Prefix int
	// IPv6Network is the prefix length (1 to 127, shorter than
	// IPv6Prefix) of the network whose client prefixes are counted.
	// Default (0): DefaultIPv6Network, /48.
	IPv6Network int
	// IPv6PrefixesPerNetwork is how many client prefixes of one network
	// (1 to 4,096) keep identities of their own at once. Raise it when
	// many real clients share one /48 (a large site). Default (0):
	// DefaultIPv6PrefixesPerNetwork, 64.
	IPv6PrefixesPerNetwork int
	// NoIPv6Aggregation turns the aggregation off, and with it the bound
	// of MaxIPv6Identities: every client prefix is an identity of its
	// own. IPv6Network and IPv6PrefixesPerNetwork must then be 0.
	// Default: off (aggregation on).
	NoIPv6Aggregation bool
}

// WithClientIP sets who the client of a request is and how IPv6 clients
// are grouped (see ClientIP). The default is the zero ClientIP: the
// socket peer, whatever headers it sends. Its fields are checked
// together: an invalid or contradictory setting, or a second WithClientIP,
// makes New fail with slidelog.ErrInvalidOption and a message that names
// the field.
func WithClientIP(c ClientIP) Option {
	return optionFunc(func(cfg *config) error {
		if cfg.ipSet {
			return fmt.Errorf("%w: two WithClientIP options: give one", slidelog.ErrInvalidOption)
		}
		ip, err := c.config()
		if err != nil {
			return fmt.Errorf("%w: ClientIP: %w", slidelog.ErrInvalidOption, err)
		}
		cfg.ip, cfg.ipSet = ip, true
		return nil
	})
}

// The options below are the client-IP settings as they were before
// ClientIP gathered them. They still work, for code written against
// them: each sets its field of one ClientIP, which New checks as a whole
// once every option is applied, exactly as WithClientIP would. They
// cannot be mixed with WithClientIP.

// WithTrustedProxies adds proxies to ClientIP.TrustedProxies.
//
// Deprecated: use WithClientIP(ClientIP{TrustedProxies: cidrs, Header: ...}).
func WithTrustedProxies(cidrs ...string) Option {
	return oldIPOption(func(c *ClientIP) error {
		c.TrustedProxies = append(c.TrustedProxies, cidrs...)
		return nil
	})
}

// WithAllPeersTrusted sets ClientIP.AllPeersTrusted.
//
// Deprecated: use WithClientIP(ClientIP{AllPeersTrusted: true, Header: ...}).
func WithAllPeersTrusted() Option {
	return oldIPOption(func(c *ClientIP) error {
		c.AllPeersTrusted = true
		return nil
	})
}

// WithUnixSocketProxy sets ClientIP.UnixSocketProxy: Unix-socket peers,
// and only they, are trusted proxies.
//
// Deprecated: use WithClientIP(ClientIP{UnixSocketProxy: true, Header: ...}).
func WithUnixSocketProxy() Option {
	return oldIPOption(func(c *ClientIP) error {
		c.UnixSocketProxy = true
		return nil
	})
}

// WithClientIPHeader sets ClientIP.Header.
//
// Deprecated: use WithClientIP(ClientIP{Header: name, TrustedProxies: ...}).
func WithClientIPHeader(name string) Option {
	return oldIPOption(func(c *ClientIP) error {
		if !validHeaderName(name) {
			return fmt.Errorf("%w: client IP header %q is not a header field name", slidelog.ErrInvalidOption, name)
		}
		c.Header = name
		return nil
	})
}

// WithIPv6Prefix sets ClientIP.IPv6Prefix, from 1 to 128.
//
// Deprecated: use WithClientIP(ClientIP{IPv6Prefix: bits}).
func WithIPv6Prefix(bits int) Option {
	return oldIPOption(func(c *ClientIP) error {
		if bits < 1 || bits > 128 {
			return fmt.Errorf("%w: IPv6 prefix /%d, want 1..128", slidelog.ErrInvalidOption, bits)
		}
		c.IPv6Prefix = bits
		return nil
	})
}

// WithIPv6Aggregation sets ClientIP.IPv6Network and
// IPv6PrefixesPerNetwork; network 0 sets NoIPv6Aggregation.
//
// Deprecated: use WithClientIP(ClientIP{IPv6Network: network,
// IPv6PrefixesPerNetwork: maxPrefixes}).
func WithIPv6Aggregation(network, maxPrefixes int) Option {
	return oldIPOption(func(c *ClientIP) error {
		if network == 0 {
			c.NoIPv6Aggregation, c.IPv6Network, c.IPv6PrefixesPerNetwork = true, 0, 0
			return nil
		}
		if network < 1 || network > 127 || maxPrefixes < 1 || maxPrefixes > maxIPv6PrefixesPerNetwork {
			return fmt.Errorf("%w: IPv6 aggregation /%d with %d prefixes, want /1../127 and 1..%d", slidelog.ErrInvalidOption, network, maxPrefixes, maxIPv6PrefixesPerNetwork)
		}
		c.NoIPv6Aggregation, c.IPv6Network, c.IPv6PrefixesPerNetwork = false, network, maxPrefixes
		return nil
	})
}

// oldIPOption is a deprecated client-IP option: set changes the ClientIP
// they gather.
func oldIPOption(set func(*ClientIP) error) Option {
	return optionFunc(func(cfg *config) error {
		cfg.oldIPSet = true
		return set(&cfg.oldIP)
	})
}

// applyOldIP checks the ClientIP the deprecated options gathered, as
// WithClientIP checks its own.
func (cfg *config) applyOldIP() error {
	if !cfg.oldIPSet {
		return nil
	}
	if cfg.ipSet {
		return fmt.Errorf("%w: WithClientIP and the deprecated client-IP options (WithTrustedProxies, WithClientIPHeader, ...): give WithClientIP alone", slidelog.ErrInvalidOption)
	}
	ip, err := cfg.oldIP.config()
	if err != nil {
		return fmt.Errorf("%w: client IP options: %w", slidelog.ErrInvalidOption, err)
	}
	cfg.ip, cfg.ipSet = ip, true
	return nil
}

// config validates c as a whole and returns what it sets.
func (c ClientIP) config() (ipConfig, error) {
	ip := ipConfig{ipv6Prefix: DefaultIPv6Prefix}
	ps, err := clientip.ParseTrustedProxies(c.TrustedProxies...)
	if err != nil {
		return ip, fmt.Errorf("TrustedProxies: %w", err)
	}
	ip.Trusted, ip.TrustAll, ip.SocketProxy = ps, c.AllPeersTrusted, c.UnixSocketProxy
	trusts := len(ps) > 0 || c.AllPeersTrusted || c.UnixSocketProxy
	switch {
	case c.Header != "" && !validHeaderName(c.Header):
		return ip, fmt.Errorf("Header %q is not a header field name", c.Header)
	case trusts && c.Header == "":
		return ip, errors.New("a trusted proxy but no Header: name the one header your proxy writes")
	case !trusts && c.Header != "":
		return ip, fmt.Errorf("Header %q but no trusted proxy: set TrustedProxies (or AllPeersTrusted, UnixSocketProxy)", c.Header)
	}
	ip.Header, ip.Forwarded = c.Header, strings.EqualFold(c.Header, "Forwarded")
	if c.IPv6Prefix != 0 {
		if c.IPv6Prefix < 1 || c.IPv6Prefix > 128 {
			return ip, fmt.Errorf("IPv6Prefix /%d, want 1..128", c.IPv6Prefix)
		}
		ip.ipv6Prefix = c.IPv6Prefix
	}
	if c.NoIPv6Aggregation {
		if c.IPv6Network != 0 || c.IPv6PrefixesPerNetwork != 0 {
			return ip, errors.New("NoIPv6Aggregation with IPv6Network or IPv6PrefixesPerNetwork: the aggregation is either off or set")
		}
		ip.netBits = -1
		return ip, nil
	}
	if c.IPv6Network != 0 && (c.IPv6Network < 1 || c.IPv6Network > 127 || c.IPv6Network >= ip.ipv6Prefix) {
		return ip, fmt.Errorf("IPv6Network /%d, want 1..127 and shorter than the client prefix /%d", c.IPv6Network, ip.ipv6Prefix)
	}
	if c.IPv6PrefixesPerNetwork < 0 || c.IPv6PrefixesPerNetwork > maxIPv6PrefixesPerNetwork {
		return ip, fmt.Errorf("IPv6PrefixesPerNetwork %d, want 1..%d", c.IPv6PrefixesPerNetwork, maxIPv6PrefixesPerNetwork)
	}
	ip.netBits, ip.netMax = c.IPv6Network, c.IPv6PrefixesPerNetwork
	return ip, nil
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
