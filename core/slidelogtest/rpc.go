package slidelogtest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/memstore"
)

// RPCOutcome is how one call to an RPC adapter's server ended.
type RPCOutcome int

const (
	// RPCAdmitted: the handler answered the call.
	RPCAdmitted RPCOutcome = iota + 1
	// RPCDenied: the call failed with ResourceExhausted
	// (resource_exhausted).
	RPCDenied
	// RPCInvalid: the call failed with InvalidArgument
	// (invalid_argument), a bad identity.
	RPCInvalid
	// RPCFailed: the call failed with any other code.
	RPCFailed
)

func (o RPCOutcome) String() string {
	switch o {
	case RPCAdmitted:
		return "admitted"
	case RPCDenied:
		return "denied"
	case RPCInvalid:
		return "invalid"
	case RPCFailed:
		return "failed"
	}
	return fmt.Sprintf("RPCOutcome(%d)", int(o))
}

// RPCReply is what a call's client saw: its outcome and, for an error,
// the code's name and the error's message.
type RPCReply struct {
	Outcome RPCOutcome
	Code    string
	Message string
}

// The peers an RPCCall is asked to call from, besides IP addresses.
const (
	// UnixPeer is a client on a real Unix socket, as a proxy on the same
	// host (nginx's grpc_pass unix:, proxy_pass http://unix:).
	UnixPeer = "unix"
	// NoAddrPeer is a client whose peer address is no IP address and
	// that did not come over a Unix socket: an in-memory connection
	// (grpc-go's bufconn).
	NoAddrPeer = "no-addr"
)

// RPCCall makes one unary call to the server, from peer (an IP address
// without a port, which the server must see as the call's peer, or
// UnixPeer or NoAddrPeer), with the metadata or header fields of the
// name/value pairs header, each name sent as written (a transport that
// lower-cases names, such as gRPC's, does so), and the values as they
// are, control characters included: where the adapter's usual client
// refuses to send a value, the harness sends it another way.
type RPCCall func(t *testing.T, peer string, header ...string) RPCReply

// RPCFactory starts a server of the RPC adapter under test whose every
// unary call is limited with l and opts, on listeners that let a client
// choose its peer (NewPeerListener), a Unix socket and an in-memory
// connection without an address, and returns a function that calls it.
// The server stops when the test ends.
type RPCFactory func(t *testing.T, l *slidelog.Limiter, opts ...httplimit.Option) RPCCall

// RunRPCSuite runs the attack classes of docs/security.md that the HTTP
// suite tests on the HTTP adapters against an RPC adapter (gRPC,
// Connect): each Check of this file, as a subtest.
func RunRPCSuite(t *testing.T, factory RPCFactory) {
	for _, c := range []struct {
		name  string
		check func(*testing.T, RPCFactory)
	}{
		{"SpoofedForwarding", CheckRPCSpoofedForwarding},
		{"IPv6Prefix", CheckRPCIPv6Prefix},
		{"MintedIPv6Prefixes", CheckRPCMintedIPv6Prefixes},
		{"BadIdentityBeforeStore", CheckRPCBadIdentityBeforeStore},
		{"HeaderNameCase", CheckRPCHeaderNameCase},
		{"UnixSocketProxy", CheckRPCUnixSocketProxy},
	} {
		t.Run(c.name, func(t *testing.T) { c.check(t, factory) })
	}
}

// rpcStore returns a counting memory store, with opts, closed when the
// test ends.
func rpcStore(t *testing.T, opts ...memstore.Option) *CountingStore {
	t.Helper()
	mem := memstore.New(opts...)
	t.Cleanup(func() { _ = mem.Close() })
	return NewCountingStore(mem)
}

