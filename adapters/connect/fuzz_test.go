package slideconnect_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	slideconnect "github.com/slidelog/slidelog/adapters/connect"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/memstore"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// FuzzMiddleware sends unary Connect calls with crafted forwarding and
// API-key headers, from an untrusted and a trusted peer, to a handler
// behind the interceptor. It must never panic; a call is admitted (200),
// denied (429) or refused as a bad identity (400), never anything else;
// an untrusted peer is always keyed by its own address; a trusted one
// never by an address it did not send.
func FuzzMiddleware(f *testing.F) {
	f.Add("203.0.113.9, 198.51.100.7", "key-1")
	f.Add("garbage,,, 10.0.0.1", "")
	f.Add("[2001:db8::1]:443", "\x7f")
	f.Add(strings.Repeat("10.0.0.1,", 100), strings.Repeat("k", 5000))
	store := memstore.New()
	f.Cleanup(func() { _ = store.Close() })
	counting := &fuzzStore{Store: store}
	l, err := slidelog.New(counting, slidelog.Policy{Name: "fuzz", Limit: 1000, Window: time.Minute})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = l.Close() })
	handler := func(i *slideconnect.Interceptor) http.Handler {
		return connect.NewUnaryHandler(checkProcedure,
			func(context.Context, *connect.Request[healthpb.HealthCheckRequest]) (*connect.Response[healthpb.HealthCheckResponse], error) {
				return connect.NewResponse(&healthpb.HealthCheckResponse{}), nil
			}, connect.WithInterceptors(i))
	}
	byIP := handler(slideconnect.NewInterceptor(l, httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: []string{"10.0.0.0/8"}, Header: "X-Forwarded-For"})))
	byKey := handler(slideconnect.NewInterceptor(l, httplimit.WithKeyFunc(httplimit.Composite(httplimit.ByRoute(), httplimit.ByHeader("X-Api-Key")))))

	f.Fuzz(func(t *testing.T, forwarded, apiKey string) {
		for _, tt := range []struct {
			name    string
			peer    string
			handler http.Handler
		}{
			{"untrusted", "192.0.2.1", byIP},
			{"trusted", "10.1.2.3", byIP},
			{"by key", "192.0.2.1", byKey},
		} {
			r := httptest.NewRequest(http.MethodPost, checkProcedure, strings.NewReader("{}"))
			r.Header.Set("Content-Type", "application/json")
			// Header values as a client may send them: net/http's server
			// passes any byte but these on.
			r.Header["X-Forwarded-For"] = []string{forwarded}
			r.Header["X-Api-Key"] = []string{apiKey}
			r.RemoteAddr = net.JoinHostPort(tt.peer, "1234")
			counting.reset()
			w := httptest.NewRecorder()
			tt.handler.ServeHTTP(w, r)
			switch w.Code {
			case http.StatusOK, http.StatusTooManyRequests, http.StatusBadRequest:
			default:
				t.Fatalf("%s: got %d (%s), want 200, 429 or 400", tt.name, w.Code, w.Body)
			}
			id := counting.lastKey()
			if id == "" && w.Code == http.StatusTooManyRequests {
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
