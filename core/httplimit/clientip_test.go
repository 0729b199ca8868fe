package httplimit_test

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/memstore"
)

// source is an Incoming for tests.
type source struct {
	method, path, route, remote string
	header                      http.Header
	values                      map[any]any
}

func (s *source) Context() context.Context    { return context.Background() }
func (s *source) Method() string              { return s.method }
func (s *source) Path() string                { return s.path }
func (s *source) Route() string               { return s.route }
func (s *source) Header(name string) []string { return s.header.Values(name) }
func (s *source) RemoteAddr() string          { return s.remote }
func (s *source) Value(key any) any           { return s.values[key] }
func (s *source) Native() any                 { return s }

func newSource(remote string, header ...string) *source {
	s := &source{method: http.MethodGet, path: "/", remote: remote, header: http.Header{}, values: map[any]any{}}
	for i := 0; i+1 < len(header); i += 2 {
		s.header.Add(header[i], header[i+1])
	}
	return s
}

func TestClientIPWithoutTrustedProxies(t *testing.T) {
	r := httplimit.NewRequest(newSource("198.51.100.7:4000",
		"X-Forwarded-For", "203.0.113.1", "X-Real-IP", "203.0.113.2", "Forwarded", "for=203.0.113.3"))
	a, err := r.ClientIP()
	if err != nil || a.String() != "198.51.100.7" {
		t.Errorf("ClientIP: got %v, %v, want the socket address 198.51.100.7", a, err)
	}
	if _, err := httplimit.NewRequest(newSource("@")).ClientIP(); !errors.Is(err, slidelog.ErrInvalidKey) {
		t.Errorf("ClientIP of a Unix socket: got %v, want ErrInvalidKey", err)
	}
}

// FuzzClientIP: whatever forwarding headers say, a client that is not a
// trusted proxy is keyed by its socket address, and a trusted proxy's
// request by a normalised address, never by garbage.
func FuzzClientIP(f *testing.F) {
	f.Add("203.0.113.1, 10.0.0.1", "for=203.0.113.3", "203.0.113.2")
	f.Add("garbage", `for="[2001:db8::1]:80"`, "")
	f.Add(strings.Repeat("1.2.3.4,", 100), "for=unknown", "::ffff:10.0.0.9")
	store := memstore.New()
	f.Cleanup(func() { _ = store.Close() })
	l, err := slidelog.New(store, slidelog.PerSecond(10))
	if err != nil {
		f.Fatal(err)
	}
	var got netip.Addr
	var gotErr error
	h, err := httplimit.New(l, httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: []string{"10.0.0.0/8"}, Header: "X-Forwarded-For"}),
		httplimit.WithKeyFunc(func(r *httplimit.Request) (string, error) {
			got, gotErr = r.ClientIP()
			return "", httplimit.ErrNoKey // stop before the store
		}))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, xff, fwd, real string) {
		h.Check(newSource("198.51.100.7:1", "X-Forwarded-For", xff, "Forwarded", fwd, "X-Real-IP", real))
		if gotErr != nil || got.String() != "198.51.100.7" {
			t.Fatalf("untrusted peer: got %v, %v, want 198.51.100.7", got, gotErr)
		}
		h.Check(newSource("10.0.0.1:1", "X-Forwarded-For", xff, "Forwarded", fwd, "X-Real-IP", real))
		if gotErr != nil || !got.IsValid() || got.Zone() != "" || got.Is4In6() {
			t.Fatalf("trusted peer: got %v, %v, want a normalised address", got, gotErr)
		}
	})
}