// countOutcomes makes n calls from peer, the i-th with the header pairs
// header(i), and counts the admitted ones; any outcome but admitted and
// denied fails.
func countOutcomes(t *testing.T, call RPCCall, n int, peer func(i int) string, header func(i int) []string) (admitted int) {
	t.Helper()
	for i := range n {
		switch r := call(t, peer(i), header(i)...); r.Outcome {
		case RPCAdmitted:
			admitted++
		case RPCDenied:
		default:
			t.Fatalf("call %d from %s: %v %s %q, want admitted or denied", i, peer(i), r.Outcome, r.Code, r.Message)
		}
	}
	return admitted
}

func samePeer(p string) func(int) string { return func(int) string { return p } }

func noHeader(int) []string { return nil }

// CheckRPCSpoofedForwarding: a client behind no proxy sends 1,000 calls
// from one peer address, each with fresh forwarding metadata
// (x-forwarded-for, x-real-ip, true-client-ip, forwarded): they land in
// one budget, the peer's (10 of 1,000 admitted at limit 10), with no
// trusted proxy configured and with one configured that the peer is not.
func CheckRPCSpoofedForwarding(t *testing.T, factory RPCFactory) {
	const peer = "198.51.100.7"
	for name, opts := range map[string][]httplimit.Option{
		"no proxy": nil,
		"peer not a trusted proxy": {httplimit.WithClientIP(httplimit.ClientIP{
			TrustedProxies: []string{"10.0.0.0/8"}, Header: "X-Forwarded-For",
		})},
	} {
		t.Run(name, func(t *testing.T) {
			store := rpcStore(t)
			call := factory(t, newLimiter(t, store, slidelog.Policy{Name: "ip", Limit: 10, Window: time.Minute}), opts...)
			admitted := countOutcomes(t, call, 1000, samePeer(peer), func(i int) []string {
				fake := fmt.Sprintf("203.0.%d.%d", i/256, i%256)
				return []string{
					"x-forwarded-for", fake + ", 10.0.0.1",
					"x-real-ip", fake,
					"true-client-ip", fake,
					"forwarded", "for=" + fake,
				}
			})
			if admitted != 10 {
				t.Errorf("admitted: got %d of 1000, want 10", admitted)
			}
			if keys := store.Identities(); len(keys) != 1 || keys["ip:"+peer] != 1000 {
				t.Errorf("identities: got %d (%v), want only ip:%s, 1000 times", len(keys), sample(keys), peer)
			}
		})
	}
}

// sample returns up to 5 of keys, for a failure's message.
func sample(keys map[string]int) map[string]int {
	out := make(map[string]int, 5)
	for k, n := range keys {
		if len(out) == 5 {
			break
		}
		out[k] = n
	}
	return out
}

