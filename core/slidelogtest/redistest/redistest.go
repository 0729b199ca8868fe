// Package redistest connects tests to the Redis servers the repository's
// Makefile starts: a standalone Redis (SLIDELOG_REDIS_ADDR) and a Redis
// Cluster (SLIDELOG_CLUSTER_ADDRS). When they are unset a test fails with
// the command that starts them (`make cluster-up`); under `go test -short`
// it is skipped instead, unless SLIDELOG_REQUIRE_REDIS is set.
//
// It also starts servers of a test's own, for the tests, benchmarks and
// fault suite that need one to themselves (to stop it, fill its memory,
// kill it): a standalone server or replica (ServerConfig), a Redis
// Cluster with replicas (ClusterConfig), and a Sentinel set
// (SentinelConfig), each with the server binary SLIDELOG_REDIS_SERVER
// names, as scripts/redis-rig.sh does. Their Start methods take a context
// and return an error, for programs; StartServer, StartCluster and
// StartSentinels are the same for tests, stopped when the test ends.
// Servers and Sentinels started without a port take a free one: by
// default from the kernel's ephemeral range, or from the ranges
// SLIDELOG_SERVER_PORTS and SLIDELOG_SENTINEL_PORTS name ("7400-7499"),
// to keep beside other work that owns other ports.
//
// It is apart from package slidelogtest so that tests of memory-only
// programs do not link go-redis.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest"
)

// Environment variables naming the test servers.
const (
	// EnvRedisAddr names a standalone Redis, host:port.
	EnvRedisAddr = "SLIDELOG_REDIS_ADDR"
	// EnvClusterAddrs names the seed nodes of a Redis Cluster,
	// comma-separated host:port.
	EnvClusterAddrs = "SLIDELOG_CLUSTER_ADDRS"
	// EnvRequireRedis, when set, makes a missing server fail a test even
	// under -short. `make test` sets it.
	EnvRequireRedis = "SLIDELOG_REQUIRE_REDIS"
)

const startHint = "start the test servers with `make cluster-up` and then `eval \"$(scripts/redis-rig.sh env)\"` from the repository root, or run everything with `make test`"

func addrsFromEnv(t testing.TB, name string) []string {
	t.Helper()
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		if testing.Short() && os.Getenv(EnvRequireRedis) == "" {
			t.Skipf("%s is not set; %s", name, startHint)
		}
		t.Fatalf("%s is not set: this test needs a real Redis; %s", name, startHint)
	}
	var addrs []string
	for _, a := range strings.Split(v, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	return addrs
}

// RedisClient returns a client of the standalone test Redis, closed when
// the test ends. It fails the test when the server is not configured or
// does not answer.
func RedisClient(t testing.TB) *redis.Client {
	t.Helper()
	c := newRedisClient(t)
	ping(t, c, EnvRedisAddr)
	return c
}

// ClusterClient returns a client of the test Redis Cluster, closed when
// the test ends. It fails the test when the Cluster is not configured or
// does not answer.
func ClusterClient(t testing.TB) *redis.ClusterClient {
	t.Helper()
	c := newClusterClient(t)
	ping(t, c, EnvClusterAddrs)
	return c
}

// newClusterClient returns a client of the test Cluster that has sent no
// command, closed when the test ends.
func newClusterClient(t testing.TB) *redis.ClusterClient {
	t.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrsFromEnv(t, EnvClusterAddrs), MaxRedirects: 8, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// newRedisClient returns a client of the standalone test Redis that has
// sent no command, closed when the test ends.
func newRedisClient(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addrsFromEnv(t, EnvRedisAddr)[0], ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// PlainClients returns the constructors of a fresh client of the
// standalone test Redis and of the test Cluster, by name ("standalone",
// "cluster"), with go-redis's plain options, as users make them. Each
// client it makes has sent no command yet (the servers are checked with
// clients of their own) and is closed when the test ends.
func PlainClients() []struct {
	Name string
	New  func(t testing.TB) redis.UniversalClient
} {
	return []struct {
		Name string
		New  func(t testing.TB) redis.UniversalClient
	}{
		{"standalone", func(t testing.TB) redis.UniversalClient {
			t.Helper()
			RedisClient(t)
			c := redis.NewClient(&redis.Options{Addr: addrsFromEnv(t, EnvRedisAddr)[0]})
			t.Cleanup(func() { _ = c.Close() })
			return c
		}},
		{"cluster", func(t testing.TB) redis.UniversalClient {
			t.Helper()
			ClusterClient(t)
			c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrsFromEnv(t, EnvClusterAddrs)})
			t.Cleanup(func() { _ = c.Close() })
			return c
		}},
	}
}

