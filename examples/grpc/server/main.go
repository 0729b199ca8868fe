// Command server serves gRPC limited per client address with slidegrpc:
// the standard health service (grpc.health.v1.Health) stands in for your
// own, so the example needs no generated code.
//
//	go run . -addr 127.0.0.1:50051 -limit 3 -window 1m
//
// Check and Watch are limited to -limit calls per -window per client
// address; try it with the client next to this file (../client), or with
// any gRPC client: a denial is a trailers-only RESOURCE_EXHAUSTED with
// RetryInfo and grpc-retry-pushback-ms, which grpc-go's retry policy
// obeys. In a real
// server, skip health checks instead:
// httplimit.WithSkipFunc(httplimit.SkipPaths("/grpc.health.v1.Health/Check")).
// With -metrics-addr, GET /metrics on that address serves the limiter's
// Prometheus metrics; an address that cannot be bound makes the server
// exit with the error. A call's message is read up to 64 KiB
// (grpc.MaxRecvMsgSize).
//
// The limits live in process memory unless SLIDELOG_REDIS_ADDRS lists
// Redis addresses (host:port or redis:// URLs; one address is enough for a
// standalone Redis or a Redis Cluster: redisstore.Connect asks the
// server; redis+sentinel://host:port,.../MASTERNAME for a master that
// Sentinels monitor). SLIDELOG_KEY_PREFIX, when set, replaces the Redis key prefix;
// SLIDELOG_KEY_SECRET sets the secret of the Redis keys' HMAC. A Redis
// that does not answer, or addresses that do not fit the server, make the
// server exit with the error. SIGINT or SIGTERM stops it gracefully.
//
// This file stands alone: copy it into a module of your own.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	slidegrpc "github.com/slidelog/slidelog/adapters/grpc"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/prommetrics"
	"github.com/slidelog/slidelog/core/redisstore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func main() {
	addr := flag.String("addr", ":8080", "listen address")
	limit := flag.Int("limit", 10, "calls allowed per client address per window")
	window := flag.Duration("window", time.Minute, "length of the sliding window")
	metricsAddr := flag.String("metrics-addr", "", "listen address of the Prometheus /metrics endpoint (none if empty)")
	flag.Usage = usage
	flag.Parse()
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, nil)))

	if err := run(*addr, *metricsAddr, slidelog.Policy{Name: policyName(*window), Limit: *limit, Window: *window}); err != nil {
		slog.Error("grpc example", "err", err)
		os.Exit(1)
	}
	slog.Info("stopped")
}

// envHelp lists the environment variables the example reads, for -h.
const envHelp = `
Environment:
  SLIDELOG_REDIS_ADDRS  Redis that instances share the limit through: host:port or
                        redis:// / rediss:// URLs, comma-separated. One address is
                        enough for a standalone Redis or a Redis Cluster (the server
                        is asked which it is); a master that Sentinels monitor is
                        redis+sentinel://host:port[,host:port…]/MASTERNAME.
                        Unset: limits in process memory.
                        The example exits with the error when no Redis answers or
                        the addresses do not fit the server.
  SLIDELOG_KEY_PREFIX   prefix of the Redis keys (default "slidelog:")
  SLIDELOG_KEY_SECRET   secret of the HMAC that turns client addresses into Redis
                        keys; give every instance the same one
`

// usage prints the flags and the environment variables.
func usage() {
	out := flag.CommandLine.Output()
	fmt.Fprintf(out, "Usage: %s [flags]\n\nFlags:\n", os.Args[0])
	flag.PrintDefaults()
	fmt.Fprint(out, envHelp)
}

