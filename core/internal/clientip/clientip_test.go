package clientip_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/slidelog/slidelog/core/internal/clientip"
)

func TestParseIP(t *testing.T) {
	tests := []struct {
		give string
		want string
	}{
		{"192.0.2.1", "192.0.2.1"},
		{"192.0.2.1:8080", "192.0.2.1"},
		{" 192.0.2.1 ", "192.0.2.1"},
		{"::ffff:192.0.2.1", "192.0.2.1"},
		{"[::ffff:192.0.2.1]:443", "192.0.2.1"},
		{"2001:db8::1", "2001:db8::1"},
		{"[2001:db8::1]", "2001:db8::1"},
		{"[2001:db8::1]:443", "2001:db8::1"},
		{"fe80::1%eth0", "fe80::1"},
		{"[fe80::1%eth0]:80", "fe80::1"},
		{"2001:DB8:0:0:0:0:0:1", "2001:db8::1"},
	}
	for _, tt := range tests {
		got, err := clientip.ParseIP(tt.give)
		if err != nil || got.String() != tt.want {
			t.Errorf("ParseIP(%q): got %v, %v, want %s", tt.give, got, err, tt.want)
		}
	}
	for _, give := range []string{"", "@", "unknown", "_hidden", "192.0.2", "example.com:80", "[::1", "1.2.3.4.5", strings.Repeat("1", 100)} {
		if got, err := clientip.ParseIP(give); err == nil {
			t.Errorf("ParseIP(%q): got %v, want an error", give, got)
		}
	}
}

func TestPrefix(t *testing.T) {
	tests := []struct {
		give string
		bits int
		want string
	}{
		{"192.0.2.1", 64, "192.0.2.1/32"},
		{"2001:db8:1:2:3:4:5:6", 64, "2001:db8:1:2::/64"},
		{"2001:db8:1:2:3:4:5:6", 48, "2001:db8:1::/48"},
		{"2001:db8:1:2:3:4:5:6", 128, "2001:db8:1:2:3:4:5:6/128"},
	}
	for _, tt := range tests {
		if got := clientip.Prefix(netip.MustParseAddr(tt.give), tt.bits); got.String() != tt.want {
			t.Errorf("Prefix(%s, %d): got %s, want %s", tt.give, tt.bits, got, tt.want)
		}
	}
}

func TestParseTrustedProxies(t *testing.T) {
	got, err := clientip.ParseTrustedProxies("10.0.0.0/8", "192.0.2.7", "2001:db8::/32", "::ffff:172.16.0.0/108", "10.1.2.3/8")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.0/8", "192.0.2.7/32", "2001:db8::/32", "172.16.0.0/12", "10.0.0.0/8"}
	for i, p := range got {
		if p.String() != want[i] {
			t.Errorf("prefix %d: got %s, want %s", i, p, want[i])
		}
	}
	for _, give := range []string{"10.0.0.0/33", "example.com", "", "fe80::1%eth0", "::ffff:0.0.0.0/80",
		"0.0.0.0/0", "::/0", "::ffff:0:0/96", "192.0.2.1/0"} {
		if _, err := clientip.ParseTrustedProxies(give); err == nil {
			t.Errorf("ParseTrustedProxies(%q): got no error", give)
		}
	}
}