// BenchmarkClientIPMiBOfCommas: a trusted proxy forwards a 1 MiB
// X-Forwarded-For of commas. The walk reads from the right and stops at
// the first entry that is not an address, so the cost is that of one
// entry, not of the header (before the one-pass walk: 25 ms per request,
// copying the chain for every comma).
func BenchmarkClientIPMiBOfCommas(b *testing.B) {
	store := memstore.New()
	b.Cleanup(func() { _ = store.Close() })
	l, err := slidelog.New(store, slidelog.PerSecond(10))
	if err != nil {
		b.Fatal(err)
	}
	h, err := httplimit.New(l, httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: []string{"10.0.0.0/8"}, Header: "X-Forwarded-For"}),
		httplimit.WithKeyFunc(func(r *httplimit.Request) (string, error) {
			_, _ = r.ClientIP()
			return "", httplimit.ErrNoKey // stop before the store
		}))
	if err != nil {
		b.Fatal(err)
	}
	for _, tt := range []struct{ name, chain string }{
		{"commas", strings.Repeat(",", 1<<20)},
		{"trusted-hops", strings.Repeat("10.0.0.1,", 1<<17) + "10.0.0.1"},
	} {
		src := newSource("10.0.0.1:1", "X-Forwarded-For", tt.chain)
		b.Run(tt.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				h.Check(src)
			}
		})
	}
}

// The client is read from the one header the operator named: the limiter
// asks for no other forwarding header.
func TestClientIPReadsOnlyTheNamedHeader(t *testing.T) {
	for _, name := range []string{"X-Real-IP", "Forwarded", "CF-Connecting-IP", "x-forwarded-for"} {
		store := memstore.New()
		l, err := slidelog.New(store, slidelog.PerSecond(10))
		if err != nil {
			t.Fatal(err)
		}
		var asked []string
		var got netip.Addr
		h, err := httplimit.New(l, httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: []string{"10.0.0.0/8"}, Header: name}),
			httplimit.WithKeyFunc(func(r *httplimit.Request) (string, error) {
				got, _ = r.ClientIP()
				return "", httplimit.ErrNoKey
			}))
		if err != nil {
			t.Fatal(err)
		}
		src := &askedSource{source: newSource("10.0.0.1:1",
			"X-Forwarded-For", "198.51.100.1", "X-Real-IP", "198.51.100.2", "Forwarded", "for=198.51.100.3",
			"True-Client-IP", "198.51.100.4", "CF-Connecting-IP", "198.51.100.5"), asked: &asked}
		h.Check(src)
		if len(asked) != 1 || asked[0] != name {
			t.Errorf("%s: headers read: got %q, want only %q", name, asked, name)
		}
		if !got.IsValid() || got.String() == "10.0.0.1" {
			t.Errorf("%s: client: got %v, want the header's address", name, got)
		}
		_ = store.Close()
	}
}

type askedSource struct {
	*source
	asked *[]string
}

func (s *askedSource) Header(name string) []string {
	*s.asked = append(*s.asked, name)
	return s.source.Header(name)
}

// ClientIP.AllPeersTrusted believes the named header from any peer, and still
// only that header.
func TestAllPeersTrusted(t *testing.T) {
	store := memstore.New()
	t.Cleanup(func() { _ = store.Close() })
	l, err := slidelog.New(store, slidelog.PerSecond(10))
	if err != nil {
		t.Fatal(err)
	}
	var got netip.Addr
	h, err := httplimit.New(l, httplimit.WithClientIP(httplimit.ClientIP{AllPeersTrusted: true, Header: "X-Real-IP"}),
		httplimit.WithKeyFunc(func(r *httplimit.Request) (string, error) {
			got, _ = r.ClientIP()
			return "", httplimit.ErrNoKey
		}))
	if err != nil {
		t.Fatal(err)
	}
	h.Check(newSource("198.51.100.7:1", "X-Real-IP", "203.0.113.4", "X-Forwarded-For", "192.0.2.66"))
	if got.String() != "203.0.113.4" {
		t.Errorf("client: got %v, want 203.0.113.4 from X-Real-IP", got)
	}
}

