// Command server serves a connect-go handler limited per client address
// with slideconnect: the standard health service (grpc.health.v1.Health,
// from connectrpc.com/grpchealth) stands in for your own, so the example
// needs no generated code. One handler answers the Connect, gRPC and
// gRPC-Web protocols, over HTTP/1.1 and cleartext HTTP/2.
//
//	go run . -addr 127.0.0.1:8080 -limit 3 -window 1m
//
// Check and Watch are limited to -limit calls per -window per client
// address; try it with the client next to this file (../client), with
// -protocol connect, grpc or grpcweb. A denial is resource_exhausted with a
// RetryInfo detail and the RateLimit, Retry-After and
// grpc-retry-pushback-ms metadata. In a real server, skip health checks
// instead:
// httplimit.WithSkipFunc(httplimit.SkipPaths("/grpc.health.v1.Health/Check")).
// With -metrics-addr, GET /metrics on that address serves the limiter's
// Prometheus metrics; an address that cannot be bound makes the server
// exit with the error. A call is denied before its body is read
// (Interceptor.Handler), and a body is read up to 64 KiB
// (connect.WithReadMaxBytes).
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

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
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
	slideconnect "github.com/slidelog/slidelog/adapters/connect"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/prommetrics"
	"github.com/slidelog/slidelog/core/redisstore"
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
		slog.Error("connect example", "err", err)
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

	// limit.Handler denies a call before its body is read; the
	// interceptor sends the admitted calls' rate-limit headers. connect-go
	// reads a request without limit unless told: 64 KiB is plenty here.
	limit := slideconnect.NewInterceptor(l)
	path, health := grpchealth.NewHandler(grpchealth.NewStaticChecker(),
		connect.WithInterceptors(limit), connect.WithReadMaxBytes(64<<10))
	mux := http.NewServeMux()
	mux.Handle(path, limit.Handler(health))
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true) // gRPC clients speak HTTP/2; use TLS in production
	return serve(addr, &http.Server{Handler: mux, Protocols: protocols, ReadHeaderTimeout: 5 * time.Second})
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

// serve serves srv on addr until SIGINT or SIGTERM, then shuts down
// gracefully, giving in-flight calls 10 seconds to finish.
func serve(addr string, srv *http.Server) error {
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
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return errors.Join(err, srv.Close())
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
