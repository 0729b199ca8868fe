package slidegrpc_test

import (
	"context"
	"fmt"
	"net"
	"time"

	slidegrpc "github.com/slidelog/slidelog/adapters/grpc"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/memstore"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Limit every method to 2 calls per minute per client address, on a real
// server; the third call fails with ResourceExhausted and a RetryInfo, in
// a trailers-only response whose trailer carries the rate-limit metadata
// and grpc-retry-pushback-ms (which grpc-go's retry policy obeys).
func Example() {
	store := memstore.New()
	defer store.Close()
	l, err := slidelog.New(store, slidelog.Policy{Name: "api", Limit: 2, Window: time.Minute})
	if err != nil {
		panic(err)
	}
	defer l.Close()

	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(slidegrpc.UnaryServerInterceptor(l)),
		grpc.ChainStreamInterceptor(slidegrpc.StreamServerInterceptor(l)),
	)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	for range 3 {
		var header, trailer metadata.MD
		_, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{}, grpc.Header(&header), grpc.Trailer(&trailer))
		st := status.Convert(err)
		if err != nil {
			header = trailer // a denial sends its metadata as trailers only
		}
		fmt.Println(st.Code(), header.Get("ratelimit"), header.Get("retry-after"))
		for _, d := range st.Details() {
			if ri, ok := d.(*errdetails.RetryInfo); ok {
				fmt.Println("retry in", ri.GetRetryDelay().AsDuration().Round(time.Minute))
			}
		}
	}
	// Output:
	// OK ["api";r=1;t=60] []
	// OK ["api";r=0;t=60] []
	// ResourceExhausted ["api";r=0;t=60] [60]
	// retry in 1m0s
}

// The common case in one statement: every method, unary or streaming,
// limited to 100 calls per minute per client address, in memory.
func ExampleLimitByPeer() {
	srv := grpc.NewServer(slidegrpc.LimitByPeer(slidelog.PerMinute(100)))
	defer srv.Stop()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	fmt.Println(len(srv.GetServiceInfo()), "service")
	// Output: 1 service
}

// Per-method costs and limiters: Search costs 5 units of the shared
// budget of 100 per minute; Pay has its own, tighter policy.
func ExampleWithMethodLimiters() {
	store := memstore.New()
	defer store.Close()
	shared, _ := slidelog.New(store, slidelog.PerMinute(100))
	defer shared.Close()
	payments, _ := slidelog.New(store, slidelog.Policy{Name: "payments", Limit: 5, Window: time.Minute})
	defer payments.Close()

	interceptor := slidegrpc.UnaryServerInterceptor(shared,
		slidegrpc.WithMethodCosts(map[string]int{"/shop.Catalog/Search": 5}),
		slidegrpc.WithMethodLimiters(map[string]*slidelog.Limiter{"/shop.Checkout/Pay": payments}),
	)
	// Call the interceptor as a server would, from one client address.
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 4242}})
	handler := func(context.Context, any) (any, error) { return "done", nil }
	admitted := func(method string, calls int) int {
		n := 0
		for range calls {
			if _, err := interceptor(ctx, nil, &grpc.UnaryServerInfo{FullMethod: method}, handler); err == nil {
				n++
			}
		}
		return n
	}
	fmt.Println("Search admitted:", admitted("/shop.Catalog/Search", 30))
	fmt.Println("Pay admitted:", admitted("/shop.Checkout/Pay", 30))
	// Output:
	// Search admitted: 20
	// Pay admitted: 5
}

// ServerOption decides each call when its headers arrive, before its
// message is read: the second call is denied with ResourceExhausted and
// its RetryInfo, in a trailers-only response without metadata.
func ExampleServerOption() {
	store := memstore.New()
	defer store.Close()
	l, err := slidelog.New(store, slidelog.Policy{Name: "api", Limit: 1, Window: time.Minute})
	if err != nil {
		panic(err)
	}
	defer l.Close()

	srv := grpc.NewServer(slidegrpc.ServerOption(l), grpc.MaxRecvMsgSize(1<<20))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	for range 2 {
		var header metadata.MD
		_, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{}, grpc.Header(&header))
		st := status.Convert(err)
		fmt.Println(st.Code(), header.Get("ratelimit"))
		for _, d := range st.Details() {
			if ri, ok := d.(*errdetails.RetryInfo); ok {
				fmt.Println("retry in", ri.GetRetryDelay().AsDuration().Round(time.Minute))
			}
		}
	}
	// Output:
	// OK ["api";r=0;t=60]
	// ResourceExhausted []
	// retry in 1m0s
}