func run(addr, metricsAddr string, policy slidelog.Policy) (err error) {
	store, closeStore, err := openStore()
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeStore()) }()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	l, err := slidelog.New(store, policy, slidelog.WithName("hello"), slidelog.WithObserver(prommetrics.New(reg)))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, l.Close()) }()
	stopMetrics, err := serveMetrics(metricsAddr, reg)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stopMetrics()) }()

	// The interceptors send every denial with its metadata, the pushback
	// that grpc-go's retry policy waits (try the client's -retry), but
	// decide after grpc-go has read the call's message: keep that read
	// small. slidegrpc.ServerOption(l) decides before reading, its
	// denials without metadata.
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(slidegrpc.UnaryServerInterceptor(l)),
		grpc.ChainStreamInterceptor(slidegrpc.StreamServerInterceptor(l)),
		grpc.MaxRecvMsgSize(64<<10), // health checks are a few bytes; the default is 4 MB
	)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	return serve(addr, srv)
}

// serveMetrics serves GET /metrics of reg on addr (nothing when addr is
// empty) and returns a function that stops it. An address that cannot be
// bound is an error, so that the example exits instead of running
// without its metrics.
func serveMetrics(addr string, reg *prometheus.Registry) (func() error, error) {
	if addr == "" {
		return func() error { return nil }, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	slog.Info("metrics", "addr", ln.Addr().String())
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			slog.Error("metrics server", "err", err)
		}
	}()
	return func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(ctx)
	}, nil
}

// openStore returns the Redis store when SLIDELOG_REDIS_ADDRS lists
// addresses, the memory store otherwise, and a function that closes it and
// its Redis client. redisstore.Connect asks the server whether it is a
// Redis Cluster node, and redisstore.New fails when no Redis answers or
// the client does not fit the server: the example then exits with the
// error instead of enforcing each instance's limit on its own.
func openStore() (slidelog.Store, func() error, error) {
	env := strings.TrimSpace(os.Getenv("SLIDELOG_REDIS_ADDRS"))
	addrs := strings.FieldsFunc(env, func(r rune) bool { return r == ',' || r == ' ' })
	if strings.Contains(env, "+sentinel://") {
		addrs = []string{env} // one URL, naming every Sentinel
	}
	if len(addrs) == 0 {
		slog.Info("store", "kind", "memory")
		store := memstore.New()
		return store, store.Close, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	client, err := redisstore.Connect(ctx, addrs...)
	if err != nil {
		return nil, nil, err
	}
	switch c := client.(type) {
	case *redis.ClusterClient:
		slog.Info("store", "kind", "redis-cluster", "seeds", strings.Join(c.Options().Addrs, ","))
	case *redis.Client:
		if c.Options().Addr == "FailoverClient" {
			slog.Info("store", "kind", "redis-sentinel")
			break
		}
		slog.Info("store", "kind", "redis", "addr", c.Options().Addr)
	}
	var opts []redisstore.Option
	if prefix, ok := os.LookupEnv("SLIDELOG_KEY_PREFIX"); ok {
		opts = append(opts, redisstore.WithKeyPrefix(prefix))
	}
	if secret := os.Getenv("SLIDELOG_KEY_SECRET"); secret != "" {
		opts = append(opts, redisstore.WithKeySecret([]byte(secret)))
	} else {
		slog.Warn("SLIDELOG_KEY_SECRET is not set: Redis keys are an unkeyed HMAC of the client address; set the same secret on every instance")
	}
	store, err := redisstore.New(client, opts...)
	if err != nil {
		return nil, nil, errors.Join(err, client.Close())
	}
	return store, func() error { return errors.Join(store.Close(), client.Close()) }, nil
}

// policyName names a policy of one second, minute or hour as
// slidelog.PerSecond, PerMinute and PerHour do ("per-minute"), and any
// other after its window ("per-1m30s").
func policyName(window time.Duration) string {
	switch window {
	case time.Second:
		return "per-second"
	case time.Minute:
		return "per-minute"
	case time.Hour:
		return "per-hour"
	}
	return "per-" + window.String()
}

// serve serves srv on addr until SIGINT or SIGTERM, then stops gracefully,
// giving in-flight calls 10 seconds to finish.
func serve(addr string, srv *grpc.Server) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	slog.Info("listening", "addr", ln.Addr().String())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	slog.Info("shutting down")
	timer := time.AfterFunc(10*time.Second, srv.Stop) // in-flight calls took too long: end them
	defer timer.Stop()
	srv.GracefulStop()
	return <-served
}
