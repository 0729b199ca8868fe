// Command gin serves GET /hello limited per client IP with slidegin, and
// GET /healthz and GET /metrics (Prometheus) unlimited.
//
//	go run . -addr :8080 -limit 10 -window 1m
//
// The limits live in process memory unless SLIDELOG_REDIS_ADDRS lists
// Redis addresses: one for a standalone Redis, several (comma-separated)
// for a Redis Cluster. SLIDELOG_KEY_PREFIX, when set, replaces the Redis
// key prefix. SIGINT or SIGTERM stops the server gracefully.
//
// This file stands alone: copy it into a module of your own.
package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	slidegin "github.com/slidelog/slidelog/adapters/gin"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/prommetrics"
	"github.com/slidelog/slidelog/core/redisstore"
)

func main() {
	addr := flag.String("addr", ":8080", "listen address")
	limit := flag.Int("limit", 10, "requests allowed per client IP per window on /hello")
	window := flag.Duration("window", time.Minute, "length of the sliding window")
	flag.Parse()
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, nil)))

	if err := run(*addr, slidelog.Policy{Name: policyName(*window), Limit: *limit, Window: *window}); err != nil {
		slog.Error("gin example", "err", err)
		os.Exit(1)
	}
	slog.Info("stopped")
}

func run(addr string, policy slidelog.Policy) (err error) {
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

	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	_ = r.SetTrustedProxies(nil) // no proxy: c.ClientIP() is the socket address, as for the limiter
	r.Use(slidegin.Middleware(l, httplimit.WithSkipFunc(httplimit.SkipPaths("/healthz", "/metrics"))))
	r.GET("/hello", func(c *gin.Context) { c.String(http.StatusOK, "hello\n") })
	r.GET("/healthz", func(c *gin.Context) { c.String(http.StatusOK, "ok\n") })
	r.GET("/metrics", gin.WrapH(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
	return serve(addr, r)
}

// openStore returns the Redis store when SLIDELOG_REDIS_ADDRS lists
// addresses, the memory store otherwise, and a function that closes it and
// its Redis client.
func openStore() (slidelog.Store, func() error, error) {
	addrs := strings.FieldsFunc(os.Getenv("SLIDELOG_REDIS_ADDRS"), func(r rune) bool { return r == ',' || r == ' ' })
	var client redis.UniversalClient
	switch len(addrs) {
	case 0:
		slog.Info("store", "kind", "memory")
		store := memstore.New()
		return store, store.Close, nil
	case 1:
		slog.Info("store", "kind", "redis", "addr", addrs[0])
		client = redis.NewClient(redisstore.ClientOptions(addrs[0]))
	default:
		slog.Info("store", "kind", "redis-cluster", "addrs", strings.Join(addrs, ","))
		client = redis.NewClusterClient(redisstore.ClusterOptions(addrs...))
	}
	var opts []redisstore.Option
	if prefix, ok := os.LookupEnv("SLIDELOG_KEY_PREFIX"); ok {
		opts = append(opts, redisstore.WithKeyPrefix(prefix))
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

// serve serves h on addr until SIGINT or SIGTERM, then shuts down,
// giving in-flight requests 10 seconds to finish.
func serve(addr string, h http.Handler) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	slog.Info("listening", "addr", ln.Addr().String())
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	slog.Info("shutting down")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(ctx)
}
