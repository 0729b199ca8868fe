package redisstore_test

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
)

// fromOtherLoopback dials from 127.0.0.2: a client Redis does not count
// as local in protected mode (only 127.0.0.1 and ::1 are), though the
// connection stays on this machine.
func fromOtherLoopback(ctx context.Context, network, addr string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Timeout: time.Second}
	return d.DialContext(ctx, network, addr)
}

// deniesOtherLoopback reports whether the server at addr refuses a client
// from 127.0.0.2 in protected mode, as it says when it accepts the
// connection. Redis 7 does (only 127.0.0.1 and ::1 are local to it), and
// there the test bed must produce it: it fails the test otherwise. Redis
// 6.2 applies protected mode only without a bind address (the test
// servers bind 127.0.0.1) and Valkey counts all of 127.0.0.0/8 as local:
// with them no client on this machine is refused, and a caller checks
// that New then starts, inventing no refusal.
func deniesOtherLoopback(t *testing.T, addr string) bool {
	t.Helper()
	c, err := fromOtherLoopback(t.Context(), "tcp", addr)
	require.NoError(t, err)
	defer func() { _ = c.Close() }()
	_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	buf := make([]byte, 64)
	n, _ := c.Read(buf)
	denied := strings.HasPrefix(string(buf[:n]), "-DENIED")

	admin := redis.NewClient(&redis.Options{Addr: addr})
	defer func() { _ = admin.Close() }()
	info, err := admin.Info(t.Context(), "server").Result()
	require.NoError(t, err)
	redis7 := !strings.Contains(info, "valkey") && !strings.Contains(info, "redis_version:6.")
	require.True(t, denied || !redis7, "%s: a Redis 7 in protected mode did not refuse a client from 127.0.0.2 (%q): the test cannot see a refusal", addr, buf[:n])
	t.Logf("%s refuses a client from 127.0.0.2: %v", addr, denied)
	return denied
}

// newErr runs New on client and returns its error and how long it took.
func newErr(t *testing.T, client redis.UniversalClient) (time.Duration, error) {
	t.Helper()
	t.Cleanup(func() { _ = client.Close() })
	start := time.Now()
	store, err := redisstore.New(client, redisstore.WithLogger(slog.New(slog.DiscardHandler)))
	took := time.Since(start)
	if store != nil {
		_ = store.Close()
	}
	t.Logf("New: %v (after %v)", err, took.Round(time.Millisecond))
	return took, err
}

// A Redis that refuses a client the moment it connects (protected mode:
// no password and a client from another host; maxclients reached) sends
// one error line and closes the connection. A client that writes first
// sees EOF or a broken pipe; New and Connect name the server's own
// refusal and the address instead.
func TestNewNamesServerRefusal(t *testing.T) {
	protected := redistest.StartServer(t, redistest.ServerConfig{Args: []string{"--protected-mode", "yes"}})
	full := redistest.StartServer(t, redistest.ServerConfig{Args: []string{"--maxclients", "1"}})
	holder := redis.NewClient(&redis.Options{Addr: full.Addr, PoolSize: 1})
	t.Cleanup(func() { _ = holder.Close() })
	require.NoError(t, holder.Ping(t.Context()).Err(), "the one client the server takes")

	for _, tc := range []struct {
		name string
		addr string
		want []string
	}{
		{"protected mode", protected.Addr, []string{"DENIED", "protected mode"}},
		{"maxclients", full.Addr, []string{"max number of clients reached"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refuses := tc.name != "protected mode" || deniesOtherLoopback(t, tc.addr)
			// taken is what New gives when the server takes the client:
			// nil, or ErrTopology for a ClusterClient on this standalone
			// server.
			check := func(t *testing.T, err error, took time.Duration, taken ...error) {
				t.Helper()
				if !refuses {
					if len(taken) > 0 {
						require.ErrorIs(t, err, taken[0], "a server that takes the client")
					} else {
						require.NoError(t, err, "a server that takes the client")
					}
					return
				}
				require.ErrorIs(t, err, redisstore.ErrUnreachable)
				assert.Contains(t, err.Error(), tc.addr)
				for _, w := range tc.want {
					assert.Contains(t, err.Error(), w)
				}
				assert.Less(t, took, startBound)
			}
			t.Run("New", func(t *testing.T) {
				o := redisstore.ClientOptions(tc.addr)
				o.Dialer = fromOtherLoopback
				took, err := newErr(t, redis.NewClient(o))
				check(t, err, took)
			})
			t.Run("New, plain go-redis options", func(t *testing.T) {
				took, err := newErr(t, redis.NewClient(&redis.Options{Addr: tc.addr, Dialer: fromOtherLoopback}))
				check(t, err, took)
			})
			t.Run("New, ClusterClient", func(t *testing.T) {
				o := redisstore.ClusterOptions(tc.addr)
				o.Dialer = fromOtherLoopback
				took, err := newErr(t, redis.NewClusterClient(o))
				check(t, err, took, redisstore.ErrTopology)
			})
			if tc.name == "maxclients" {
				t.Run("Connect", func(t *testing.T) {
					start := time.Now()
					c, err := redisstore.Connect(t.Context(), tc.addr)
					if c != nil {
						_ = c.Close()
					}
					t.Logf("Connect: %v", err)
					check(t, err, time.Since(start))
				})
			}
		})
	}
}

