package slidelog

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// DefaultIPv6Prefix is the prefix length by which client IPv6 addresses
// are grouped unless WithIPv6Prefix says otherwise: one host usually owns
// a whole /64, so keying by single IPv6 addresses would let it rotate
// through 2^64 identities.
const DefaultIPv6Prefix = 64

// clientIPConfig finds a request's client address: the socket peer, or,
// only when the peer is a trusted proxy, the rightmost address in the
// forwarding headers that is not a trusted proxy.
type clientIPConfig struct {
	trusted    []netip.Prefix
	ipv6Prefix int
}

// ParseIP parses an address as found in a socket address or a forwarding
// header and normalises it: a port ("192.0.2.1:8080", "[2001:db8::1]:443")
// and an IPv6 zone ("fe80::1%eth0") are dropped, brackets and surrounding
// spaces removed, and an IPv4-mapped IPv6 address ("::ffff:192.0.2.1")
// becomes the IPv4 address. It fails for anything that is not an address.
func ParseIP(s string) (netip.Addr, error) {
	s = strings.TrimSpace(s)
	if len(s) > 64 {
		return netip.Addr{}, errors.New("address too long")
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return a.WithZone("").Unmap(), nil
	}
	if host, _, err := net.SplitHostPort(s); err == nil {
		s = host
	} else if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		s = s[1 : len(s)-1]
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("not an IP address: %q", s)
	}
	return a.WithZone("").Unmap(), nil
}

// IPPrefix returns the group a client address is limited as: the IPv4
// address itself (a /32), or the IPv6 address's /bits prefix. The address
// should come from ParseIP.
func IPPrefix(a netip.Addr, ipv6Bits int) netip.Prefix {
	bits := 32
	if a.Is6() {
		bits = ipv6Bits
	}
	p, err := a.Prefix(bits)
	if err != nil {
		return netip.PrefixFrom(a, a.BitLen())
	}
	return p
}

// ParseTrustedProxies parses proxy addresses in CIDR notation
// ("10.0.0.0/8", "2001:db8::/32") or as single addresses ("192.0.2.7").
// IPv4-mapped IPv6 prefixes are converted to IPv4. The error wraps
// ErrInvalidOption.
func ParseTrustedProxies(cidrs ...string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(cidrs))
	for _, s := range cidrs {
		s = strings.TrimSpace(s)
		var p netip.Prefix
		if strings.Contains(s, "/") {
			var err error
			p, err = netip.ParsePrefix(s)
			if err != nil {
				return nil, fmt.Errorf("%w: trusted proxy %q: not a CIDR", ErrInvalidOption, s)
			}
			if a := p.Addr(); a.Is4In6() {
				if p.Bits() < 96 {
					return nil, fmt.Errorf("%w: trusted proxy %q: IPv4-mapped prefix shorter than /96", ErrInvalidOption, s)
				}
				p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
			}
		} else {
			a, err := netip.ParseAddr(s)
			if err != nil || a.Zone() != "" {
				return nil, fmt.Errorf("%w: trusted proxy %q: not an IP address or CIDR", ErrInvalidOption, s)
			}
			a = a.Unmap()
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

func (c *clientIPConfig) isTrusted(a netip.Addr) bool {
	for _, p := range c.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// errNoClientAddr reports a request whose socket address is not an IP
// address (for example a Unix socket) and no trusted proxy named one.
var errNoClientAddr = fmt.Errorf("%w: no client IP address", ErrInvalidKey)

// clientIP returns the client address of a request from its socket
// address remoteAddr and its header values (header returns every value of
// a field, in order).
//
// The socket peer is the client unless it is a trusted proxy. Then the
// forwarding chain is read from X-Forwarded-For (all fields, in order), or,
// when it is absent, from the for= parameters of Forwarded, or, when both
// are absent, from X-Real-IP; walking it from the right, the first address
// that is not a trusted proxy is the client. When every address is
// trusted, the leftmost is the client. A malformed entry stops the walk:
// the last address read (a trusted proxy's) is used, so a client can
// never choose its key by writing garbage.
func (c *clientIPConfig) clientIP(remoteAddr string, header func(string) []string) (netip.Addr, error) {
	peer, err := ParseIP(remoteAddr)
	if err != nil {
		return netip.Addr{}, errNoClientAddr
	}
	if len(c.trusted) == 0 || !c.isTrusted(peer) {
		return peer, nil
	}
	chain := forwardingChain(header)
	client := peer
	for i := len(chain) - 1; i >= 0; i-- {
		a, err := ParseIP(chain[i])
		if err != nil {
			break
		}
		client = a
		if !c.isTrusted(a) {
			break
		}
	}
	return client, nil
}

// maxChain bounds how many forwarding entries are read; more hops than
// this are not real proxies.
const maxChain = 64

// forwardingChain returns the addresses of the forwarding headers, the
// nearest proxy's last. Only the last maxChain entries are kept.
func forwardingChain(header func(string) []string) []string {
	var chain []string
	if vs := header("X-Forwarded-For"); len(vs) > 0 {
		for _, v := range vs {
			for e := range strings.SplitSeq(v, ",") {
				chain = appendBounded(chain, strings.TrimSpace(e))
			}
		}
		return chain
	}
	if vs := header("Forwarded"); len(vs) > 0 {
		for _, v := range vs {
			for elem := range strings.SplitSeq(v, ",") {
				chain = appendBounded(chain, forwardedFor(elem))
			}
		}
		return chain
	}
	if vs := header("X-Real-IP"); len(vs) > 0 {
		return []string{strings.TrimSpace(vs[len(vs)-1])}
	}
	return nil
}

func appendBounded(chain []string, s string) []string {
	if len(chain) == maxChain {
		copy(chain, chain[1:])
		chain = chain[:maxChain-1]
	}
	return append(chain, s)
}

// forwardedFor returns the for= value of one RFC 7239 forwarded-element,
// unquoted, or "" (which is not an address) when it has none.
func forwardedFor(elem string) string {
	for pair := range strings.SplitSeq(elem, ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "for") {
			continue
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
			v = v[1 : len(v)-1]
		}
		return v
	}
	return ""
}