// CheckRPCIPv6Prefix: peers of one /64 share one budget (10 of 40
// addresses admitted at limit 10, one identity), the next /64 is another
// client, an IPv4-mapped peer is its IPv4 address, and a configured
// prefix (/48) groups more widely.
func CheckRPCIPv6Prefix(t *testing.T, factory RPCFactory) {
	t.Run("/64", func(t *testing.T) {
		store := rpcStore(t)
		call := factory(t, newLimiter(t, store, slidelog.Policy{Name: "ip", Limit: 10, Window: time.Minute}))
		admitted := countOutcomes(t, call, 40, func(i int) string {
			return fmt.Sprintf("2001:db8:aa:bb:%x:%x:%x:%x", i, i*7&0xffff, i*13&0xffff, 0xffff-i)
		}, noHeader)
		if admitted != 10 {
			t.Errorf("admitted: got %d of 40 addresses of one /64, want 10", admitted)
		}
		if keys := store.Identities(); len(keys) != 1 || keys["ip:2001:db8:aa:bb::/64"] != 40 {
			t.Errorf("identities: got %d (%v), want only ip:2001:db8:aa:bb::/64, 40 times", len(keys), sample(keys))
		}
		if r := call(t, "2001:db8:aa:bc::1"); r.Outcome != RPCAdmitted {
			t.Errorf("the next /64: got %v %s, want admitted", r.Outcome, r.Code)
		}
		for _, p := range []string{"192.0.2.77", "::ffff:192.0.2.77"} {
			if r := call(t, p); r.Outcome != RPCAdmitted {
				t.Errorf("peer %s: got %v %s, want admitted", p, r.Outcome, r.Code)
			}
		}
		if n := store.Identities()["ip:192.0.2.77"]; n != 2 {
			t.Errorf("identity ip:192.0.2.77: got %d calls, want 2 (an IPv4-mapped peer is its IPv4 address)", n)
		}
	})
	t.Run("/48", func(t *testing.T) {
		store := rpcStore(t)
		call := factory(t, newLimiter(t, store, slidelog.Policy{Name: "wide", Limit: 2, Window: time.Minute}),
			httplimit.WithClientIP(httplimit.ClientIP{IPv6Prefix: 48}))
		for _, tt := range []struct {
			peer string
			want RPCOutcome
		}{
			{"2001:db8:cc:1::1", RPCAdmitted}, {"2001:db8:cc:ffff::2", RPCAdmitted},
			{"2001:db8:cc:1234:5678::3", RPCDenied}, {"2001:db8:cd::1", RPCAdmitted},
		} {
			if r := call(t, tt.peer); r.Outcome != tt.want {
				t.Errorf("peer %s: got %v %s, want %v", tt.peer, r.Outcome, r.Code, tt.want)
			}
		}
		if keys := store.Identities(); len(keys) != 2 || keys["ip:2001:db8:cc::/48"] != 3 {
			t.Errorf("identities: got %v, want ip:2001:db8:cc::/48 3 times and ip:2001:db8:cd::/48", keys)
		}
	})
}

// CheckRPCMintedIPv6Prefixes: with the default key and a memory store
// whose table is small (200 keys), an attacker minting /64s of two /48s
// cannot lock a new client out: past 64 of a /48's /64s, its further ones
// share the /48's identity, so the table never fills. From 300 peers of
// their own, and through the metadata of a trusted proxy (1,000 /64s).
func CheckRPCMintedIPv6Prefixes(t *testing.T, factory RPCFactory) {
	const table = 200
	most := 2*(httplimit.DefaultIPv6PrefixesPerNetwork+1) + 2
	t.Run("peers", func(t *testing.T) {
		store := rpcStore(t, memstore.WithMaxKeys(table))
		call := factory(t, newLimiter(t, store, slidelog.Policy{Name: "ip", Limit: 1, Window: time.Minute}))
		countOutcomes(t, call, 300, func(i int) string {
			return fmt.Sprintf("2001:db8:%x:%x::1", 0xa0+i%2, i/2)
		}, noHeader)
		for _, p := range []string{"2001:db8:ff:1::1", "192.0.2.200"} {
			if r := call(t, p); r.Outcome != RPCAdmitted {
				t.Errorf("new client %s: got %v %s, want admitted", p, r.Outcome, r.Code)
			}
		}
		if n := len(store.Identities()); n > most {
			t.Errorf("identities: got %d for 300 minted /64s, want at most %d", n, most)
		}
	})
	t.Run("behind a trusted proxy", func(t *testing.T) {
		const proxy = "10.0.0.1"
		store := rpcStore(t, memstore.WithMaxKeys(table))
		call := factory(t, newLimiter(t, store, slidelog.Policy{Name: "ip", Limit: 1, Window: time.Minute}),
			httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: []string{proxy}, Header: "X-Forwarded-For"}))
		countOutcomes(t, call, 1000, samePeer(proxy), func(i int) []string {
			return []string{"x-forwarded-for", fmt.Sprintf("2001:db8:%x:%x::1", 0xb0+i%2, i/2)}
		})
		if r := call(t, proxy, "x-forwarded-for", "2001:db8:ff:1::1"); r.Outcome != RPCAdmitted {
			t.Errorf("new client: got %v %s, want admitted", r.Outcome, r.Code)
		}
		if n := len(store.Identities()); n > most-1 {
			t.Errorf("identities: got %d for 1000 minted /64s, want at most %d", n, most-1)
		}
	})
}

