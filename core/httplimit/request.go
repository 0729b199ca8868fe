package httplimit

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"net/textproto"
	"strings"

	"github.com/slidelog/slidelog/core/internal/clientip"
)

// Incoming is one incoming request as a framework adapter presents it to an
// Engine. The adapters slidegin, slideecho, slideechov5, slidechi,
// slidefiber and slidegrpc implement it; applications do not need to.
type Incoming interface {
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
	// "/users/:id", or "" when it matched none or the adapter cannot know
	// it (ByRoute then fails with ErrNoRoute).
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

// NetworkIncoming is an Incoming that knows the network of the connection a
// request came on, as net.Addr's Network method names it: "tcp", or
// "unix" for a Unix socket. ClientIP.UnixSocketProxy trusts a peer only when
// its network is "unix". slidegrpc and slidefiber implement it; for an
// Incoming that does not, the network is that of the local address net/http
// stores in the request's context (http.LocalAddrContextKey), which serves
// the adapters built on net/http.
type NetworkIncoming interface {
	Incoming
	// Network is the network of the request's connection, or "" when it
	// is not known.
	Network() string
}

// Source is the old name of Incoming.
//
// Deprecated: use Incoming. (slidelog.Source names who decided a Result.)
type Source = Incoming

// NetworkSource is the old name of NetworkIncoming.
//
// Deprecated: use NetworkIncoming.
type NetworkSource = NetworkIncoming

// network returns the network of src's connection, or "".
func network(src Incoming) string {
	if ns, ok := src.(NetworkIncoming); ok {
		return ns.Network()
	}
	if ctx := src.Context(); ctx != nil {
		if a, ok := ctx.Value(http.LocalAddrContextKey).(net.Addr); ok && a != nil {
			return a.Network()
		}
	}
	return ""
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

// ipConfig is how an Engine finds client addresses.
type ipConfig struct {
	clientip.Config
	ipv6Prefix int
	// networks chooses an IPv6 client's identity prefix (ClientIP's
	// aggregation); nil keeps the client prefix.
	networks *aggregator
	netBits  int
	netMax   int
}

var defaultIP = &ipConfig{ipv6Prefix: DefaultIPv6Prefix}

// Request is what key, skip, cost, limiter and shadow functions receive:
// the request, and its client address as the Engine's ClientIP
// determines it.
type Request struct {
	Incoming
	ip     *ipConfig
	addr   netip.Addr
	addrOK bool
	err    error
}

// The methods below stand in for Incoming's on a request without one
// (the zero Request, or one built from a nil source), so that no key
// function can panic on one: it has no header, no address and no values,
// and its context is context.Background().

// Context returns the request's context, or context.Background().
func (r *Request) Context() context.Context {
	if r == nil || r.Incoming == nil {
		return context.Background()
	}
	if ctx := r.Incoming.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}

// Method returns the request method, or "".
func (r *Request) Method() string {
	if r == nil || r.Incoming == nil {
		return ""
	}
	return r.Incoming.Method()
}

// Path returns the request path as the router matches it (see Incoming), or
// "".
func (r *Request) Path() string {
	if r == nil || r.Incoming == nil {
		return ""
	}
	return r.Incoming.Path()
}

// Route returns the matched route's pattern, or "".
func (r *Request) Route() string {
	if r == nil || r.Incoming == nil {
		return ""
	}
	return r.Incoming.Route()
}

// Header returns every value of the named header field, or nil.
func (r *Request) Header(name string) []string {
	if r == nil || r.Incoming == nil {
		return nil
	}
	return r.Incoming.Header(name)
}

// RemoteAddr returns the socket peer's address, or "".
func (r *Request) RemoteAddr() string {
	if r == nil || r.Incoming == nil {
		return ""
	}
	return r.Incoming.RemoteAddr()
}

// Value returns the application's value for key, or nil.
func (r *Request) Value(key any) any {
	if r == nil || r.Incoming == nil {
		return nil
	}
	return r.Incoming.Value(key)
}

// Native returns the framework's request object, or nil.
func (r *Request) Native() any {
	if r == nil || r.Incoming == nil {
		return nil
	}
	return r.Incoming.Native()
}

// HeaderValue returns the first value of the named header field, or "".
func (r *Request) HeaderValue(name string) string {
	if vs := r.Header(name); len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// ClientIP returns the client's address: the socket peer's, or, when the
// peer is a trusted proxy (see ClientIP), the rightmost address of
// ClientIP.Header that is not listed in ClientIP.TrustedProxies. Ports
// and zones are dropped and IPv4-mapped IPv6 addresses become IPv4. The
// error wraps slidelog.ErrInvalidKey when the socket address is not an IP
// address, and for a peer on a Unix socket, whose address is a path its
// client chose (unless ClientIP.UnixSocketProxy, and the header names
// the client).
func (r *Request) ClientIP() (netip.Addr, error) {
	if r == nil {
		return netip.Addr{}, errNoClientAddr
	}
	if r.ip == nil {
		r.ip = defaultIP
	}
	if !r.addrOK && r.err == nil {
		// The network is needed without UnixSocketProxy too: a
		// Unix-socket peer's address is a path its client chose, and
		// may read as an IP address.
		nw := ""
		if r.Incoming != nil {
			nw = network(r.Incoming)
		}
		r.addr, r.err = r.ip.ClientIP(r.RemoteAddr(), nw, r.Header)
		if r.err != nil {
			r.err = errNoClientAddr
		}
		r.addrOK = r.err == nil
	}
	return r.addr, r.err
}

// ClientPrefix returns the group the client is limited as: its IPv4
// address, or the prefix of its IPv6 address (/64 unless
// ClientIP.IPv6Prefix); or, when that prefix's network already has as
// many active prefixes with identities of their own as ClientIP allows,
// the network (such as the /48), or a wider prefix (see ClientIP).
func (r *Request) ClientPrefix() (netip.Prefix, error) {
	a, err := r.ClientIP()
	if err != nil {
		return netip.Prefix{}, err
	}
	return r.ip.networks.group(a, clientip.Prefix(a, r.ip.ipv6Prefix)), nil
}
