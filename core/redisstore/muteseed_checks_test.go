package redisstore_test

import (
	"context"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
)

// With a seed that accepts TCP but never answers, listed (first) with
// seeds that answer, New still runs the checks after reaching the
// Cluster on the masters that answer, with go-redis's plain options
// (3 s read timeout, no ContextTimeoutEnabled) as with ClusterOptions: a
// user without a command the store needs on one master fails New with
// ErrPermission naming it, and an evicting maxmemory-policy on one master
// fails it with ErrUnsafeConfig under WithStrictConfig, naming it. They
// used to be skipped, logged as "could not ...", or New failed with
// ErrUnreachable, whenever go-redis's own requests to the silent seed
// used up the check's second of silence (10 of 12 starts with plain
// options, in 4 runs). Run it with -count=8: go-redis tries the seeds in
// an order of its own.
func TestClusterMuteSeedStillChecksMasters(t *testing.T) {
	t.Parallel() // servers of its own: see ownServers
	cl := redistest.StartCluster(t, redistest.ClusterConfig{Masters: 3})
	mute := muteSeed(t)
	seeds := append([]string{mute}, cl.Addrs()...)
	ctx := t.Context()

	user, pass := "slidelog-muteseed", "pw"
	admins := map[string]*redis.Client{}
	for _, n := range cl.Nodes {
		a := redis.NewClient(&redis.Options{Addr: n.Addr})
		t.Cleanup(func() { _ = a.Close() })
		admins[n.Addr] = a
		require.NoError(t, a.Do(ctx, "acl", "setuser", user, "reset", "on", ">"+pass, "~*", "&*", "+@all").Err())
	}
	master := cl.Nodes[1].Addr // not the first live seed

	clients := map[string]func() *redis.ClusterOptions{
		"plain go-redis options":    func() *redis.ClusterOptions { return &redis.ClusterOptions{Addrs: seeds} },
		"redisstore.ClusterOptions": func() *redis.ClusterOptions { return redisstore.ClusterOptions(seeds...) },
	}
	newStore := func(t *testing.T, o *redis.ClusterOptions, opts ...redisstore.Option) (*captured, error) {
		t.Helper()
		logs := &captured{}
		c := redis.NewClusterClient(o)
		t.Cleanup(func() { _ = c.Close() })
		start := time.Now()
		s, err := redisstore.New(c, append(opts, redisstore.WithLogger(slog.New(logs)))...)
		took := time.Since(start)
		t.Logf("New: %v (after %v); logged:\n%s", err, took.Round(time.Millisecond), strings.Join(logs.all(), "\n"))
		if err == nil {
			t.Cleanup(func() { _ = s.Close() })
		}
		assert.NotContains(t, strings.Join(logs.all(), "\n"), "could not", "a check was skipped")
		return logs, err
	}
	for name, options := range clients {
		t.Run(name, func(t *testing.T) {
			t.Run("healthy", func(t *testing.T) {
				logs, err := newStore(t, options())
				require.NoError(t, err)
				assert.Contains(t, strings.Join(logs.all(), "\n"), "seed="+mute)
			})
			t.Run("a master's user without ZADD", func(t *testing.T) {
				require.NoError(t, admins[master].Do(ctx, "acl", "setuser", user, "-zadd").Err())
				t.Cleanup(func() {
					_ = admins[master].Do(context.Background(), "acl", "setuser", user, "+zadd").Err()
				})
				o := options()
				o.Username, o.Password = user, pass
				_, err := newStore(t, o)
				require.ErrorIs(t, err, redisstore.ErrPermission)
				assert.Contains(t, err.Error(), master+": the user may not run ZADD,")
			})
			t.Run("a master's maxmemory-policy allkeys-lru", func(t *testing.T) {
				require.NoError(t, admins[master].ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err())
				t.Cleanup(func() {
					_ = admins[master].ConfigSet(context.Background(), "maxmemory-policy", "noeviction").Err()
				})
				_, err := newStore(t, options(), redisstore.WithStrictConfig())
				require.ErrorIs(t, err, redisstore.ErrUnsafeConfig)
				assert.Contains(t, err.Error(), master+" has maxmemory-policy allkeys-lru")
			})
		})
	}
}

// A Cluster master that accepts connections but is stopped (SIGSTOP) is
// judged silent once, when it has not answered within the client's read
// timeout (a second at most), and logged at ERROR naming it; New starts
// without waiting on it again in each later check (it used to take about
// 10 s, the stopped master's read timeouts retried through the version
// and configuration checks), with go-redis's plain options as with
// ClusterOptions. Its node timeout is long enough that the other nodes do
// not mark it failed while the test runs.
func TestClusterStoppedMasterIsSilentOnce(t *testing.T) {
	t.Parallel() // servers of its own: see ownServers
	cl := redistest.StartCluster(t, redistest.ClusterConfig{Masters: 3, NodeTimeout: time.Minute})
	stopped := cl.Nodes[1]
	clients := map[string]func() *redis.ClusterOptions{
		"plain go-redis options":    func() *redis.ClusterOptions { return &redis.ClusterOptions{Addrs: cl.Addrs()} },
		"redisstore.ClusterOptions": func() *redis.ClusterOptions { return redisstore.ClusterOptions(cl.Addrs()...) },
	}
	require.NoError(t, stopped.Signal(syscall.SIGSTOP))
	t.Cleanup(func() { _ = stopped.Signal(syscall.SIGCONT) })
	for name, options := range clients {
		t.Run(name, func(t *testing.T) {
			logs := &captured{}
			c := redis.NewClusterClient(options())
			t.Cleanup(func() { _ = c.Close() })
			start := time.Now()
			s, err := redisstore.New(c, redisstore.WithLogger(slog.New(logs)))
			took := time.Since(start)
			t.Logf("New: %v (after %v); logged:\n%s", err, took.Round(time.Millisecond), strings.Join(logs.all(), "\n"))
			require.NoError(t, err, "one master of three stopped")
			t.Cleanup(func() { _ = s.Close() })
			errs := logs.errorsLogged()
			require.Len(t, errs, 1, "one ERROR record, naming the stopped master")
			assert.Contains(t, errs[0], stopped.Addr)
			assert.Contains(t, errs[0], "does not answer")
			assert.NotContains(t, strings.Join(logs.all(), "\n"), "could not", "a check was skipped")
			assert.Less(t, took, stoppedMasterBound, "New waited on the stopped master")
		})
	}
}

// stoppedMasterBound is how long New may take with a stopped master: the
// second in which it may wait for the master's answer, once, and the
// checks of the others, with room for a busy machine.
const stoppedMasterBound = 3 * time.Second
