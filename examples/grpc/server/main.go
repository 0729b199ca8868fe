// Command server serves gRPC limited per client address with slidegrpc:
// the standard health service (grpc.health.v1.Health) stands in for your
// own, so the example needs no generated code.
//
//	go run ./grpc/server -addr 127.0.0.1:50051 -limit 3 -window 1m
//
// Check and Watch are limited to -limit calls per -window per client
// address. SLIDELOG_REDIS_ADDRS selects Redis (one address) or a Redis
// Cluster (several, comma-separated); unset, the memory store. Try it with
// ./grpc/client. In a real server, skip health checks instead:
// httplimit.WithSkipFunc(httplimit.SkipPaths("/grpc.health.v1.Health/Check")).
package main

import (
	"context"

	slidegrpc "github.com/slidelog/slidelog/adapters/grpc"
	"github.com/slidelog/slidelog/examples/internal/setup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func main() {
	app := setup.Start("grpc")

	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(slidegrpc.UnaryServerInterceptor(app.Limiter)),
		grpc.ChainStreamInterceptor(slidegrpc.StreamServerInterceptor(app.Limiter)),
	)
	healthpb.RegisterHealthServer(srv, health.NewServer())

	app.Serve(srv.Serve, func(ctx context.Context) error {
		stopped := make(chan struct{})
		go func() { srv.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-ctx.Done():
			srv.Stop() // in-flight calls took too long: end them
			<-stopped
		}
		return nil
	})
}
