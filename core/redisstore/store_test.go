package redisstore_test

import (
	"crypto/tls"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newRedisStore returns a Store on client under a key prefix of its own,
// whose keys are deleted when the test ends.
func newRedisStore(t *testing.T, client redis.UniversalClient, opts ...redisstore.Option) *redisstore.Store {
	t.Helper()
	opts = append([]redisstore.Option{redisstore.WithKeyPrefix(redistest.KeyPrefix(t, client))}, opts...)
	s, err := redisstore.New(client, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// ownClient returns a NewStoreFunc whose stores each run on a client of
// their own, made by newClient and closed after the store, with opts
// after the suite's clock.
func ownClient(newClient func(t *testing.T) redis.UniversalClient, opts ...redisstore.Option) slidelogtest.NewStoreFunc {
	return func(t *testing.T, clock func() time.Time) slidelog.Store {
		client := newClient(t)
		t.Cleanup(func() { _ = client.Close() }) // after the store's cleanups
		return newRedisStore(t, client, append([]redisstore.Option{redisstore.WithClock(clock)}, opts...)...)
	}
}

// sharedClient runs the store suite with stall on stores that share one
// client, made by newClient, with the long stall timeout: stores that
// cannot break off the client's connections.
func sharedClient(t *testing.T, newClient func(t *testing.T) redis.UniversalClient, stall slidelogtest.StoreSuiteOption) {
	shared := newClient(t)
	t.Cleanup(func() { _ = shared.Close() })
	slidelogtest.RunStoreSuite(t, func(t *testing.T, clock func() time.Time) slidelog.Store {
		return newRedisStore(t, shared, redisstore.WithClock(clock), longStall)
	}, stall)
}

// longStall is a stall timeout far beyond the store suite's bound on a
// call after its context ends: only the end of its context ends a call in
// time.
var longStall = redisstore.WithStallTimeout(5 * time.Second)

// On a Redis of the test's own, which the Stalled cases stop (SIGSTOP)
// and resume (SIGCONT), a call whose context ends while the server is
// stopped returns soon after, with an error: on a client of the store's
// own with go-redis's plain options, which leave a context's end to the
// store, or with ClientOptions; and on one client shared by the suite's
// stores, whose connections they cannot break off (a sender goroutine
// carries each call). On a client of their own, a call after the first of
// a case finds the first one's connection broken off and dials another (a
// pool miss), and waits for the new connection's handshake, which
// go-redis's plain options leave deaf to the context: with the default
// stall timeout the stall judgement ends that wait, about 150 ms after
// the stop (measured: 116 ms after a deadline that passed 40 ms after the
// stop); with WithStallTimeout(5s) (PlainOptionsLongStallTimeout), the
// call breaks off the handshakes the node has left unanswered for 250 ms
// (212 ms after its deadline; before, 5 s). TestStoreConformanceStoppedCluster
// and TestStoreConformanceStoppedSentinel do the same on a Cluster and
// behind Sentinels of their own. The shared servers are never stopped:
// other packages' tests use them.
func TestStoreConformanceStoppedServer(t *testing.T) {
	t.Parallel() // servers of its own: see ownServers
	srv := redistest.StartServer(t, redistest.ServerConfig{})
	stall := stopServer(srv)
	client := func(o func() *redis.Options) func(*testing.T) redis.UniversalClient {
		return func(*testing.T) redis.UniversalClient { return redis.NewClient(o()) }
	}
	plain := client(func() *redis.Options { return &redis.Options{Addr: srv.Addr} })
	t.Run("PlainOptions", func(t *testing.T) {
		slidelogtest.RunStoreSuite(t, ownClient(plain), stall)
	})
	t.Run("ClientOptions", func(t *testing.T) {
		slidelogtest.RunStoreSuite(t, ownClient(client(func() *redis.Options { return redisstore.ClientOptions(srv.Addr) })), stall)
	})
	t.Run("TLSLongStallTimeout", func(t *testing.T) {
		// The same over TLS, through a TLS-terminating proxy in front of
		// the server: the TLS hello is answered, the server's is not.
		certFile, keyFile, pool := selfSigned(t, t.TempDir())
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		require.NoError(t, err)
		for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
			t.Run(tls.VersionName(version), func(t *testing.T) {
				proxy := tlsProxy(t, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: version, MaxVersion: version}, srv.Addr)
				overTLS := client(func() *redis.Options {
					return &redis.Options{Addr: proxy, TLSConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
				})
				slidelogtest.RunStoreSuite(t, ownClient(overTLS, longStall), stall)
			})
		}
	})
	t.Run("PlainOptionsLongStallTimeout", func(t *testing.T) {
		// Only the end of its context ends a call in time, here too while
		// it waits for a new connection's handshake.
		slidelogtest.RunStoreSuite(t, ownClient(plain, longStall), stall)
	})
	t.Run("SharedClient", func(t *testing.T) {
		// A store that passed the context on as context.WithoutCancel
		// fails here, and passes with the default stall timeout.
		sharedClient(t, plain, stall)
	})
	t.Run("UnixSocket", func(t *testing.T) {
		// The same over a Unix socket, whose kernel keeps the bytes the
		// node sent that wait unread (SIOCINQ), though no time of their
		// arrival: the store reads that record as it reads TCP's.
		sock := filepath.Join(t.TempDir(), "redis.sock")
		usrv := redistest.StartServer(t, redistest.ServerConfig{Args: []string{"--unixsocket", sock, "--unixsocketperm", "700"}})
		overUnix := client(func() *redis.Options { return &redis.Options{Network: "unix", Addr: sock} })
		t.Run("PlainOptions", func(t *testing.T) {
			slidelogtest.RunStoreSuite(t, ownClient(overUnix), stopServer(usrv))
		})
		t.Run("PlainOptionsLongStallTimeout", func(t *testing.T) {
			slidelogtest.RunStoreSuite(t, ownClient(overUnix, longStall), stopServer(usrv))
		})
	})
}

// stopServer is the store suite's stall of srv: SIGSTOP, and SIGCONT to
// resume it.
func stopServer(srv *redistest.Server) slidelogtest.StoreSuiteOption {
	return slidelogtest.WithStall(func(t *testing.T) (resume func()) {
		require.NoError(t, srv.Signal(syscall.SIGSTOP))
		return func() {
			if err := srv.Signal(syscall.SIGCONT); err != nil {
				t.Errorf("resuming the server: %v", err)
			}
		}
	})
}

// TestStoreConformanceStoppedSentinel runs the suite on a Sentinel set of
// the test's own (a master, a replica, three Sentinels), through a failover
// client: the Stalled cases stop the master (SIGSTOP) and resume it, and
// a call whose context ends meanwhile returns soon after with an error,
// as on one server, on a client made by Connect from the set's
// redis+sentinel:// URL, on one with go-redis's plain FailoverOptions,
// and on one failover client shared by the suite's stores with a 5 s
// stall timeout. The Sentinels' down-after is a minute, far beyond a
// stall of the suite, so that none fails the master over; the test
// checks that the master is the same after the suite.
func TestStoreConformanceStoppedSentinel(t *testing.T) {
	t.Parallel() // servers of its own: see ownServers
	bed := redistest.StartSentinels(t, redistest.SentinelConfig{DownAfter: time.Minute, FailoverTimeout: 2 * time.Minute})
	master := bed.Master.Addr
	defer func() {
		if now := bed.MasterAddr(t.Context()); now != master {
			t.Errorf("the Sentinels name %q as master after the suite, want %s: a failover during the test", now, master)
		}
	}()
	stall := slidelogtest.WithStall(func(t *testing.T) (resume func()) {
		require.NoError(t, bed.Master.Signal(syscall.SIGSTOP))
		return func() {
			if err := bed.Master.Signal(syscall.SIGCONT); err != nil {
				t.Errorf("resuming the master: %v", err)
			}
		}
	})
	plain := func(*testing.T) redis.UniversalClient {
		return redis.NewFailoverClient(&redis.FailoverOptions{MasterName: bed.Name, SentinelAddrs: bed.Addrs()})
	}
	t.Run("Connect", func(t *testing.T) {
		slidelogtest.RunStoreSuite(t, ownClient(func(t *testing.T) redis.UniversalClient {
			client, err := redisstore.Connect(t.Context(), bed.URL())
			require.NoError(t, err)
			return client
		}), stall)
	})
	t.Run("PlainOptions", func(t *testing.T) {
		slidelogtest.RunStoreSuite(t, ownClient(plain), stall)
	})
	t.Run("PlainOptionsLongStallTimeout", func(t *testing.T) {
		slidelogtest.RunStoreSuite(t, ownClient(plain, longStall), stall)
	})
	t.Run("SharedClient", func(t *testing.T) {
		sharedClient(t, plain, stall)
	})
}

// TestStoreConformanceStoppedCluster runs the suite on a Redis Cluster of
// the test's own, whose masters the Stalled cases all stop (SIGSTOP) and resume
// (SIGCONT): a call whose context ends while they are stopped returns
// soon after, with an error, as on one server, on a ClusterClient of the
// store's own with go-redis's plain options or with ClusterOptions, and
// on one ClusterClient shared by the suite's stores (measured as on one
// server: about 116 ms after a deadline on a client of the store's own,
// under 2 ms otherwise). The node timeout is a minute, far beyond a
// stall of the suite, so that no replica takes over a stopped master;
// the test checks that none did. The shared Cluster is never stopped:
// other packages' tests use it.
func TestStoreConformanceStoppedCluster(t *testing.T) {
	t.Parallel() // servers of its own: see ownServers
	cl := redistest.StartCluster(t, redistest.ClusterConfig{Masters: 3, Replicas: 1, NodeTimeout: time.Minute})
	masters := cl.Nodes[:cl.Masters]
	defer func() {
		for _, m := range masters {
			admin := redis.NewClient(&redis.Options{Addr: m.Addr})
			info, err := admin.Info(t.Context(), "replication").Result()
			_ = admin.Close()
			if role := redistest.InfoField(info, "role"); err != nil || role != "master" {
				t.Errorf("master %s after the suite: role %q (%v); a failover during the test", m.Addr, role, err)
			}
		}
	}()
	stall := slidelogtest.WithStall(func(t *testing.T) (resume func()) {
		for i, m := range masters {
			if err := m.Signal(syscall.SIGSTOP); err != nil {
				for _, stopped := range masters[:i] {
					_ = stopped.Signal(syscall.SIGCONT)
				}
				t.Fatalf("stopping master %s: %v", m.Addr, err)
			}
		}
		return func() {
			for _, m := range masters {
				if err := m.Signal(syscall.SIGCONT); err != nil {
					t.Errorf("resuming master %s: %v", m.Addr, err)
				}
			}
		}
	})
	client := func(o func() *redis.ClusterOptions) func(*testing.T) redis.UniversalClient {
		return func(*testing.T) redis.UniversalClient { return redis.NewClusterClient(o()) }
	}
	plain := client(func() *redis.ClusterOptions { return &redis.ClusterOptions{Addrs: cl.Addrs()} })
	t.Run("PlainOptions", func(t *testing.T) {
		slidelogtest.RunStoreSuite(t, ownClient(plain), stall)
	})
	t.Run("ClusterOptions", func(t *testing.T) {
		slidelogtest.RunStoreSuite(t, ownClient(client(func() *redis.ClusterOptions { return redisstore.ClusterOptions(cl.Addrs()...) })), stall)
	})
	t.Run("PlainOptionsLongStallTimeout", func(t *testing.T) {
		slidelogtest.RunStoreSuite(t, ownClient(plain, longStall), stall)
	})
	t.Run("SharedClient", func(t *testing.T) {
		// As on one server: only the end of its context ends a call in
		// time.
		sharedClient(t, plain, stall)
	})
}

// The script variant for Redis 6.2 (no #!lua line) passes the same suite.
func TestStoreConformanceLegacyScript(t *testing.T) {
	for name, client := range map[string]redis.UniversalClient{
		"Standalone": redistest.RedisClient(t),
		"Cluster":    redistest.ClusterClient(t),
	} {
		t.Run(name, func(t *testing.T) {
			slidelogtest.RunStoreSuite(t, func(t *testing.T, clock func() time.Time) slidelog.Store {
				s := newRedisStore(t, client, redisstore.WithClock(clock))
				redisstore.UseLegacyScript(s)
				t.Cleanup(func() {
					if !redisstore.UsesLegacyScript(s) {
						t.Error("the store no longer runs the Redis 6.2 variant")
					}
				})
				return s
			})
		})
	}
}

// New reads the server version and picks the script variant: the test
// servers run Redis 7, so a store set to the 6.2 variant is set back.
func TestNewDetectsRedisVersion(t *testing.T) {
	// The test servers all run one binary: the Redis 6.2 variant is
	// wanted exactly when it is Redis 6.2.
	info, err := redistest.RedisClient(t).Info(t.Context(), "server").Result()
	require.NoError(t, err)
	server := serverVersionLine(info)
	want := strings.HasPrefix(server, "redis 6.")
	for name, client := range map[string]redis.UniversalClient{
		"Standalone": redistest.RedisClient(t),
		"Cluster":    redistest.ClusterClient(t),
	} {
		t.Run(name, func(t *testing.T) {
			s, err := redisstore.NewUnchecked(client, redisstore.WithKeyPrefix(redistest.KeyPrefix(t, client)))
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			redisstore.SetLegacyScript(s, !want)
			require.NoError(t, redisstore.Check(s))
			assert.Equal(t, want, redisstore.UsesLegacyScript(s), "on %s after New's checks: runs the Redis 6.2 variant", server)
		})
	}
}
