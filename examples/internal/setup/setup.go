// Package setup is the part of the slidelog examples that does not depend
// on the web framework: flags, the store chosen from the environment, the
// limiter with its Prometheus metrics, and serving with graceful shutdown.
package setup

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
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/prommetrics"
	"github.com/slidelog/slidelog/core/redisstore"
)

// Environment variables the examples read.
const (
	// EnvRedisAddrs holds Redis addresses, comma-separated: one address
	// means a standalone Redis, several a Redis Cluster. Unset or empty:
	// the memory store.
	EnvRedisAddrs = "SLIDELOG_REDIS_ADDRS"
	// EnvKeyPrefix, when set, replaces the Redis key prefix
	// (slidelog.DefaultKeyPrefix), so that runs sharing a Redis do not
	// share logs.
	EnvKeyPrefix = "SLIDELOG_KEY_PREFIX"
)

// Paths the examples serve.
const (
	PathHello   = "/hello"
	PathHealthz = "/healthz"
	PathMetrics = "/metrics"
)

// shutdownTimeout bounds how long in-flight requests may take after
// SIGINT or SIGTERM.
const shutdownTimeout = 10 * time.Second

// App is what an example needs besides its framework: the limiter, the
// metrics handler and a logger. Create it with Start.
type App struct {
	Limiter *slidelog.Limiter
	// Metrics serves the limiter's metrics, and the Go runtime's, in the
	// Prometheus text format.
	Metrics http.Handler
	Log     *slog.Logger

	addr   string
	store  slidelog.Store
	client redis.UniversalClient // nil for the memory store
}

// Skip is the skip function of every example: health checks and metrics
// scrapes are never limited.
var Skip = httplimit.SkipPaths(PathHealthz, PathMetrics)

// Start parses the flags -addr, -limit and -window, opens the store
// EnvRedisAddrs names and returns the app; it exits the process on a bad
// flag or configuration. name is the framework, for the log.
func Start(name string) *App {
	addr := flag.String("addr", ":8080", "listen address")
	limit := flag.Int("limit", 10, "requests allowed per client IP per window on "+PathHello)
	window := flag.Duration("window", time.Minute, "length of the sliding window")
	flag.Parse()

	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("example", name)
	slog.SetDefault(log)
	app, err := newApp(log, *addr, *limit, *window)
	if err != nil {
		log.Error("start", "err", err)
		os.Exit(2)
	}
	return app
}

func newApp(log *slog.Logger, addr string, limit int, window time.Duration) (*App, error) {
	app := &App{Log: log, addr: addr}
	var store slidelog.Store
	addrs := splitAddrs(os.Getenv(EnvRedisAddrs))
	switch len(addrs) {
	case 0:
		store = memstore.New()
		log.Info("store", "kind", "memory")
	case 1:
		app.client = redis.NewClient(redisstore.ClientOptions(addrs[0]))
		log.Info("store", "kind", "redis", "addr", addrs[0])
	default:
		app.client = redis.NewClusterClient(redisstore.ClusterOptions(addrs...))
		log.Info("store", "kind", "redis-cluster", "addrs", strings.Join(addrs, ","))
	}
	if app.client != nil {
		var opts []redisstore.Option
		if p, ok := os.LookupEnv(EnvKeyPrefix); ok {
			opts = append(opts, redisstore.WithKeyPrefix(p))
		}
		rs, err := redisstore.New(app.client, opts...)
		if err != nil {
			_ = app.client.Close()
			return nil, err
		}
		store = rs
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	l, err := slidelog.New(store, policy(limit, window),
		slidelog.WithName("hello"), slidelog.WithObserver(prommetrics.New(reg)), slidelog.WithLogger(log))
	if err != nil {
		_ = store.Close()
		if app.client != nil {
			_ = app.client.Close()
		}
		return nil, err
	}
	app.Limiter = l
	app.store = store
	app.Metrics = promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
	return app, nil
}

// policy names the policy after its window when it is a second, a minute
// or an hour, as in RateLimit-Policy: "per-minute";q=10;w=60.
func policy(limit int, window time.Duration) slidelog.Policy {
	switch window {
	case time.Second:
		return slidelog.PerSecond(limit)
	case time.Minute:
		return slidelog.PerMinute(limit)
	case time.Hour:
		return slidelog.PerHour(limit)
	}
	return slidelog.Policy{Name: "per-" + window.String(), Limit: limit, Window: window}
}

func splitAddrs(s string) []string {
	var addrs []string
	for a := range strings.SplitSeq(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	return addrs
}

// ServeHTTP serves h (a gin engine, an echo instance, a chi router) with
// net/http until SIGINT or SIGTERM, then shuts down gracefully; see Serve.
func (a *App) ServeHTTP(h http.Handler) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	a.Serve(srv.Serve, srv.Shutdown)
}

// Serve listens on -addr, logs the address it listens on, and runs serve
// on the listener until SIGINT or SIGTERM. Then it calls shutdown, which
// must make serve return after in-flight requests, closes the limiter and
// the Redis client, and exits the process (status 1 if serving failed).
func (a *App) Serve(serve func(net.Listener) error, shutdown func(context.Context) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	ln, err := net.Listen("tcp", a.addr)
	if err != nil {
		a.fail(fmt.Errorf("listen: %w", err))
	}
	a.Log.Info("listening", "addr", ln.Addr().String())
	served := make(chan error, 1)
	go func() { served <- serve(ln) }()

	select {
	case err = <-served:
		// serve stopped without a signal.
	case <-ctx.Done():
		a.Log.Info("shutting down")
		sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		err = shutdown(sctx)
		cancel()
		if serr := <-served; err == nil {
			err = serr
		}
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	if cerr := a.close(); err == nil {
		err = cerr
	}
	if err != nil {
		a.fail(err)
	}
	a.Log.Info("stopped")
}

func (a *App) close() error {
	err := errors.Join(a.Limiter.Close(), a.store.Close()) // the limiter does not close its store
	if a.client != nil {
		err = errors.Join(err, a.client.Close())
	}
	return err
}

func (a *App) fail(err error) {
	a.Log.Error("serve", "err", err)
	_ = a.close()
	os.Exit(1)
}