// A Cluster node in protected mode refuses a client from another host
// as a standalone server does: New names the refusal and the node.
func TestNewNamesClusterNodeRefusal(t *testing.T) {
	cl := redistest.StartCluster(t, redistest.ClusterConfig{Masters: 1, Args: []string{"--protected-mode", "yes"}})
	refuses := deniesOtherLoopback(t, cl.Addrs()[0])
	o := redisstore.ClusterOptions(cl.Addrs()...)
	o.Dialer = fromOtherLoopback
	took, err := newErr(t, redis.NewClusterClient(o))
	if !refuses {
		// The one-node Cluster names itself ":port", which a client
		// bound to 127.0.0.2 cannot dial: New may fail for that, but never
		// on a refusal the server did not make.
		if err != nil {
			assert.NotContains(t, err.Error(), "refused the connection")
			assert.NotContains(t, err.Error(), "protected mode")
		}
		return
	}
	require.ErrorIs(t, err, redisstore.ErrUnreachable)
	assert.Contains(t, err.Error(), cl.Addrs()[0])
	assert.Contains(t, err.Error(), "protected mode")
	assert.Less(t, took, startBound)
}

// A Cluster master that refuses the client's password while the others
// take it is a misconfiguration, which no failover mends: New fails with
// ErrUnreachable naming that master and its answer, rather than start
// and send its slots' decisions to the failure mode.
func TestNewFailsOnClusterMasterRefusingPassword(t *testing.T) {
	cl := redistest.StartCluster(t, redistest.ClusterConfig{Masters: 2})
	for i, n := range cl.Nodes {
		pass := "pw"
		if i == 0 {
			pass = "other"
		}
		admin := redis.NewClient(&redis.Options{Addr: n.Addr})
		require.NoError(t, admin.ConfigSet(t.Context(), "requirepass", pass).Err())
		_ = admin.Close()
	}
	o := redisstore.ClusterOptions(cl.Addrs()...)
	o.Password = "pw"
	took, err := newErr(t, redis.NewClusterClient(o))
	require.ErrorIs(t, err, redisstore.ErrUnreachable)
	assert.Contains(t, err.Error(), cl.Nodes[0].Addr)
	assert.Contains(t, err.Error(), "WRONGPASS")
	assert.Less(t, took, startBound)
}

// The refusal of a server at its maxclients is named the same way over a
// Unix socket (New on a client of network "unix", and Connect with a
// unix:// URL) and behind Sentinels (New on go-redis's failover client,
// and on Connect's from a redis+sentinel:// URL): the error wraps
// ErrUnreachable and names the server (the socket's path; the master the
// Sentinels name) and its refusal.
func TestNewNamesRefusalOverUnixAndSentinels(t *testing.T) {
	t.Parallel() // servers of its own: see ownServers
	check := func(t *testing.T, err error, took time.Duration, addr string) {
		t.Helper()
		require.ErrorIs(t, err, redisstore.ErrUnreachable)
		assert.Contains(t, err.Error(), addr)
		assert.Contains(t, err.Error(), "max number of clients reached")
		assert.Less(t, took, startBound)
	}
	t.Run("UnixSocket", func(t *testing.T) {
		sock := filepath.Join(t.TempDir(), "redis.sock")
		redistest.StartServer(t, redistest.ServerConfig{Args: []string{"--unixsocket", sock, "--unixsocketperm", "700", "--maxclients", "1"}})
		holder := redis.NewClient(&redis.Options{Network: "unix", Addr: sock, PoolSize: 1})
		t.Cleanup(func() { _ = holder.Close() })
		require.NoError(t, holder.Ping(t.Context()).Err(), "the one client the server takes")
		t.Run("New", func(t *testing.T) {
			took, err := newErr(t, redis.NewClient(&redis.Options{Network: "unix", Addr: sock}))
			check(t, err, took, sock)
		})
		t.Run("Connect", func(t *testing.T) {
			start := time.Now()
			c, err := redisstore.Connect(t.Context(), "unix://"+sock)
			if c != nil {
				_ = c.Close()
			}
			t.Logf("Connect: %v", err)
			check(t, err, time.Since(start), sock)
		})
	})
	t.Run("Sentinel", func(t *testing.T) {
		bed := redistest.StartSentinels(t, redistest.SentinelConfig{DownAfter: time.Minute, FailoverTimeout: 2 * time.Minute})
		admin := redis.NewClient(&redis.Options{Addr: bed.Master.Addr})
		t.Cleanup(func() { _ = admin.Close() })
		// The master takes no client beyond those it has (its replica's
		// and the Sentinels').
		info, err := admin.Info(t.Context(), "clients").Result()
		require.NoError(t, err)
		require.NoError(t, admin.ConfigSet(t.Context(), "maxclients", redistest.InfoField(info, "connected_clients")).Err())
		t.Run("New, failover client", func(t *testing.T) {
			took, err := newErr(t, redis.NewFailoverClient(&redis.FailoverOptions{MasterName: bed.Name, SentinelAddrs: bed.Addrs()}))
			check(t, err, took, bed.Master.Addr)
		})
		t.Run("Connect", func(t *testing.T) {
			start := time.Now()
			c, err := redisstore.Connect(t.Context(), bed.URL())
			if err == nil {
				// Connect asks the Sentinels, which answer; New then
				// meets the master.
				var s *redisstore.Store
				s, err = redisstore.New(c, redisstore.WithLogger(slog.New(slog.DiscardHandler)))
				if s != nil {
					_ = s.Close()
				}
				_ = c.Close()
			}
			t.Logf("Connect, then New: %v", err)
			check(t, err, time.Since(start), bed.Master.Addr)
		})
	})
}