func ping(t testing.TB, c redis.UniversalClient, env string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("redis at %s=%q does not answer: %v; %s", env, os.Getenv(env), err, startHint)
	}
}

// KeyPrefix returns a key prefix unique to this test and registers a
// cleanup that deletes every key under it, on every master of a Cluster.
// Tests never flush a shared server.
func KeyPrefix(t testing.TB, c redis.UniversalClient) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	prefix := "slidelogtest:" + hex.EncodeToString(b[:]) + ":"
	t.Cleanup(func() { DeleteKeys(t, c, prefix) })
	return prefix
}

// DeleteKeys deletes every key starting with prefix, on every master of a
// Cluster or on the one server of a standalone client.
func DeleteKeys(t testing.TB, c redis.UniversalClient, prefix string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	del := func(ctx context.Context, node redis.UniversalClient) error {
		iter := node.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			if err := node.Del(ctx, iter.Val()).Err(); err != nil {
				return err
			}
		}
		return iter.Err()
	}
	if err := EachMaster(ctx, c, func(ctx context.Context, node *redis.Client) error { return del(ctx, node) }); err != nil {
		t.Logf("deleting test keys %s*: %v", prefix, err)
	}
}

// EachMaster runs fn on every master of a Cluster client, or on the one
// server of a standalone client, and returns the first error.
func EachMaster(ctx context.Context, c redis.UniversalClient, fn func(context.Context, *redis.Client) error) error {
	switch c := c.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, fn)
	case *redis.Client:
		return fn(ctx, c)
	}
	return fmt.Errorf("redistest: a client of an unknown kind (%T)", c)
}

// ClusterStores returns a slidelogtest.NewStoreFunc that builds Redis stores on the
// test Redis Cluster, each under its own key prefix; when its test ends
// the store is closed and its keys are deleted. It fails t when the Cluster is not configured.
//
// Each store is made on a client of its own, which has sent no command
// before the store's New, as the store's documentation asks: the store
// then owns the client's connections and judges a node's silence by the
// kernel's record of them, which a busy test process cannot mistake for
// a stall. (A store on a client that already had connections judges
// silence by its own alive time, and hands each decision to a sender
// goroutine: the suites ran about three times slower so, and a verdict
// on a loaded machine could not be checked against the kernel's record.)
//
// opts are given to redisstore.New after the key prefix and the clock.
func ClusterStores(t *testing.T, opts ...redisstore.Option) slidelogtest.NewStoreFunc {
	t.Helper()
	ClusterClient(t) // configured, and answering
	return redisStores(func(t *testing.T) redis.UniversalClient { return newClusterClient(t) }, opts)
}

// RedisStores is ClusterStores for the standalone test Redis.
func RedisStores(t *testing.T, opts ...redisstore.Option) slidelogtest.NewStoreFunc {
	t.Helper()
	RedisClient(t) // configured, and answering
	return redisStores(func(t *testing.T) redis.UniversalClient { return newRedisClient(t) }, opts)
}

func redisStores(newClient func(t *testing.T) redis.UniversalClient, opts []redisstore.Option) slidelogtest.NewStoreFunc {
	return func(t *testing.T, clock func() time.Time) slidelog.Store {
		t.Helper()
		c := newClient(t)
		s, err := redisstore.New(c, append([]redisstore.Option{redisstore.WithKeyPrefix(KeyPrefix(t, c)), redisstore.WithClock(clock)}, opts...)...)
		if err != nil {
			t.Fatalf("redisstore.New: %v", err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
}
