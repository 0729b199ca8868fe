package slidegrpc_test

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	slidegrpc "github.com/slidelog/slidelog/adapters/grpc"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/memstore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// FuzzMiddleware calls the unary interceptor with crafted forwarding
// metadata, API keys and methods, from an untrusted and a trusted peer.
// It must never panic; a call is admitted, denied or refused as a bad
// identity, never anything else; an untrusted peer is always keyed by
// its own address; a trusted one never by an address it did not send.
func FuzzMiddleware(f *testing.F) {
	f.Add("203.0.113.9, 198.51.100.7", "key-1", "/grpc.testing.TestService/EmptyCall")
	f.Add("garbage,,, 10.0.0.1", "", "")
	f.Add("[2001:db8::1]:443", "\x00\x7f", "/a/b/c")
	f.Add(strings.Repeat("10.0.0.1,", 100), strings.Repeat("k", 5000), "/x")
	store := memstore.New()
	f.Cleanup(func() { _ = store.Close() })
	counting := newFuzzStore(store)
	l, err := slidelog.New(counting, slidelog.Policy{Name: "fuzz", Limit: 1000, Window: time.Minute})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = l.Close() })
	byIP := slidegrpc.UnaryServerInterceptor(l, httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: []string{"10.0.0.0/8"}, Header: "x-forwarded-for"}))
	byKey := slidegrpc.UnaryServerInterceptor(l, httplimit.WithKeyFunc(httplimit.Composite(httplimit.ByRoute(), httplimit.ByHeader("x-api-key"))))
	handler := func(context.Context, any) (any, error) { return nil, nil }

	f.Fuzz(func(t *testing.T, forwarded, apiKey, method string) {
		md := metadata.MD{}
		md.Append("x-forwarded-for", forwarded)
		md.Append("x-api-key", apiKey)
		for _, tt := range []struct {
			name        string
			peerAddr    string
			interceptor grpc.UnaryServerInterceptor
		}{
			{"untrusted", "192.0.2.1", byIP},
			{"trusted", "10.1.2.3", byIP},
			{"by key", "192.0.2.1", byKey},
		} {
			ctx := metadata.NewIncomingContext(context.Background(), md)
			ctx = peer.NewContext(ctx, &peer.Peer{Addr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(tt.peerAddr), 1234))})
			counting.reset()
			_, err := tt.interceptor(ctx, nil, &grpc.UnaryServerInfo{FullMethod: method}, handler)
			code := status.Code(err)
			switch code {
			case codes.OK, codes.ResourceExhausted, codes.InvalidArgument:
			default:
				t.Fatalf("%s: got %v (%v), want OK, ResourceExhausted or InvalidArgument", tt.name, code, err)
			}
			id := counting.lastKey()
			if id == "" && code == codes.ResourceExhausted {
				continue // the limiter's deny cache answered without the store
			}
			switch tt.name {
			case "untrusted":
				if id != "ip:192.0.2.1" {
					t.Fatalf("untrusted peer keyed as %q, want ip:192.0.2.1", id)
				}
			case "trusted":
				allowed := map[string]bool{"ip:10.1.2.3": true}
				for entry := range strings.SplitSeq(forwarded, ",") {
					if id, ok := peerIdentity(entry); ok {
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

// fuzzStore remembers the identity of the last Take.
type fuzzStore struct {
	slidelog.Store
	mu   sync.Mutex
	last string
}

func newFuzzStore(s slidelog.Store) *fuzzStore { return &fuzzStore{Store: s} }

func (s *fuzzStore) Take(ctx context.Context, req slidelog.Request) (slidelog.Result, error) {
	s.mu.Lock()
	s.last = req.Key
	s.mu.Unlock()
	return s.Store.Take(ctx, req)
}

func (s *fuzzStore) reset() { s.mu.Lock(); s.last = ""; s.mu.Unlock() }

func (s *fuzzStore) lastKey() string { s.mu.Lock(); defer s.mu.Unlock(); return s.last }

// peerIdentity returns the identity httplimit.ByClientIP gives a peer at
// addr: how the engine reads an address from a forwarding header.
func peerIdentity(addr string) (id string, ok bool) {
	var err error
	e, _ := httplimit.New(nil, httplimit.WithLimiterFunc(func(r *httplimit.Request) *slidelog.Limiter {
		id, err = httplimit.ByClientIP()(r)
		return nil // no limiter: the engine stops here
	}))
	e.Check(peerSource(strings.TrimSpace(addr)))
	return id, err == nil
}

// peerSource is a request from the socket address it holds.
type peerSource string

func (s peerSource) Context() context.Context { return context.Background() }
func (s peerSource) Method() string           { return "POST" }
func (s peerSource) Path() string             { return "" }
func (s peerSource) Route() string            { return "" }
func (s peerSource) Header(string) []string   { return nil }
func (s peerSource) RemoteAddr() string       { return string(s) }
func (s peerSource) Value(any) any            { return nil }
func (s peerSource) Native() any              { return nil }
