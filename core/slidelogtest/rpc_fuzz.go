package slidelogtest

import (
	"context"
	"strings"
	"testing"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/memstore"
)

// RPCFuzzCall makes one unary call to an RPC adapter's handler, in
// process, from peer (an IP address without a port), to the procedure
// route where the adapter lets a caller choose it, with forwarded as the
// X-Forwarded-For metadata or header field and apiKey as X-Api-Key, the
// values as they are. It returns what the call's client would see.
type RPCFuzzCall func(peer, route, forwarded, apiKey string) RPCReply

// FuzzRPC drives an RPC adapter (gRPC, Connect) with calls of crafted
// forwarding and API-key values and procedures, from an untrusted and a
// trusted peer. newCall returns calls to a handler limited with l and
// opts. A call must never panic; it is admitted or refused as a bad
// identity, never anything else (each call has a limiter of its own, far
// from its limit, on a CountingStore that tells its identity); an
// untrusted peer is always keyed by its own address, and a trusted one
// never by an address it did not send.
//
// Seed inputs run with go test; scripts/test.sh fuzzes each adapter for a
// fixed number of inputs.
func FuzzRPC(f *testing.F, newCall func(l *slidelog.Limiter, opts ...httplimit.Option) RPCFuzzCall) {
	f.Add("/grpc.testing.TestService/EmptyCall", "203.0.113.9, 198.51.100.7", "key-1")
	f.Add("", "garbage,,, 10.0.0.1", "")
	f.Add("/a/b/c", "[2001:db8::1]:443", "\x00\x7f")
	f.Add("/x", strings.Repeat("10.0.0.1,", 100), strings.Repeat("k", 5000))
	byIP := []httplimit.Option{httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: []string{"10.0.0.0/8"}, Header: "X-Forwarded-For"})}
	byKey := []httplimit.Option{httplimit.WithKeyFunc(httplimit.Composite(httplimit.ByRoute(), httplimit.ByHeader("X-Api-Key")))}

	f.Fuzz(func(t *testing.T, route, forwarded, apiKey string) {
		for _, tt := range []struct {
			name string
			peer string
			opts []httplimit.Option
		}{
			{"untrusted", "192.0.2.1", byIP},
			{"trusted", "10.1.2.3", byIP},
			{"by key", "192.0.2.1", byKey},
		} {
			// A store and a limiter per call: the store's keys are then
			// the call's identity, if it had one.
			store := NewCountingStore(memstore.New())
			l, err := slidelog.New(store, slidelog.Policy{Name: "fuzz", Limit: 1000, Window: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			reply := newCall(l, tt.opts...)(tt.peer, route, forwarded, apiKey)
			_ = l.Close()
			_ = store.Close()
			switch reply.Outcome {
			case RPCAdmitted, RPCInvalid:
			default:
				t.Fatalf("%s: %v (%s: %s), want admitted or invalid", tt.name, reply.Outcome, reply.Code, reply.Message)
			}
			var id string
			for k := range store.Keys() {
				id = k
			}
			switch tt.name {
			case "untrusted":
				if id != "ip:192.0.2.1" {
					t.Fatalf("untrusted peer keyed as %q, want ip:192.0.2.1", id)
				}
			case "trusted":
				allowed := map[string]bool{"ip:10.1.2.3": true}
				for entry := range strings.SplitSeq(forwarded, ",") {
					if id, ok := clientIPIdentity(entry); ok {
						allowed[id] = true
					}
				}
				if !allowed[id] {
					t.Fatalf("trusted peer keyed as %q, not its address or one of forwarded %q", id, forwarded)
				}
			}
		}
	})
}

// clientIPIdentity returns the identity httplimit.ByClientIP gives a peer
// at addr: how the engine reads an address from a forwarding header.
func clientIPIdentity(addr string) (id string, ok bool) {
	var err error
	e, _ := httplimit.New(nil, httplimit.WithLimiterFunc(func(r *httplimit.Request) *slidelog.Limiter {
		id, err = httplimit.ByClientIP()(r)
		return nil // no limiter: the engine stops here
	}))
	e.Check(addrSource(strings.TrimSpace(addr)))
	return id, err == nil
}

// addrSource is a request from the socket address it holds.
type addrSource string

func (s addrSource) Context() context.Context { return context.Background() }
func (s addrSource) Method() string           { return "POST" }
func (s addrSource) Path() string             { return "" }
func (s addrSource) Route() string            { return "" }
func (s addrSource) Header(string) []string   { return nil }
func (s addrSource) RemoteAddr() string       { return string(s) }
func (s addrSource) Value(any) any            { return nil }
func (s addrSource) Native() any              { return nil }
