package httplimit_test

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/memstore"
)

// The client-IP options from before ClientIP still work, gathered into
// one ClientIP and checked as one: each set keys requests as the
// WithClientIP it stands for, and what WithClientIP refuses they refuse.
func TestDeprecatedClientIPOptions(t *testing.T) {
	store := memstore.New()
	t.Cleanup(func() { _ = store.Close() })
	l, err := slidelog.New(store, slidelog.PerSecond(10))
	if err != nil {
		t.Fatal(err)
	}
	// clients returns the client address and key of each request, keyed
	// by the engine built from opts.
	type seen struct {
		addr netip.Addr
		key  string
		err  error
	}
	clients := func(t *testing.T, opts ...httplimit.Option) []seen {
		t.Helper()
		var got []seen
		opts = append(opts, httplimit.WithKeyFunc(func(r *httplimit.Request) (string, error) {
			a, err := r.ClientIP()
			k, _ := httplimit.ByClientIP()(r)
			got = append(got, seen{a, k, err})
			return "", httplimit.ErrNoKey
		}))
		e, err := httplimit.New(l, opts...)
		if err != nil {
			t.Fatal(err)
		}
		e.Check(newSource("10.0.0.1:1", "X-Forwarded-For", "203.0.113.9"))
		e.Check(newSource("198.51.100.7:1", "X-Forwarded-For", "203.0.113.9"))
		e.Check(newSource("@", "X-Forwarded-For", "203.0.113.8"))
		for i := range 6 {
			e.Check(newSource(fmt.Sprintf("[2001:db8:1:%x::1]:1", i)))
		}
		return got
	}
	for _, tt := range []struct {
		name string
		old  []httplimit.Option
		c    httplimit.ClientIP
	}{
		{"trusted proxies", []httplimit.Option{httplimit.WithTrustedProxies("10.0.0.0/8"), httplimit.WithClientIPHeader("X-Forwarded-For")},
			httplimit.ClientIP{TrustedProxies: []string{"10.0.0.0/8"}, Header: "X-Forwarded-For"}},
		{"all peers", []httplimit.Option{httplimit.WithAllPeersTrusted(), httplimit.WithClientIPHeader("X-Forwarded-For")},
			httplimit.ClientIP{AllPeersTrusted: true, Header: "X-Forwarded-For"}},
		{"unix socket", []httplimit.Option{httplimit.WithUnixSocketProxy(), httplimit.WithClientIPHeader("X-Forwarded-For")},
			httplimit.ClientIP{UnixSocketProxy: true, Header: "X-Forwarded-For"}},
		{"ipv6", []httplimit.Option{httplimit.WithIPv6Prefix(56), httplimit.WithIPv6Aggregation(40, 3)},
			httplimit.ClientIP{IPv6Prefix: 56, IPv6Network: 40, IPv6PrefixesPerNetwork: 3}},
		{"no aggregation", []httplimit.Option{httplimit.WithIPv6Prefix(128), httplimit.WithIPv6Aggregation(0, 0)},
			httplimit.ClientIP{IPv6Prefix: 128, NoIPv6Aggregation: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			old, want := clients(t, tt.old...), clients(t, httplimit.WithClientIP(tt.c))
			if len(old) != len(want) {
				t.Fatalf("%d requests keyed, want %d", len(old), len(want))
			}
			for i := range want {
				if old[i].addr != want[i].addr || old[i].key != want[i].key || (old[i].err == nil) != (want[i].err == nil) {
					t.Errorf("request %d: deprecated options give %v %q %v, WithClientIP %v %q %v", i,
						old[i].addr, old[i].key, old[i].err, want[i].addr, want[i].key, want[i].err)
				}
			}
		})
	}
	for name, opts := range map[string][]httplimit.Option{
		"header alone":            {httplimit.WithClientIPHeader("X-Forwarded-For")},
		"proxy alone":             {httplimit.WithTrustedProxies("10.0.0.0/8")},
		"every address":           {httplimit.WithTrustedProxies("0.0.0.0/0"), httplimit.WithClientIPHeader("X-Real-IP")},
		"bad header":              {httplimit.WithAllPeersTrusted(), httplimit.WithClientIPHeader("X Real")},
		"prefix out of range":     {httplimit.WithIPv6Prefix(129)},
		"aggregation too wide":    {httplimit.WithIPv6Aggregation(40, 5000)},
		"mixed with WithClientIP": {httplimit.WithClientIP(httplimit.ClientIP{IPv6Prefix: 56}), httplimit.WithIPv6Prefix(64)},
	} {
		if _, err := httplimit.New(l, opts...); !errors.Is(err, slidelog.ErrInvalidOption) {
			t.Errorf("%s: got %v, want ErrInvalidOption", name, err)
		}
	}
}
