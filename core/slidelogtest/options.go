package slidelogtest

import (
	"fmt"
	"strings"
	"testing"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/memstore"
)

// CheckInvalidOptions checks that an HTTP adapter refuses each invalid
// httplimit option, and a nil limiter, when its middleware is built: build
// makes the adapter's middleware of l with opts, and must panic. The panic
// must name the adapter (begin with prefix, such as "slidechi: ") and the
// problem, so that a misconfiguration shows at start-up with its cause.
func CheckInvalidOptions(t *testing.T, prefix string, build func(l *slidelog.Limiter, opts ...httplimit.Option)) {
	t.Helper()
	l := NewLimiter(t, memstore.New(), slidelog.PerMinute(1))
	for _, c := range []struct {
		name string
		l    *slidelog.Limiter
		opt  httplimit.Option
		want string // in the panic's message
	}{
		{"cidr", l, httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: []string{"10.0.0.0/33"}}), `"10.0.0.0/33": not a CIDR`},
		{"trust all", l, httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: []string{"0.0.0.0/0"}}), `"0.0.0.0/0" holds every address`},
		{"no header", l, httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: []string{"10.0.0.0/8"}}), "no Header"},
		{"header name", l, httplimit.WithClientIP(httplimit.ClientIP{Header: "X Real IP"}), `"X Real IP" is not a header field name`},
		{"ipv6 prefix", l, httplimit.WithClientIP(httplimit.ClientIP{IPv6Prefix: -1}), "IPv6Prefix /-1"},
		{"cost", l, httplimit.WithCost(0), "cost 0"},
		{"nil limiter", nil, nil, "nil limiter"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var opts []httplimit.Option
			if c.opt != nil {
				opts = append(opts, c.opt)
			}
			msg := panicMessage(func() { build(c.l, opts...) })
			switch {
			case msg == "":
				t.Error("the middleware was built; want a panic")
			case !strings.HasPrefix(msg, prefix) || !strings.Contains(msg, c.want):
				t.Errorf("panic %q, want one beginning %q and naming %q", msg, prefix, c.want)
			}
		})
	}
}

// panicMessage runs f and returns what it panicked with, as text, or ""
// when it returned.
func panicMessage(f func()) (msg string) {
	defer func() {
		if p := recover(); p != nil {
			msg = fmt.Sprint(p)
		}
	}()
	f()
	return ""
}
