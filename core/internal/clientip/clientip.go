// Package clientip finds the client address of an HTTP request: the
// socket peer, or, only when the peer is a trusted proxy, the rightmost
// address of the one forwarding header the operator named that is not a
// trusted proxy. httplimit builds its client-IP options on it.
package clientip

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
)

// Config says how to find a request's client address. Its zero value
// believes no header: the client is always the socket peer.
type Config struct {
	// Trusted are the proxies whose Header is believed.
	Trusted []netip.Prefix
	// Header is the forwarding header the trusted proxies write; "" reads
	// none.
	Header string
	// Forwarded says Header is RFC 7239 Forwarded: its for= parameters are
	// read.
	Forwarded bool
	// TrustAll makes every socket peer a trusted proxy. It never makes an
	// address read from Header trusted: the walk stops at the first entry
	// that is not in Trusted, so from an appending header the entry the
	// peer appended is the client.
	TrustAll bool
	// SocketProxy makes a peer on a Unix socket (network "unix") a
	// trusted proxy: the client is then read from Header, and a request
	// without an address there fails with ErrNoAddr. A peer on any other
	// network whose address is not an IP address (a net.Pipe, an
	// in-memory listener, no peer at all) is not trusted for it.
	SocketProxy bool
}

// ErrNoAddr reports a request whose socket address is not an IP address
// (for example a Unix socket) and no trusted proxy named one.
var ErrNoAddr = errors.New("no client IP address")

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
	// An IPv4 address with a port, the usual socket address, has one
	// colon: its host is parsed first, so that no failed parse (whose
	// error allocates) is tried on every request.
	if i := strings.IndexByte(s, ':'); i > 0 && strings.IndexByte(s[i+1:], ':') < 0 {
		if a, err := netip.ParseAddr(s[:i]); err == nil {
			return a.WithZone("").Unmap(), nil
		}
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

// Prefix returns the group a client address is limited as: the IPv4
// address itself (a /32), or the IPv6 address's /ipv6Bits prefix. The
// address should come from ParseIP.
func Prefix(a netip.Addr, ipv6Bits int) netip.Prefix {
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
// IPv4-mapped IPv6 prefixes are converted to IPv4. A prefix that holds
// every address ("0.0.0.0/0", "::/0", "::ffff:0:0/96") is refused, and so
// are prefixes that together hold every IPv4 address ("0.0.0.0/1" and
// "128.0.0.0/1") or every IPv6 address: they would let any client write
// its own identity (Config.TrustAll opts in to that explicitly).
func ParseTrustedProxies(cidrs ...string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(cidrs))
	var v4, v6 []string // the prefixes as given, by family
	for _, s := range cidrs {
		s = strings.TrimSpace(s)
		var p netip.Prefix
		if strings.Contains(s, "/") {
			var err error
			p, err = netip.ParsePrefix(s)
			if err != nil {
				return nil, fmt.Errorf("trusted proxy %q: not a CIDR", s)
			}
			if a := p.Addr(); a.Is4In6() {
				if p.Bits() < 96 {
					return nil, fmt.Errorf("trusted proxy %q: IPv4-mapped prefix shorter than /96", s)
				}
				p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
			}
			if p.Bits() == 0 {
				return nil, fmt.Errorf("trusted proxy %q holds every address, so any client could choose its identity; use AllPeersTrusted if every peer really is your proxy", s)
			}
		} else {
			a, err := netip.ParseAddr(s)
			if err != nil || a.Zone() != "" {
				return nil, fmt.Errorf("trusted proxy %q: not an IP address or CIDR", s)
			}
			a = a.Unmap()
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
		if p.Addr().Is4() {
			v4 = append(v4, s)
		} else {
			v6 = append(v6, s)
		}
	}
	if coversAll(out, true) {
		return nil, fmt.Errorf("trusted proxies %q together hold every IPv4 address, so any client could choose its identity; use AllPeersTrusted if every peer really is your proxy", v4)
	}
	if coversAll(out, false) {
		return nil, fmt.Errorf("trusted proxies %q together hold every IPv6 address, so any client could choose its identity; use AllPeersTrusted if every peer really is your proxy", v6)
	}
	return out, nil
}

// coversAll reports whether the masked prefixes of ps of one family (IPv4
// when v4) together hold every address of it. IPv6 counts
// ::ffff:0:0/96 as held: ParseIP makes those addresses IPv4, so no
// client is ever an IPv6 address in it.
func coversAll(ps []netip.Prefix, v4 bool) bool {
	var fam []netip.Prefix
	for _, p := range ps {
		if p.Addr().Is4() == v4 {
			fam = append(fam, p)
		}
	}
	if len(fam) == 0 {
		return false
	}
	next := netip.IPv4Unspecified() // the first address not yet held
	if !v4 {
		next = netip.IPv6Unspecified()
		fam = append(fam, netip.PrefixFrom(netip.AddrFrom16([16]byte{10: 0xff, 11: 0xff}), 96))
	}
	slices.SortFunc(fam, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	for _, p := range fam {
		if next.Less(p.Addr()) {
			return false // no prefix holds next
		}
		if last := lastAddr(p); !last.Less(next) {
			if next = last.Next(); !next.IsValid() {
				return true // past the family's last address
			}
		}
	}
	return false
}

// lastAddr returns the last address of the masked prefix p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// isTrusted reports whether a, read from the header, is a listed proxy.
// TrustAll does not count here: it is about the socket peer only.
func (c *Config) isTrusted(a netip.Addr) bool {
	for _, p := range c.Trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// maxChain bounds how many forwarding entries are read; more hops than
// this are not real proxies.
const maxChain = 64

// ClientIP returns the client address of a request from its socket
// address remoteAddr, the network of its connection (as net.Addr's
// Network: "tcp", "unix"; "" when unknown) and its header values (header
// returns every value of a field, in order, whatever the case of the
// field's name). It fails with ErrNoAddr when remoteAddr is not an IP
// address, and for every peer on a Unix socket, whose address is the
// path its client chose to bind, never an IP address (unless
// SocketProxy says such a peer is the proxy, and the header names the
// client).
//
// The socket peer is the client unless it is a trusted proxy (listed in
// Trusted, or any peer with TrustAll). Then the one header the operator
// named is read, and no other: its entries (comma-separated, over all its
// fields in order; the for= parameters of a Forwarded header) are walked
// from the right, and the first address that is not listed in Trusted is
// the client: with TrustAll alone, the rightmost entry, the one the peer
// appended. When every address read is listed, the last one read is the
// client. A malformed entry stops the walk: the last address read (a
// trusted proxy's) is used, so a client can never choose its key by
// writing garbage.
//
// The walk is one pass from the right that reads at most maxChain
// entries: its cost is the length of the entries it reads, never more,
// however long the header.
func (c *Config) ClientIP(remoteAddr, network string, header func(string) []string) (netip.Addr, error) {
	socket := network == "unix" && c.SocketProxy && c.Header != ""
	if network == "unix" && !socket {
		// A Unix-socket peer's address is a path its client chose
		// ("198.51.100.7", "127.0.0.1" a trusted proxy's): never read
		// it as an IP address.
		return netip.Addr{}, ErrNoAddr
	}
	peer, err := netip.Addr{}, error(nil)
	if !socket {
		if peer, err = ParseIP(remoteAddr); err != nil {
			return netip.Addr{}, ErrNoAddr
		}
	}
	if c.Header == "" || (!socket && !c.TrustAll && !c.isTrusted(peer)) {
		return peer, nil
	}
	client, found := peer, !socket
	read := 0
	fields := header(c.Header)
	for i := len(fields) - 1; i >= 0; i-- {
		rest := fields[i]
		for {
			if read == maxChain {
				return c.found(client, found)
			}
			read++
			elem := rest
			cut := strings.LastIndexByte(rest, ',')
			if cut >= 0 {
				elem, rest = rest[cut+1:], rest[:cut]
			}
			if c.Forwarded {
				elem = forwardedFor(elem)
			}
			a, err := ParseIP(elem)
			if err != nil {
				return c.found(client, found)
			}
			client, found = a, true
			if !c.isTrusted(a) {
				return client, nil
			}
			if cut < 0 {
				break
			}
		}
	}
	return c.found(client, found)
}

// found returns client when an address was found, and ErrNoAddr when not
// (a Unix-socket peer whose header named none).
func (c *Config) found(client netip.Addr, ok bool) (netip.Addr, error) {
	if !ok {
		return netip.Addr{}, ErrNoAddr
	}
	return client, nil
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
