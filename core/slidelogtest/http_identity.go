package slidelogtest

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/memstore"
)

// countStatuses sends n requests from remote, the i-th with the header
// pairs header(i), and counts the 200s; any status but 200 and 429 fails.
func countStatuses(t *testing.T, serve HTTPServe, n int, remote string, header func(i int) []string) (allowed int) {
	t.Helper()
	for i := range n {
		switch r := get(t, serve, "/hello", remote, header(i)...); r.status {
		case http.StatusOK:
			allowed++
		case http.StatusTooManyRequests:
		default:
			t.Fatalf("request %d: status %d, want 200 or 429 (body %q)", i, r.status, r.body)
		}
	}
	return allowed
}

// testTrustAllTakesAppended: with ClientIP.AllPeersTrusted, a load balancer
// that appends its peer to X-Forwarded-For (or Forwarded) makes the
// appended entry the client, never the client's own leftmost entries:
// 5 spoofed values are one identity, 2 of 5 admitted at limit 2, on one
// header line or several.
func testTrustAllTakesAppended(t *testing.T, e *httpEnv) {
	const real = "203.0.113.77" // what the load balancer saw
	tests := []struct {
		name   string
		via    string
		header func(fake string) []string
	}{
		{"xff one line", "X-Forwarded-For", func(fake string) []string {
			return []string{"X-Forwarded-For", fake + ", 10.0.0.9, " + real}
		}},
		{"xff several lines", "X-Forwarded-For", func(fake string) []string {
			return []string{"X-Forwarded-For", fake, "X-Forwarded-For", "127.0.0.1", "x-forwarded-for", real}
		}},
		{"forwarded", "Forwarded", func(fake string) []string {
			return []string{"Forwarded", "for=" + fake, "Forwarded", `for="` + real + `:4711";proto=https`}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := NewCountingStore(e.inner)
			l := newLimiter(t, store, slidelog.Policy{Name: "ip-" + tt.name, Limit: 2, Window: time.Minute})
			serve := e.serve(t, HTTPApp{
				Global: mw(l, httplimit.WithClientIP(httplimit.ClientIP{AllPeersTrusted: true, Header: tt.via})),
				Routes: []HTTPRoute{{Pattern: "/hello"}},
			})
			allowed := countStatuses(t, serve, 5, "10.1.2.3:5000", func(i int) []string {
				return tt.header(fmt.Sprintf("198.51.100.%d", i+1))
			})
			if allowed != 2 {
				t.Errorf("allowed: got %d of 5, want 2", allowed)
			}
			if keys := store.Identities(); len(keys) != 1 || keys["ip:"+real] != 5 {
				t.Errorf("identities: got %v, want only ip:%s, 5 times", keys, real)
			}
		})
	}
}

// testHeaderSentTwice: ByHeader refuses a header sent twice (a proxy's
// add-header after the client's own) or as a list with 400 before any
// store call, so the client's value never becomes the key; one value is
// the key.
func testHeaderSentTwice(t *testing.T, e *httpEnv) {
	l := e.limiter(t, slidelog.Policy{Name: "user", Limit: 2, Window: time.Minute})
	serve := e.serve(t, HTTPApp{
		Global: mw(l, httplimit.WithKeyFunc(httplimit.FirstOf(httplimit.ByHeader("X-User-Id"), httplimit.ByClientIP()))),
		Routes: []HTTPRoute{{Pattern: "/hello"}},
	})
	for i, h := range [][]string{
		{"X-User-Id", "victim", "X-User-Id", "alice"},
		{"X-User-Id", "victim", "x-user-id", "alice"},
		{"X-User-Id", "victim, alice"},
		{"X-User-Id", "victim,alice"},
	} {
		r := get(t, serve, "/hello", clientA, h...)
		r.wantStatus(t, http.StatusBadRequest)
		if i == 0 {
			r.wantProblem(t, http.StatusBadRequest)
		}
	}
	if n := e.store.Takes(); n != 0 {
		t.Fatalf("store calls for refused requests: got %d, want 0", n)
	}
	allowed := countStatuses(t, serve, 4, clientA, func(int) []string { return []string{"X-User-Id", "alice"} })
	if allowed != 2 {
		t.Errorf("allowed: got %d of 4, want 2", allowed)
	}
	if keys := e.store.Identities(); len(keys) != 1 || keys["h:x-user-id:alice"] != 4 {
		t.Errorf("identities: got %v, want only h:x-user-id:alice", keys)
	}
}