// CheckRPCBadIdentityBeforeStore: keyed by a metadata value
// (httplimit.ByHeader), a huge value, one past the limiter's maximum key
// length, one with a control character, a blank one and none at all are
// each refused with InvalidArgument before any store call, with a message
// that does not repeat the value; a good value is then admitted.
func CheckRPCBadIdentityBeforeStore(t *testing.T, factory RPCFactory) {
	const peer = "192.0.2.1"
	store := rpcStore(t)
	call := factory(t, newLimiter(t, store, slidelog.Policy{Name: "key", Limit: 10, Window: time.Minute}),
		httplimit.WithKeyFunc(httplimit.ByHeader("X-Api-Key")))
	huge := strings.Repeat("k", 10<<10)
	for _, tt := range []struct {
		name   string
		header []string
	}{
		{"10 KiB", []string{"x-api-key", huge}},
		{"maximum key length", []string{"x-api-key", strings.Repeat("k", defaultMaxKeyLength)}},
		// The one control character HTTP transports pass on (NUL, DEL
		// and the others are refused by net/http and grpc-go's framer
		// before any handler).
		{"tab", []string{"x-api-key", "key\tone"}},
		{"blank", []string{"x-api-key", "   "}},
		{"missing", nil},
	} {
		r := call(t, peer, tt.header...)
		if r.Outcome != RPCInvalid {
			t.Errorf("%s: got %v %s %q, want invalid", tt.name, r.Outcome, r.Code, r.Message)
		}
		if len(tt.header) == 2 && strings.TrimSpace(tt.header[1]) != "" && strings.Contains(r.Message, tt.header[1][:3]) {
			t.Errorf("%s: message %q repeats the value", tt.name, r.Message)
		}
	}
	if n := store.Takes(); n != 0 {
		t.Fatalf("store calls after bad identities: got %d (%v), want 0", n, sample(store.Identities()))
	}
	if r := call(t, peer, "x-api-key", "key-1"); r.Outcome != RPCAdmitted {
		t.Errorf("key-1: got %v %s %q, want admitted", r.Outcome, r.Code, r.Message)
	}
	if keys := store.Identities(); len(keys) != 1 || keys["h:x-api-key:key-1"] != 1 {
		t.Errorf("identities: got %v, want only h:x-api-key:key-1", keys)
	}
}

// CheckRPCHeaderNameCase: header names are matched without regard to
// case, whichever spelling the option and the client use: 20 clients
// behind a trusted proxy that writes x-forwarded-for (or
// X-Forwarded-For) are 20 identities, not the proxy's one, with the
// option naming "X-Forwarded-For" or "x-forwarded-for"; an API key sent
// as "x-api-key" or "X-API-KEY" is found by ByHeader("X-Api-Key") and
// ByHeader("x-api-key").
func CheckRPCHeaderNameCase(t *testing.T, factory RPCFactory) {
	const proxy = "10.0.0.1"
	for _, named := range []string{"X-Forwarded-For", "x-forwarded-for"} {
		for _, sent := range []string{"x-forwarded-for", "X-Forwarded-For"} {
			t.Run(named+" option, "+sent+" sent", func(t *testing.T) {
				store := rpcStore(t)
				call := factory(t, newLimiter(t, store, slidelog.Policy{Name: "ip", Limit: 1, Window: time.Minute}),
					httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: []string{proxy}, Header: named}))
				admitted := countOutcomes(t, call, 20, samePeer(proxy), func(i int) []string {
					return []string{sent, fmt.Sprintf("203.0.113.%d", i+1)}
				})
				if admitted != 20 {
					t.Errorf("admitted: got %d of 20 clients, want 20 (one each)", admitted)
				}
				if keys := store.Identities(); len(keys) != 20 || keys["ip:"+proxy] != 0 {
					t.Errorf("identities: got %d (%v), want 20 clients and not the proxy", len(keys), sample(keys))
				}
			})
		}
	}
	for _, named := range []string{"X-Api-Key", "x-api-key"} {
		t.Run("ByHeader("+named+")", func(t *testing.T) {
			store := rpcStore(t)
			call := factory(t, newLimiter(t, store, slidelog.Policy{Name: "key", Limit: 1, Window: time.Minute}),
				httplimit.WithKeyFunc(httplimit.ByHeader(named)))
			for _, tt := range []struct {
				name, value string
				want        RPCOutcome
			}{
				{"x-api-key", "key-1", RPCAdmitted}, {"X-API-KEY", "key-1", RPCDenied}, {"X-Api-Key", "key-2", RPCAdmitted},
			} {
				if r := call(t, "192.0.2.1", tt.name, tt.value); r.Outcome != tt.want {
					t.Errorf("%s: %s: got %v %s %q, want %v", tt.name, tt.value, r.Outcome, r.Code, r.Message, tt.want)
				}
			}
		})
	}
}