// TestParseTrustedProxiesUnions: prefixes that together hold every IPv4
// or every IPv6 address are refused like one that holds them all; a
// list that leaves any address out is not.
func TestParseTrustedProxiesUnions(t *testing.T) {
	for _, give := range [][]string{
		{"0.0.0.0/1", "128.0.0.0/1"},
		{"128.0.0.0/1", "10.0.0.0/8", "0.0.0.0/1"},
		{"::ffff:0.0.0.0/97", "::ffff:128.0.0.0/97"},
		{"0.0.0.0/1", "::ffff:128.0.0.0/97"},
		{"0.0.0.0/2", "64.0.0.0/2", "128.0.0.0/2", "192.0.0.0/2"},
		{"0.0.0.0/1", "0.0.0.0/2", "64.0.0.0/3", "96.0.0.0/3", "128.0.0.0/1"},
		{"::/1", "8000::/1"},
		{"8000::/1", "::/2", "4000::/2", "2001:db8::/32"},
		{"255.255.255.255", "0.0.0.0/1", "128.0.0.0/2", "192.0.0.0/3", "224.0.0.0/4", "240.0.0.0/5", "248.0.0.0/6", "252.0.0.0/7", "254.0.0.0/8",
			"255.0.0.0/9", "255.128.0.0/10", "255.192.0.0/11", "255.224.0.0/12", "255.240.0.0/13", "255.248.0.0/14", "255.252.0.0/15", "255.254.0.0/16",
			"255.255.0.0/17", "255.255.128.0/18", "255.255.192.0/19", "255.255.224.0/20", "255.255.240.0/21", "255.255.248.0/22", "255.255.252.0/23", "255.255.254.0/24",
			"255.255.255.0/25", "255.255.255.128/26", "255.255.255.192/27", "255.255.255.224/28", "255.255.255.240/29", "255.255.255.248/30", "255.255.255.252/31", "255.255.255.254/32"},
	} {
		_, err := clientip.ParseTrustedProxies(give...)
		if err == nil || !strings.Contains(err.Error(), "every") || !strings.Contains(err.Error(), give[0]) {
			t.Errorf("ParseTrustedProxies(%q): got %v, want an error naming the prefixes", give, err)
		}
	}
	for _, give := range [][]string{
		{"0.0.0.0/1", "128.0.0.0/2"},
		{"0.0.0.0/1", "128.0.0.0/2", "192.0.0.0/3", "::/1"},
		{"128.0.0.0/1", "::/1"},
		{"0.0.0.0/1", "8000::/1"},
		{"::/1", "8000::/2", "c000::/3"},
		{"0.0.0.0/2", "128.0.0.0/1", "64.0.0.0/3", "96.0.0.0/4", "112.0.0.0/5"},
		{"0.0.0.0/1", "128.0.0.0/2", "192.0.0.0/3", "224.0.0.0/4", "240.0.0.0/5", "248.0.0.0/6", "252.0.0.0/7", "254.0.0.0/8", "255.0.0.0/9"},
	} {
		if _, err := clientip.ParseTrustedProxies(give...); err != nil {
			t.Errorf("ParseTrustedProxies(%q): %v, want no error", give, err)
		}
	}
	// Every IPv6 address but the IPv4-mapped ones, which are IPv4 to the
	// package, is every IPv6 client: the siblings of ::ffff:0:0/96's
	// ancestors. Without one of them, an address is left out.
	mapped := netip.MustParsePrefix("::ffff:0:0/96").Addr().As16()
	var siblings []string
	for i := range 96 {
		b := mapped
		b[i/8] ^= 0x80 >> (i % 8)
		siblings = append(siblings, netip.PrefixFrom(netip.AddrFrom16(b), i+1).Masked().String())
	}
	if _, err := clientip.ParseTrustedProxies(siblings...); err == nil {
		t.Errorf("ParseTrustedProxies(every IPv6 prefix but ::ffff:0:0/96): got no error")
	}
	if _, err := clientip.ParseTrustedProxies(siblings[:95]...); err != nil {
		t.Errorf("ParseTrustedProxies(every IPv6 prefix but ::fffe:0:0/96 and ::ffff:0:0/96): %v, want no error", err)
	}
}

