// Command echo serves GET /hello limited per client IP with slideecho,
// and GET /healthz and GET /readyz unlimited.
//
//	go run . -addr :8080 -metrics-addr 127.0.0.1:9090 -limit 10 -window 1m
//
// GET /readyz answers 503 while the limiter's decisions go to its failure
// mode (Redis unreachable, a breaker open), 200 otherwise. With
// -metrics-addr, GET /metrics on that address, apart from the public port,
// serves the limiter's Prometheus metrics.
//
// The limits live in process memory unless SLIDELOG_REDIS_ADDRS lists
// Redis addresses (host:port or redis:// URLs; one address is enough for a
// standalone Redis or a Redis Cluster; redis+sentinel://host:port,.../MASTERNAME
// for a master that Sentinels monitor). SLIDELOG_KEY_PREFIX, when set,
// replaces the Redis key prefix; SLIDELOG_KEY_SECRET sets the secret of
// the Redis keys' HMAC. A Redis that does not answer, or addresses that do
// not fit the server, make the example exit with the error. -h lists the
// flags and environment variables. SIGINT or SIGTERM stops the server
// gracefully.
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

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	slideecho "github.com/slidelog/slidelog/adapters/echo"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/prommetrics"
	"github.com/slidelog/slidelog/core/readiness"
	"github.com/slidelog/slidelog/core/redisstore"
)

func main() {
	addr := flag.String("addr", ":8080", "listen address of /hello, /healthz and /readyz")
	metricsAddr := flag.String("metrics-addr", "", "listen address of the Prometheus /metrics endpoint, apart from the public port (none if empty)")
	limit := flag.Int("limit", 10, "requests allowed per client IP per window on /hello")
	window := flag.Duration("window", time.Minute, "length of the sliding window")
	flag.Usage = usage
	flag.Parse()
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, nil)))

	if err := run(*addr, *metricsAddr, slidelog.Policy{Name: policyName(*window), Limit: *limit, Window: *window}); err != nil {
		slog.Error("echo example", "err", err)
		os.Exit(1)
	}
	slog.Info("stopped")
}

func run(addr, metricsAddr string, policy slidelog.Policy) (err error) {
	store, closeStore, err := openStore()
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeStore()) }()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ready := readiness.New()
	l, err := slidelog.New(store, policy, slidelog.WithName("hello"), slidelog.WithObserver(prommetrics.New(reg)), slidelog.WithObserver(ready))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, l.Close()) }()
	stopMetrics, err := serveMetrics(metricsAddr, reg)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stopMetrics()) }()

	e := echo.New()
	e.IPExtractor = echo.ExtractIPDirect() // no proxy: c.RealIP() is the socket address, as for the limiter
	e.Use(slideecho.Middleware(l, httplimit.WithSkipFunc(httplimit.SkipPaths("/healthz", "/readyz"))))
	e.GET("/hello", func(c echo.Context) error { return c.String(http.StatusOK, "hello\n") })
	e.GET("/healthz", func(c echo.Context) error { return c.String(http.StatusOK, "ok\n") })
	e.GET("/readyz", echo.WrapHandler(ready))
	return serve(addr, e)
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

// serveMetrics serves reg's metrics at GET /metrics on addr, apart from
// the public port (the breaker gauge names Redis node addresses), and
// returns a function that shuts that server down. An empty addr serves
// nothing.
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

// envHelp lists the environment variables the example reads, for -h.
const envHelp = `
Environment:
  SLIDELOG_REDIS_ADDRS  Redis that instances share the limit through: host:port or
                        redis:// / rediss:// URLs, comma-separated. One address is
                        enough for a standalone Redis or a Redis Cluster (the server
                        is asked which it is); a master that Sentinels monitor is
                        redis+sentinel://host:port[,host:port…]/MASTERNAME. Unset: limits in process memory.
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