// testMintedIPv6Prefixes: with the default key and a memory store whose
// table is small, an attacker rotating /64s of two /48s cannot lock a new
// client out: its further /64s share its /48's identity, so the table
// never fills. The same holds for the limiter's fallback, which sees the
// same identities. (The 150,000-prefix run of the default table size is
// in package httplimit's tests.)
func testMintedIPv6Prefixes(t *testing.T, e *httpEnv) {
	const table, minted = 200, 5000
	run := func(t *testing.T, l *slidelog.Limiter, store *CountingStore) {
		serve := e.serve(t, HTTPApp{Global: mw(l), Routes: []HTTPRoute{{Pattern: "/hello"}}})
		for i := range minted {
			r := get(t, serve, "/hello", fmt.Sprintf("[2001:db8:%x:%x::1]:1000", 0xa0+i%2, i/2))
			if r.status != http.StatusOK && r.status != http.StatusTooManyRequests {
				t.Fatalf("minted /64 %d: status %d", i, r.status)
			}
		}
		get(t, serve, "/hello", "[2001:db8:ff:1::1]:1000").wantStatus(t, http.StatusOK)
		get(t, serve, "/hello", "192.0.2.200:1").wantStatus(t, http.StatusOK)
		most := 2*(httplimit.DefaultIPv6PrefixesPerNetwork+1) + 2
		if n := len(store.Identities()); n > most {
			t.Errorf("identities: got %d, want at most %d", n, most)
		}
	}
	t.Run("memory store", func(t *testing.T) {
		mem := memstore.New(memstore.WithMaxKeys(table))
		t.Cleanup(func() { _ = mem.Close() })
		store := NewCountingStore(mem)
		run(t, newLimiter(t, store, slidelog.Policy{Name: "ip", Limit: 1, Window: time.Minute}), store)
	})
	t.Run("behind a trusted proxy", func(t *testing.T) {
		mem := memstore.New(memstore.WithMaxKeys(table))
		t.Cleanup(func() { _ = mem.Close() })
		store := NewCountingStore(mem)
		l := newLimiter(t, store, slidelog.Policy{Name: "ip", Limit: 1, Window: time.Minute})
		serve := e.serve(t, HTTPApp{
			Global: mw(l, httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: []string{"10.0.0.1"}, Header: "X-Forwarded-For"})),
			Routes: []HTTPRoute{{Pattern: "/hello"}},
		})
		for i := range minted {
			r := get(t, serve, "/hello", "10.0.0.1:1000", "X-Forwarded-For", fmt.Sprintf("2001:db8:%x:%x::1", 0xb0+i%2, i/2))
			if r.status != http.StatusOK && r.status != http.StatusTooManyRequests {
				t.Fatalf("minted /64 %d: status %d", i, r.status)
			}
		}
		get(t, serve, "/hello", "10.0.0.1:1000", "X-Forwarded-For", "2001:db8:ff:1::1").wantStatus(t, http.StatusOK)
		if n, most := len(store.Identities()), 2*(httplimit.DefaultIPv6PrefixesPerNetwork+1)+1; n > most {
			t.Errorf("identities: got %d, want at most %d", n, most)
		}
	})
	t.Run("fallback", func(t *testing.T) {
		store := NewCountingStore(failingStore{})
		l := newLimiter(t, store, slidelog.Policy{Name: "ip", Limit: 1, Window: time.Minute},
			slidelog.WithFailureMode(slidelog.FailFallback), slidelog.WithFallbackMaxKeys(table))
		run(t, l, store)
	})
}

// testUnixSocketProxy: a peer without an IP address that did not come
// over a Unix socket (here the suite's in-process requests, with
// RemoteAddr "@" or "") has no client address, 400 with no store call,
// with ClientIP.UnixSocketProxy as without it: the option trusts Unix-socket
// peers only (a real one is RunProxySuite's UnixSocket case, behind
// nginx).
func testUnixSocketProxy(t *testing.T, e *httpEnv) {
	for i, remote := range []string{"@", ""} {
		store := NewCountingStore(e.inner)
		l := newLimiter(t, store, slidelog.Policy{Name: fmt.Sprintf("unix-%d", i), Limit: 2, Window: time.Minute})
		plain := e.serve(t, HTTPApp{Global: mw(l), Routes: []HTTPRoute{{Pattern: "/hello"}}})
		get(t, plain, "/hello", remote, "X-Real-IP", "203.0.113.8").wantStatus(t, http.StatusBadRequest)
		serve := e.serve(t, HTTPApp{
			Global: mw(l, httplimit.WithClientIP(httplimit.ClientIP{UnixSocketProxy: true, Header: "X-Real-IP"})),
			Routes: []HTTPRoute{{Pattern: "/hello"}},
		})
		get(t, serve, "/hello", remote, "X-Real-IP", "203.0.113.8").wantStatus(t, http.StatusBadRequest)
		if keys := store.Identities(); len(keys) != 0 {
			t.Errorf("remote %q, not a Unix socket: identities: got %v, want none", remote, keys)
		}
	}
}
