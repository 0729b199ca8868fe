package slideconnect_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"connectrpc.com/connect"
	slideconnect "github.com/slidelog/slidelog/adapters/connect"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/memstore"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Limit a connect handler to 2 calls per minute per client address; the
// third call fails with resource_exhausted, a RetryInfo detail and the
// rate-limit headers.
func Example() {
	store := memstore.New()
	defer store.Close()
	l, err := slidelog.New(store, slidelog.Policy{Name: "api", Limit: 2, Window: time.Minute})
	if err != nil {
		panic(err)
	}
	defer l.Close()

	const procedure = "/grpc.health.v1.Health/Check"
	mux := http.NewServeMux()
	mux.Handle(procedure, connect.NewUnaryHandler(procedure,
		func(context.Context, *connect.Request[healthpb.HealthCheckRequest]) (*connect.Response[healthpb.HealthCheckResponse], error) {
			return connect.NewResponse(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}), nil
		},
		connect.WithInterceptors(slideconnect.NewInterceptor(l))))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	client := connect.NewClient[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse](srv.Client(), srv.URL+procedure)
	for range 3 {
		resp, err := client.CallUnary(context.Background(), connect.NewRequest(&healthpb.HealthCheckRequest{}))
		var ce *connect.Error
		if errors.As(err, &ce) {
			fmt.Println(ce.Code(), ce.Meta().Get("RateLimit"), ce.Meta().Get("Retry-After"))
			for _, d := range ce.Details() {
				if v, err := d.Value(); err == nil {
					if ri, ok := v.(*errdetails.RetryInfo); ok {
						fmt.Println("retry in", ri.GetRetryDelay().AsDuration().Round(time.Minute))
					}
				}
			}
			continue
		}
		fmt.Println(resp.Msg.GetStatus(), resp.Header().Get("RateLimit"))
	}
	// Output:
	// SERVING "api";r=1;t=60
	// SERVING "api";r=0;t=60
	// resource_exhausted "api";r=0;t=60 60
	// retry in 1m0s
}

// Deny before the body is read: Handler decides each call when its
// headers arrive, and the interceptor given to the same handler sends the
// admitted calls' headers; connect.WithReadMaxBytes bounds what an
// admitted call may send.
func ExampleInterceptor_Handler() {
	store := memstore.New()
	defer store.Close()
	l, err := slidelog.New(store, slidelog.Policy{Name: "api", Limit: 1, Window: time.Minute})
	if err != nil {
		panic(err)
	}
	defer l.Close()

	const procedure = "/grpc.health.v1.Health/Check"
	limit := slideconnect.NewInterceptor(l)
	handler := connect.NewUnaryHandler(procedure,
		func(context.Context, *connect.Request[healthpb.HealthCheckRequest]) (*connect.Response[healthpb.HealthCheckResponse], error) {
			return connect.NewResponse(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}), nil
		},
		connect.WithInterceptors(limit), connect.WithReadMaxBytes(1<<20))
	mux := http.NewServeMux()
	mux.Handle(procedure, limit.Handler(handler))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	client := connect.NewClient[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse](srv.Client(), srv.URL+procedure)
	for range 2 {
		resp, err := client.CallUnary(context.Background(), connect.NewRequest(&healthpb.HealthCheckRequest{}))
		var ce *connect.Error
		if errors.As(err, &ce) {
			fmt.Println(ce.Code(), ce.Meta().Get("RateLimit"), ce.Meta().Get("Retry-After"))
			continue
		}
		fmt.Println(resp.Msg.GetStatus(), resp.Header().Get("RateLimit"))
	}
	// Output:
	// SERVING "api";r=0;t=60
	// resource_exhausted "api";r=0;t=60 60
}
