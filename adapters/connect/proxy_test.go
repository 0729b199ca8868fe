package slideconnect_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"connectrpc.com/connect"
	slideconnect "github.com/slidelog/slidelog/adapters/connect"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/slidelogtest"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// TestBehindHAProxy: the HAProxy row as written, `option forwardfor`
// with HAProxy's address trusted and X-Forwarded-For named, behind
// Interceptor.Handler: HAProxy appends the address it saw after the
// client's own X-Forwarded-For, so a client on another loopback address
// spoofing it (Connect protocol, HTTP/1.1) is one identity, 2 of 5 calls
// at limit 2. With `option forwardfor if-none`, which the page warns
// against, every spoofed value is an identity of its own.
func TestBehindHAProxy(t *testing.T) {
	for _, tt := range []struct {
		frontend string
		spoofed  bool
	}{{"\toption forwardfor", false}, {"\toption forwardfor if-none", true}} {
		t.Run(tt.frontend[1:], func(t *testing.T) {
			mem := memstore.New()
			t.Cleanup(func() { _ = mem.Close() })
			store := slidelogtest.NewCountingStore(mem)
			l, err := slidelog.New(store, slidelog.Policy{Name: "peer", Limit: 2, Window: time.Minute}, slidelog.WithDenyCache(0))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Close() })
			limit := slideconnect.NewInterceptor(l, httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: []string{"127.0.0.1"}, Header: "X-Forwarded-For"}))
			h := connect.NewUnaryHandler(checkProcedure,
				func(context.Context, *connect.Request[healthpb.HealthCheckRequest]) (*connect.Response[healthpb.HealthCheckResponse], error) {
					return connect.NewResponse(&healthpb.HealthCheckResponse{}), nil
				}, connect.WithInterceptors(limit))
			mux := http.NewServeMux()
			mux.Handle(checkProcedure, limit.Handler(h))
			srv := httptest.NewServer(mux)
			t.Cleanup(srv.Close)
			port := slidelogtest.StartHAProxy(t, "", tt.frontend, "\tserver app "+srv.Listener.Addr().String())

			d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(slidelogtest.AttackerAddr)}, Timeout: 10 * time.Second}
			hc := &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}, Timeout: 30 * time.Second}
			client := connect.NewClient[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse](hc, fmt.Sprintf("http://127.0.0.1:%d%s", port, checkProcedure))
			got := map[string]int{}
			for i := range 5 {
				req := connect.NewRequest(&healthpb.HealthCheckRequest{})
				req.Header().Set("X-Forwarded-For", fmt.Sprintf("198.51.100.%d", i+1))
				if _, err := client.CallUnary(t.Context(), req); err != nil {
					got[connect.CodeOf(err).String()]++
				} else {
					got["ok"]++
				}
			}
			keys := store.Identities()
			if tt.spoofed {
				if got["ok"] != 5 || len(keys) != 5 {
					t.Errorf("if-none: got %v and identities %v, want 5 admitted under 5 spoofed identities (the hazard the page warns of)", got, keys)
				}
				return
			}
			if got["ok"] != 2 || got[connect.CodeResourceExhausted.String()] != 3 {
				t.Errorf("codes: got %v, want 2 admitted and 3 resource_exhausted", got)
			}
			if want := "ip:" + slidelogtest.AttackerAddr; len(keys) != 1 || keys[want] != 5 {
				t.Errorf("identities: got %v, want only %s", keys, want)
			}
		})
	}
}