// CheckRPCUnixSocketProxy: with ClientIP.UnixSocketProxy naming
// x-real-ip, a call over a real Unix socket is keyed by that metadata; a
// peer without an IP address that is not on a Unix socket is refused
// (InvalidArgument) with no store call, as without the option, and a
// TCP peer's x-real-ip is ignored: the option trusts Unix-socket peers
// only.
func CheckRPCUnixSocketProxy(t *testing.T, factory RPCFactory) {
	store := rpcStore(t)
	l := newLimiter(t, store, slidelog.Policy{Name: "unix", Limit: 1, Window: time.Minute})
	call := factory(t, l, httplimit.WithClientIP(httplimit.ClientIP{UnixSocketProxy: true, Header: "X-Real-IP"}))
	for _, tt := range []struct {
		peer, ip string
		want     RPCOutcome
	}{
		{UnixPeer, "203.0.113.5", RPCAdmitted}, {UnixPeer, "203.0.113.6", RPCAdmitted}, {UnixPeer, "203.0.113.5", RPCDenied},
		{UnixPeer, "", RPCInvalid}, // the proxy named no client
		{NoAddrPeer, "203.0.113.7", RPCInvalid},
		{"198.51.100.9", "203.0.113.8", RPCAdmitted}, {"198.51.100.9", "203.0.113.9", RPCDenied},
	} {
		var header []string
		if tt.ip != "" {
			header = []string{"x-real-ip", tt.ip}
		}
		if r := call(t, tt.peer, header...); r.Outcome != tt.want {
			t.Errorf("from %s, x-real-ip %q: got %v %s %q, want %v", tt.peer, tt.ip, r.Outcome, r.Code, r.Message, tt.want)
		}
	}
	want := map[string]int{"ip:203.0.113.5": 2, "ip:203.0.113.6": 1, "ip:198.51.100.9": 2}
	if keys := store.Identities(); len(keys) != len(want) || keys["ip:203.0.113.5"] != 2 || keys["ip:203.0.113.6"] != 1 || keys["ip:198.51.100.9"] != 2 {
		t.Errorf("identities: got %v, want %v", keys, want)
	}

	plain := factory(t, l)
	for _, peer := range []string{UnixPeer, NoAddrPeer} {
		before := store.Takes()
		if r := plain(t, peer, "x-real-ip", "203.0.113.10"); r.Outcome != RPCInvalid {
			t.Errorf("without the option, from %s: got %v %s, want invalid", peer, r.Outcome, r.Code)
		}
		if n := store.Takes(); n != before {
			t.Errorf("without the option, from %s: %d store calls, want none", peer, n-before)
		}
	}
}