// TestClientIPErrors: ClientIP is checked as one, and each refusal is an
// ErrInvalidOption whose message names the field to fix.
func TestClientIPErrors(t *testing.T) {
	l, err := slidelog.New(memstore.New(), slidelog.PerSecond(10))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	tests := []struct {
		give httplimit.ClientIP
		want string
	}{
		{httplimit.ClientIP{TrustedProxies: []string{"10.0.0.0/40"}, Header: "X-Real-IP"}, "TrustedProxies"},
		{httplimit.ClientIP{TrustedProxies: []string{"::/0"}, Header: "X-Real-IP"}, "AllPeersTrusted"},
		{httplimit.ClientIP{TrustedProxies: []string{"10.0.0.0/8"}}, "no Header"},
		{httplimit.ClientIP{AllPeersTrusted: true}, "no Header"},
		{httplimit.ClientIP{UnixSocketProxy: true}, "no Header"},
		{httplimit.ClientIP{Header: "X-Real-IP"}, "set TrustedProxies"},
		{httplimit.ClientIP{TrustedProxies: []string{"10.0.0.0/8"}, Header: "X Real IP"}, "Header"},
		{httplimit.ClientIP{IPv6Prefix: 129}, "IPv6Prefix"},
		{httplimit.ClientIP{IPv6Prefix: 48, IPv6Network: 56}, "IPv6Network"},
		{httplimit.ClientIP{IPv6PrefixesPerNetwork: 5000}, "IPv6PrefixesPerNetwork"},
		{httplimit.ClientIP{NoIPv6Aggregation: true, IPv6Network: 40}, "NoIPv6Aggregation"},
	}
	for _, tt := range tests {
		_, err := httplimit.New(l, httplimit.WithClientIP(tt.give))
		if !errors.Is(err, slidelog.ErrInvalidOption) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: got %v, want ErrInvalidOption naming %q", tt.give, err, tt.want)
		}
	}
	for _, give := range []httplimit.ClientIP{
		{},
		{TrustedProxies: []string{"10.0.0.0/8", "2001:db8::1"}, Header: "x-forwarded-for", IPv6Prefix: 56, IPv6Network: 40, IPv6PrefixesPerNetwork: 4096},
		{AllPeersTrusted: true, UnixSocketProxy: true, Header: "Forwarded", NoIPv6Aggregation: true},
		{IPv6Prefix: 48}, // the default network /48 is then aggregated per /32, as before
	} {
		if _, err := httplimit.New(l, httplimit.WithClientIP(give)); err != nil {
			t.Errorf("%+v: got %v, want no error", give, err)
		}
	}
}

// TestTrustedProxiesTogetherEveryAddress: trusted proxies that together
// hold every IPv4 or every IPv6 address are refused as one that holds them
// all would be, naming the prefixes: with them, a client's own
// X-Forwarded-For would choose its budget.
func TestTrustedProxiesTogetherEveryAddress(t *testing.T) {
	l, err := slidelog.New(memstore.New(), slidelog.PerSecond(10))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	for _, give := range [][]string{
		{"0.0.0.0/1", "128.0.0.0/1"},
		{"::ffff:0.0.0.0/97", "::ffff:128.0.0.0/97"},
		{"::/1", "8000::/1"},
	} {
		_, err := httplimit.New(l, httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: give, Header: "X-Forwarded-For"}))
		if !errors.Is(err, slidelog.ErrInvalidOption) || !strings.Contains(err.Error(), "TrustedProxies") ||
			!strings.Contains(err.Error(), give[0]) || !strings.Contains(err.Error(), give[1]) {
			t.Errorf("%q: got %v, want ErrInvalidOption naming TrustedProxies and the prefixes", give, err)
		}
	}
	h, err := httplimit.New(l, httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: []string{"0.0.0.0/1", "128.0.0.0/2"}, Header: "X-Forwarded-For"}))
	if err != nil {
		t.Fatalf("0.0.0.0/1 and 128.0.0.0/2: %v, want no error", err)
	}
	// A peer outside them is the client, whatever it writes.
	d := h.Check(newSource("192.0.2.1:1", "X-Forwarded-For", "198.51.100.7"))
	if got, err := d.Request.ClientIP(); err != nil || got.String() != "192.0.2.1" {
		t.Errorf("untrusted peer: client %v, %v, want 192.0.2.1", got, err)
	}
}