// TestClientIPTrustAll: trust-all trusts the socket peer, never an address
// the header holds: the entry the peer appended (the rightmost, across
// several fields) is the client, whatever the client wrote before it.
func TestClientIPTrustAll(t *testing.T) {
	listed, err := clientip.ParseTrustedProxies("10.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		cfg    clientip.Config
		remote string
		give   []string // the header's fields, in order
		want   string
	}{
		{"appended entry", clientip.Config{Header: "X-Forwarded-For", TrustAll: true}, "192.0.2.1:1", []string{"198.51.100.9, 203.0.113.5"}, "203.0.113.5"},
		{"appended field", clientip.Config{Header: "X-Forwarded-For", TrustAll: true}, "192.0.2.1:1", []string{"198.51.100.9, 198.51.100.10", "203.0.113.5"}, "203.0.113.5"},
		{"spoofed trusted-looking entry", clientip.Config{Header: "X-Forwarded-For", TrustAll: true}, "192.0.2.1:1", []string{"10.9.9.9, 127.0.0.2"}, "127.0.0.2"},
		{"forwarded", clientip.Config{Header: "Forwarded", Forwarded: true, TrustAll: true}, "192.0.2.1:1", []string{"for=198.51.100.9", "for=203.0.113.5"}, "203.0.113.5"},
		{"listed inner hops skipped", clientip.Config{Header: "X-Forwarded-For", TrustAll: true, Trusted: listed}, "192.0.2.1:1", []string{"198.51.100.9, 203.0.113.5, 10.0.0.7"}, "203.0.113.5"},
		{"no header", clientip.Config{Header: "X-Forwarded-For", TrustAll: true}, "192.0.2.1:1", nil, "192.0.2.1"},
		{"unix socket proxy", clientip.Config{Header: "X-Forwarded-For", SocketProxy: true}, "unix:@", []string{"198.51.100.9, 203.0.113.5"}, "203.0.113.5"},
		{"unix socket proxy, empty address", clientip.Config{Header: "X-Real-IP", SocketProxy: true}, "unix:", []string{"203.0.113.6"}, "203.0.113.6"},
		{"socket proxy option, tcp peer not trusted", clientip.Config{Header: "X-Real-IP", SocketProxy: true}, "tcp:192.0.2.1:1", []string{"203.0.113.6"}, "192.0.2.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			network, remote, ok := strings.Cut(tt.remote, ":")
			if !ok || (network != "unix" && network != "tcp") {
				network, remote = "tcp", tt.remote
			}
			got, err := tt.cfg.ClientIP(remote, network, func(string) []string { return tt.give })
			if err != nil || got.String() != tt.want {
				t.Errorf("ClientIP: got %v, %v, want %s", got, err, tt.want)
			}
		})
	}
	for _, give := range [][]string{nil, {"garbage"}, {""}} {
		cfg := clientip.Config{Header: "X-Forwarded-For", SocketProxy: true}
		if got, err := cfg.ClientIP("@", "unix", func(string) []string { return give }); err == nil {
			t.Errorf("unix peer, header %q: got %v, want ErrNoAddr", give, got)
		}
	}
	cfg := clientip.Config{Header: "X-Forwarded-For"}
	if got, err := cfg.ClientIP("@", "unix", func(string) []string { return []string{"203.0.113.5"} }); err == nil {
		t.Errorf("unix peer without SocketProxy: got %v, want ErrNoAddr", got)
	}
	// A peer that has no IP address but is not on a Unix socket (a
	// net.Pipe, an in-memory listener, a call without a peer) is never the
	// socket proxy.
	cfg = clientip.Config{Header: "X-Forwarded-For", SocketProxy: true}
	for _, give := range []struct{ remote, network string }{{"", ""}, {"pipe", "pipe"}, {"@", ""}, {"bufconn", "bufconn"}, {"", "tcp"}, {"@", "udp"}} {
		if got, err := cfg.ClientIP(give.remote, give.network, func(string) []string { return []string{"203.0.113.5"} }); err == nil {
			t.Errorf("peer %q on %q with SocketProxy: got %v, want ErrNoAddr", give.remote, give.network, got)
		}
	}
}
