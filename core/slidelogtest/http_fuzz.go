package slidelogtest

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/memstore"
)

// fuzzHeaders are the forwarding headers a fuzzed server names, one per
// input.
var fuzzHeaders = []string{"X-Forwarded-For", "Forwarded", "X-Real-IP", "CF-Connecting-IP", "x-forwarded-for"}

// FuzzHTTP drives the adapter under test with requests of random method,
// target, header field and socket peer, through a server that uses every
// key function, a skip rule, a cost function, refunds, trusted proxies and
// a per-route middleware. A request the HTTP parser refuses is skipped, as
// a server would answer it before any middleware. Every other request
// must be answered without a panic and without a 5xx: nothing in a
// request may crash the process or pass for a server fault.
//
// Seed inputs run with go test; scripts/test.sh fuzzes each adapter for a
// fixed number of inputs.
func FuzzHTTP(f *testing.F, factory HTTPFactory) {
	f.Add("GET", "/users/..%2f..%2fhealthz", "X-Forwarded-For", strings.Repeat(",", 4096), "10.0.0.1:1", uint8(0))
	f.Add("GET", "/%68ealthz", "x-forwarded-for", "203.0.113.1, 10.0.0.2", "[2001:db8::1]:80", uint8(4))
	f.Add("POST", "/healthz/", "Forwarded", `for="[2001:db8::7]:4711";proto=https, for=unknown`, "10.0.0.1:1", uint8(1))
	f.Add("GET", "//healthz", "X-Api-Key", "key|\\1", "192.0.2.1:1", uint8(2))
	f.Add("OPTIONS", "*", "X-Real-IP", "::ffff:10.0.0.9", "@", uint8(2))
	f.Add("DELETE", "/files/../healthz", "CF-Connecting-IP", "fe80::1%eth0", "[fe80::1%25eth0]:443", uint8(3))
	f.Add("GET", "/users/7?x=1", "X-Units", "-5", "10.255.255.255:65535", uint8(0))
	f.Add("GET", "/", "Cookie", "", "", uint8(0))
	f.Add("GET", "/users/1", "X-Api-Key", "k", "192.0.2.1:1", uint8(16)) // a typed nil as the user
	f.Add("GET", "/users/1", "X-Api-Key", "alice", "192.0.2.1:1", uint8(8))
	store := memstore.New()
	f.Cleanup(func() { _ = store.Close() })
	global, err := slidelog.New(store, slidelog.PerMinute(50))
	if err != nil {
		f.Fatal(err)
	}
	route, err := slidelog.New(store, slidelog.Policy{Name: "route", Limit: 3, Window: time.Second})
	if err != nil {
		f.Fatal(err)
	}
	key := httplimit.FirstOf(
		httplimit.ByContextValue("user"),
		httplimit.Composite(httplimit.ByRoute(), httplimit.ByHeader("X-Api-Key")),
		httplimit.ByClientIP())
	cost := func(r *httplimit.Request) int {
		n, err := strconv.Atoi(r.HeaderValue("X-Units"))
		if err != nil {
			return 1
		}
		return min(max(n, 1), 3)
	}
	f.Fuzz(func(t *testing.T, method, target, name, value, peer string, via uint8) {
		raw := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: example.com\r\n%s: %s\r\n\r\n", method, target, name, value)
		req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
		if err != nil {
			return // refused by the parser, before any middleware
		}
		ctx := t.Context()
		switch via / 8 % 3 { // what an auth middleware may have stored
		case 1:
			ctx = context.WithValue(ctx, "user", value) //nolint:staticcheck // gin and echo store by string key too
		case 2:
			ctx = context.WithValue(ctx, "user", (*nilStringer)(nil)) //nolint:staticcheck // as above
		}
		req = req.WithContext(ctx)
		req.RemoteAddr = peer
		serve := factory(t, HTTPApp{
			RawHeaderNames: via%2 == 1,
			Global: mw(global,
				httplimit.WithKeyFunc(key),
				httplimit.WithSkipFunc(httplimit.SkipPaths("/healthz")),
				httplimit.WithClientIP(httplimit.ClientIP{
					TrustedProxies: []string{"10.0.0.0/8", "2001:db8::/32"},
					Header:         fuzzHeaders[int(via)%len(fuzzHeaders)],
					IPv6Prefix:     48,
				}),
				httplimit.WithRefundOnServerError()),
			Routes: []HTTPRoute{
				{Pattern: "/healthz"},
				{Pattern: "/users/:id", Middleware: mw(route, httplimit.WithCostFunc(cost), httplimit.WithHeaders(httplimit.HeadersLegacy))},
				{Pattern: "/:page"},
				{Method: http.MethodPost, Pattern: "/items"},
			},
		})
		r := send(t, serve, req)
		if r.status >= 500 {
			t.Fatalf("%q from %q: status %d (body %q)", raw, peer, r.status, r.body)
		}
	})
}
