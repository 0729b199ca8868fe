package slideconnect_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	slideconnect "github.com/slidelog/slidelog/adapters/connect"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/slidelogtest"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// TestByRouteMadeUpProcedures pins what the docs say of a key built with
// httplimit.ByRoute. Interceptor.Handler decides a call before connect-go
// routes it, so each procedure name a client makes up is an identity of
// its own: 20 made-up names cost 20 store keys, each call ends
// unimplemented without reaching a handler, and a made-up name called
// again is denied like any identity whose budget is spent; the real
// procedure's budget is its own, untouched by them. The interceptor
// alone runs only for procedures connect-go serves: made-up names cost no
// store call.
func TestByRouteMadeUpProcedures(t *testing.T) {
	const madeUp = 20
	for _, withHandler := range []bool{true, false} {
		t.Run(map[bool]string{true: "Handler", false: "InterceptorOnly"}[withHandler], func(t *testing.T) {
			store := newStore(t, slidelogtest.MemoryStores())
			l := slidelogtest.NewLimiter(t, store, slidelog.Policy{Name: "route", Limit: 1, Window: time.Minute})
			limit := slideconnect.NewInterceptor(l, httplimit.WithKeyFunc(httplimit.ByRoute()))
			var reached atomic.Int64
			mux := http.NewServeMux()
			mux.Handle(checkProcedure, connect.NewUnaryHandler(checkProcedure,
				func(context.Context, *connect.Request[healthpb.HealthCheckRequest]) (*connect.Response[healthpb.HealthCheckResponse], error) {
					reached.Add(1)
					return connect.NewResponse(&healthpb.HealthCheckResponse{}), nil
				}, connect.WithInterceptors(limit)))
			var h http.Handler = mux
			if withHandler {
				h = limit.Handler(mux)
			}
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)
			call := func(procedure string) error {
				client := connect.NewClient[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse](srv.Client(), srv.URL+procedure)
				_, err := client.CallUnary(t.Context(), connect.NewRequest(&healthpb.HealthCheckRequest{}))
				return err
			}
			name := func(i int) string { return fmt.Sprintf("/grpc.health.v1.Health/MadeUp%d", i) }

			for i := range madeUp {
				if err := call(name(i)); connect.CodeOf(err) != connect.CodeUnimplemented {
					t.Fatalf("made-up procedure %d: got %v, want unimplemented", i, err)
				}
			}
			again := call(name(0))
			ids := store.Identities()
			if withHandler {
				if connect.CodeOf(again) != connect.CodeResourceExhausted {
					t.Errorf("a made-up procedure called again: got %v, want resource_exhausted (its own budget, spent)", again)
				}
				if len(ids) != madeUp {
					t.Errorf("identities after %d made-up procedures: got %d, want %d (one store key each)", madeUp, len(ids), madeUp)
				}
				for i := range madeUp {
					if ids["r:"+name(i)] == 0 {
						t.Errorf("identity r:%s: not asked about", name(i))
					}
				}
			} else {
				if connect.CodeOf(again) != connect.CodeUnimplemented {
					t.Errorf("a made-up procedure called again: got %v, want unimplemented", again)
				}
				if len(ids) != 0 {
					t.Errorf("identities after %d made-up procedures: got %v, want none", madeUp, ids)
				}
			}

			if err := call(checkProcedure); err != nil {
				t.Errorf("the real procedure after the made-up ones: got %v, want admitted", err)
			}
			if err := call(checkProcedure); connect.CodeOf(err) != connect.CodeResourceExhausted {
				t.Errorf("the real procedure again: got %v, want resource_exhausted (limit 1)", err)
			}
			if n := reached.Load(); n != 1 {
				t.Errorf("handler calls: got %d, want 1 (the real procedure's admitted call)", n)
			}
		})
	}
}
