package redisstore_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/prommetrics"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
)

// lossWatch is one process's view of a store: its limiter, with
// Prometheus metrics of its own, and its store's log.
type lossWatch struct {
	store   *redisstore.Store
	limiter *slidelog.Limiter
	reg     *prometheus.Registry
	logs    *captured
}

func newLossWatch(t *testing.T, client redis.UniversalClient, name string) *lossWatch {
	t.Helper()
	w := &lossWatch{reg: prometheus.NewRegistry(), logs: &captured{}}
	var err error
	w.store, err = redisstore.New(client, redisstore.WithLogger(slog.New(w.logs)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.store.Close() })
	w.limiter, err = slidelog.New(w.store, slidelog.Policy{Name: "p", Limit: 1_000_000, Window: time.Minute},
		slidelog.WithName(name), slidelog.WithFailureMode(slidelog.FailOpen),
		slidelog.WithObserver(prommetrics.New(w.reg)), slidelog.WithLogger(slog.New(w.logs)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.limiter.Close() })
	return w
}

// decide makes one decision on each of a few keys, so that every master
// of a Cluster sees some.
func (w *lossWatch) decide(t *testing.T) {
	for i := range 8 {
		_, err := w.limiter.Allow(context.Background(), fmt.Sprintf("key-%d", i))
		require.NoError(t, err)
	}
}

// events returns slidelog_store_events_total by node, for event
// data_lost.
func (w *lossWatch) events(t *testing.T) map[string]float64 {
	t.Helper()
	families, err := w.reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != prommetrics.MetricStoreEvents {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["event"] == string(slidelog.EventDataLost) {
				out[labels["node"]] += m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// lossLines returns the ERROR records that report a lost master.
func (w *lossWatch) lossLines() []string {
	var out []string
	for _, l := range w.logs.errorsLogged() {
		if strings.Contains(l, "lost the store's keys") {
			out = append(out, l)
		}
	}
	return out
}

// decideFor makes decisions on every watch for d.
func decideFor(t *testing.T, d time.Duration, ws ...*lossWatch) {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		for _, w := range ws {
			w.decide(t)
		}
	}
}

// decideUntil makes decisions on every watch until each reports a loss,
// for at most 15 s.
func decideUntil(t *testing.T, ws ...*lossWatch) {
	t.Helper()
	end := time.Now().Add(15 * time.Second)
	for {
		done := true
		for _, w := range ws {
			w.decide(t)
			done = done && len(w.lossLines()) > 0
		}
		if done {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("no loss reported within 15 s of decisions")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A master that lost its keys is reported, by a log line at ERROR naming
// it and by the limiters' metrics (slidelog_store_events_total with
// event data_lost), by every process deciding on it: the one that finds
// the canary gone and the ones that find it written anew. A master that
// did not lose its keys is never reported, and a loss once only.
func TestLostDataIsReported(t *testing.T) {
	t.Parallel() // servers of its own: see ownServers
	t.Run("Standalone", func(t *testing.T) {
		srv := redistest.StartServer(t, redistest.ServerConfig{})
		client := redis.NewClient(redisstore.ClientOptions(srv.Addr))
		t.Cleanup(func() { _ = client.Close() })
		a, b := newLossWatch(t, client, "a"), newLossWatch(t, client, "b")

		decideFor(t, 1500*time.Millisecond, a, b)
		require.Empty(t, a.lossLines(), "a healthy server reported as having lost its keys")
		require.Empty(t, b.lossLines(), "a healthy server reported as having lost its keys")
		require.Empty(t, a.events(t))

		// Restarted without persistence: it comes back empty.
		srv.Kill()
		require.NoError(t, srv.Restart(t.Context()))
		decideUntil(t, a, b)
		decideFor(t, 1500*time.Millisecond, a, b)
		for _, w := range []*lossWatch{a, b} {
			lines := w.lossLines()
			require.Len(t, lines, 1, "one loss, reported once: %q", lines)
			assert.Contains(t, lines[0], "node="+srv.Addr)
			assert.Equal(t, map[string]float64{srv.Addr: 1}, w.events(t))
		}
		found := a.lossLines()[0] + b.lossLines()[0]
		assert.Contains(t, found, "found=gone", "one process found the canary gone")
		t.Logf("a: %s\nb: %s", a.lossLines()[0], b.lossLines()[0])

		// An operator's FLUSHALL is a loss too.
		admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
		t.Cleanup(func() { _ = admin.Close() })
		require.NoError(t, admin.FlushAll(t.Context()).Err())
		end := time.Now().Add(15 * time.Second)
		for len(a.lossLines()) < 2 || len(b.lossLines()) < 2 {
			require.True(t, time.Now().Before(end), "FLUSHALL not reported within 15 s")
			a.decide(t)
			b.decide(t)
			time.Sleep(50 * time.Millisecond)
		}
		assert.Equal(t, map[string]float64{srv.Addr: 2}, a.events(t))
		assert.Equal(t, map[string]float64{srv.Addr: 2}, b.events(t))
	})

	t.Run("PersistentRestart", func(t *testing.T) {
		// With persistence the restarted server reloads its keys, the
		// canary among them: no loss, however the restart went.
		srv := redistest.StartServer(t, redistest.ServerConfig{Args: []string{"--appendonly", "yes", "--appendfsync", "always"}})
		client := redis.NewClient(redisstore.ClientOptions(srv.Addr))
		t.Cleanup(func() { _ = client.Close() })
		w := newLossWatch(t, client, "aof")
		decideFor(t, 1500*time.Millisecond, w)
		srv.Kill()
		require.NoError(t, srv.Restart(t.Context()))
		require.Eventually(t, func() bool {
			_, err := client.Ping(t.Context()).Result()
			return err == nil
		}, 10*time.Second, 50*time.Millisecond)
		decideFor(t, 2*time.Second, w)
		assert.Empty(t, w.lossLines(), "a restart that reloaded the keys reported as a loss")
		assert.Empty(t, w.events(t))
	})

	t.Run("Sentinel", func(t *testing.T) {
		// Down-after far longer than the restart: the Sentinels keep the
		// restarted master, which its replica then copies, empty.
		bed := redistest.StartSentinels(t, redistest.SentinelConfig{DownAfter: time.Minute})
		client, err := redisstore.Connect(t.Context(), bed.URL())
		require.NoError(t, err)
		t.Cleanup(func() { _ = client.Close() })
		w := newLossWatch(t, client, "s")
		decideFor(t, 1500*time.Millisecond, w)
		require.Empty(t, w.lossLines(), "a healthy master reported as having lost its keys")

		bed.Master.Kill()
		require.NoError(t, bed.Master.Restart(t.Context()))
		decideUntil(t, w)
		decideFor(t, 1500*time.Millisecond, w)
		lines := w.lossLines()
		require.Len(t, lines, 1, "one loss, reported once: %q", lines)
		assert.Contains(t, lines[0], "node="+bed.Master.Addr)
		assert.Equal(t, map[string]float64{bed.Master.Addr: 1}, w.events(t))
	})

	t.Run("Ring", func(t *testing.T) {
		a, b := redistest.StartServer(t, redistest.ServerConfig{}), redistest.StartServer(t, redistest.ServerConfig{})
		client := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": a.Addr, "b": b.Addr}})
		t.Cleanup(func() { _ = client.Close() })
		w := newLossWatch(t, client, "r")
		decideFor(t, 1500*time.Millisecond, w)
		require.Empty(t, w.lossLines(), "healthy shards reported as having lost their keys")

		admin := redis.NewClient(&redis.Options{Addr: b.Addr})
		t.Cleanup(func() { _ = admin.Close() })
		require.NoError(t, admin.FlushAll(t.Context()).Err())
		decideUntil(t, w)
		decideFor(t, 1500*time.Millisecond, w)
		lines := w.lossLines()
		require.Len(t, lines, 1, "one loss, reported once: %q", lines)
		assert.Contains(t, lines[0], "node="+b.Addr)
		assert.Equal(t, map[string]float64{b.Addr: 1}, w.events(t), "only the flushed shard")
	})

	t.Run("Cluster", func(t *testing.T) {
		// No replicas, and a node timeout of a minute: the restarted
		// master keeps its slots, with no data.
		cl := redistest.StartCluster(t, redistest.ClusterConfig{Masters: 3, NodeTimeout: time.Minute})
		client := redis.NewClusterClient(redisstore.ClusterOptions(cl.Addrs()...))
		t.Cleanup(func() { _ = client.Close() })
		w := newLossWatch(t, client, "c")
		decideFor(t, 1500*time.Millisecond, w)
		require.Empty(t, w.lossLines(), "a healthy Cluster reported as having lost keys")

		lost := cl.Nodes[1]
		lost.Kill()
		require.NoError(t, lost.Restart(t.Context()))
		decideUntil(t, w)
		decideFor(t, 1500*time.Millisecond, w)
		lines := w.lossLines()
		require.Len(t, lines, 1, "one loss, reported once: %q", lines)
		assert.Contains(t, lines[0], "node="+lost.Addr)
		assert.Contains(t, lines[0], "found=gone")
		assert.Equal(t, map[string]float64{lost.Addr: 1}, w.events(t), "only the restarted master")
	})
}

// A canary of another type (a damaged key) is written again with a
// warning, and is no loss; a canary deleted (the store's keys deleted
// under its prefix) is one.
func TestDamagedCanary(t *testing.T) {
	client := redistest.RedisClient(t)
	prefix := redistest.KeyPrefix(t, client)
	logs := &captured{}
	s, err := redisstore.New(client, redisstore.WithKeyPrefix(prefix), redisstore.WithLogger(slog.New(logs)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	l, err := slidelog.New(s, slidelog.PerMinute(1_000_000), slidelog.WithName("damaged"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	w := &lossWatch{store: s, limiter: l, logs: logs}
	canary := prefix + "canary"
	require.Equal(t, int64(1), client.Exists(t.Context(), canary).Val(), "New wrote the canary")

	require.NoError(t, client.Del(t.Context(), canary).Err())
	require.NoError(t, client.HSet(t.Context(), canary, "f", 1).Err())
	require.Eventually(t, func() bool {
		w.decide(t)
		return client.Type(t.Context(), canary).Val() == "string"
	}, 10*time.Second, 50*time.Millisecond, "the damaged canary written again")
	// The store writes the canary, then logs: a busy machine can run the
	// test between the two.
	assert.Eventually(t, func() bool { return logs.has("canary key held another type") },
		5*time.Second, 10*time.Millisecond, "the damaged canary is logged")
	decideFor(t, 1500*time.Millisecond, w)
	require.Empty(t, w.lossLines(), "a damaged canary reported as a loss")

	require.NoError(t, client.Del(t.Context(), canary).Err())
	decideUntil(t, w)
	assert.Contains(t, w.lossLines()[0], "found=gone")
}

// A failover loses no keys the canary names: the promoted replica holds
// the canary it copied, so neither a coordinated failover (CLUSTER
// FAILOVER) nor a master's crash and its replica's promotion is reported
// as a loss.
func TestFailoverIsNoLoss(t *testing.T) {
	t.Parallel() // servers of its own: see ownServers
	cl := redistest.StartCluster(t, redistest.ClusterConfig{Masters: 3, Replicas: 1})
	client := redis.NewClusterClient(redisstore.ClusterOptions(cl.Addrs()...))
	t.Cleanup(func() { _ = client.Close() })
	w := newLossWatch(t, client, "f")
	decideFor(t, 1500*time.Millisecond, w)

	// The replica of master 0 takes over, the two in step.
	replica := cl.Nodes[cl.Masters]
	admin := redis.NewClient(&redis.Options{Addr: replica.Addr})
	t.Cleanup(func() { _ = admin.Close() })
	require.NoError(t, admin.Do(t.Context(), "CLUSTER", "FAILOVER").Err())
	require.Eventually(t, func() bool {
		return strings.Contains(admin.Info(t.Context(), "replication").Val(), "role:master")
	}, 20*time.Second, 50*time.Millisecond, "CLUSTER FAILOVER on %s", replica.Addr)
	decideFor(t, 2*time.Second, w)

	// The new master crashes: the old one, now its replica, is promoted
	// after the node timeout.
	replica.Kill()
	old := redis.NewClient(&redis.Options{Addr: cl.Nodes[0].Addr})
	t.Cleanup(func() { _ = old.Close() })
	require.Eventually(t, func() bool {
		w.decide(t)
		return strings.Contains(old.Info(t.Context(), "replication").Val(), "role:master")
	}, 30*time.Second, 50*time.Millisecond, "the old master promoted again")
	decideFor(t, 2*time.Second, w)
	assert.Empty(t, w.lossLines(), "a failover reported as a loss")
	assert.Empty(t, w.events(t))
}

// A Sentinel failover is no loss: the replica the Sentinels promote holds
// the master's keys, canary included, and the store, which follows the
// Sentinels to it, reads the canary there as it was.
func TestSentinelFailoverIsNoLoss(t *testing.T) {
	t.Parallel() // servers of its own: see ownServers
	bed := redistest.StartSentinels(t, redistest.SentinelConfig{})
	client, err := redisstore.Connect(t.Context(), bed.URL())
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	w := newLossWatch(t, client, "sf")
	decideFor(t, 1500*time.Millisecond, w)

	// The master crashes; the Sentinels promote its replica after
	// down-after (2 s).
	bed.Master.Kill()
	require.Eventually(t, func() bool {
		w.decide(t)
		return bed.MasterAddr(t.Context()) == bed.Replica.Addr
	}, 30*time.Second, 50*time.Millisecond, "the Sentinels promoted %s", bed.Replica.Addr)
	// Decisions reach the new master, then at least one reading of its
	// canary (one a second) follows.
	require.Eventually(t, func() bool {
		d, err := w.limiter.Allow(t.Context(), "after")
		return err == nil && d.Source == redisstore.Source
	}, 20*time.Second, 50*time.Millisecond, "decisions never reached the new master")
	decideFor(t, 2*time.Second, w)
	assert.Empty(t, w.lossLines(), "a Sentinel failover reported as a loss")
	assert.Empty(t, w.events(t))
}

// A reshard is no loss: the slot holding a master's canary moves to
// another master with its keys, canary included, and the store goes on
// reading it there, by its key.
func TestReshardIsNoLoss(t *testing.T) {
	t.Parallel() // servers of its own: see ownServers
	cl := redistest.StartCluster(t, redistest.ClusterConfig{Masters: 3, NodeTimeout: time.Minute})
	client := redis.NewClusterClient(redisstore.ClusterOptions(cl.Addrs()...))
	t.Cleanup(func() { _ = client.Close() })
	w := newLossWatch(t, client, "reshard")
	decideFor(t, 1500*time.Millisecond, w)

	// Slot 0, master 0's first, where its canary is, moves to master 1.
	const slot = 0
	admins := make([]*redis.Client, cl.Masters)
	ids := make([]string, cl.Masters)
	for i := range admins {
		admins[i] = redis.NewClient(&redis.Options{Addr: cl.Nodes[i].Addr})
		t.Cleanup(func() { _ = admins[i].Close() })
		var err error
		ids[i], err = admins[i].ClusterMyID(t.Context()).Result()
		require.NoError(t, err)
	}
	src, dst := admins[0], admins[1]
	keys, err := src.ClusterGetKeysInSlot(t.Context(), slot, 1000).Result()
	require.NoError(t, err)
	require.NotEmpty(t, keys, "the canary is in slot %d", slot)
	require.NoError(t, dst.Do(t.Context(), "cluster", "setslot", slot, "importing", ids[0]).Err())
	require.NoError(t, src.Do(t.Context(), "cluster", "setslot", slot, "migrating", ids[1]).Err())
	args := []any{"migrate", "127.0.0.1", cl.Nodes[1].Port, "", 0, 5000, "keys"}
	for _, k := range keys {
		args = append(args, k)
	}
	require.NoError(t, src.Do(t.Context(), args...).Err())
	for _, a := range admins {
		require.NoError(t, a.Do(t.Context(), "cluster", "setslot", slot, "node", ids[1]).Err())
	}
	require.Eventually(t, func() bool {
		n, err := client.MasterForKey(t.Context(), keys[0])
		w.decide(t)
		return err == nil && n.Options().Addr == cl.Nodes[1].Addr
	}, 20*time.Second, 50*time.Millisecond, "the client finds slot %d on master 1", slot)
	decideFor(t, 2*time.Second, w)
	assert.Empty(t, w.lossLines(), "a reshard reported as a loss")
	assert.Empty(t, w.events(t))
	t.Logf("moved %q", keys)
}

// The store's Cluster hash slot of a key is the server's (CLUSTER
// KEYSLOT), so that each canary lands on the master it names.
func TestCanarySlotIsTheServers(t *testing.T) {
	client := redistest.ClusterClient(t)
	for i := range 300 {
		key := fmt.Sprintf("c%d-%x", i, i*7919)
		want, err := client.ClusterKeySlot(t.Context(), key).Result()
		require.NoError(t, err)
		require.EqualValues(t, want, redisstore.KeySlot(key), "key %q", key)
	}
}

// A master New could not check is checked when it first answers, and so
// is a replica promoted since, which New never saw: an evicting
// maxmemory-policy on either is logged, naming it, as New logs it on the
// masters it checks.
func TestLateCheck(t *testing.T) {
	t.Parallel() // servers of its own: see ownServers
	evicting := func(w *lossWatch, addr string) bool {
		for _, r := range w.logs.all() {
			if strings.Contains(r, "evicting maxmemory-policy") && strings.Contains(r, addr) {
				return true
			}
		}
		return false
	}
	t.Run("DownAtNew", func(t *testing.T) {
		cl := redistest.StartCluster(t, redistest.ClusterConfig{Masters: 3, NodeTimeout: time.Minute})
		down := cl.Nodes[2]
		down.Kill()
		client := redis.NewClusterClient(redisstore.ClusterOptions(cl.Addrs()...))
		t.Cleanup(func() { _ = client.Close() })
		w := newLossWatch(t, client, "down")
		require.NoError(t, down.Restart(t.Context()))
		admin := redis.NewClient(&redis.Options{Addr: down.Addr})
		t.Cleanup(func() { _ = admin.Close() })
		require.NoError(t, admin.ConfigSet(t.Context(), "maxmemory-policy", "allkeys-lru").Err())
		if !assert.Eventually(t, func() bool {
			w.decide(t)
			return evicting(w, down.Addr)
		}, 20*time.Second, 50*time.Millisecond, "the master down at New is checked once it answers") {
			t.Fatalf("the store's log:\n%s", strings.Join(w.logs.all(), "\n"))
		}
		for _, n := range cl.Nodes[:2] {
			assert.False(t, evicting(w, n.Addr), "a master with noeviction")
		}
	})
	t.Run("Promoted", func(t *testing.T) {
		cl := redistest.StartCluster(t, redistest.ClusterConfig{Masters: 3, Replicas: 1})
		client := redis.NewClusterClient(redisstore.ClusterOptions(cl.Addrs()...))
		t.Cleanup(func() { _ = client.Close() })
		w := newLossWatch(t, client, "promoted")
		replica := cl.Nodes[cl.Masters]
		admin := redis.NewClient(&redis.Options{Addr: replica.Addr})
		t.Cleanup(func() { _ = admin.Close() })
		require.NoError(t, admin.ConfigSet(t.Context(), "maxmemory-policy", "allkeys-lru").Err())
		decideFor(t, 1500*time.Millisecond, w)
		require.False(t, evicting(w, replica.Addr), "a replica is not checked while it is one")
		require.NoError(t, admin.Do(t.Context(), "CLUSTER", "FAILOVER").Err())
		require.Eventually(t, func() bool {
			w.decide(t)
			return evicting(w, replica.Addr)
		}, 20*time.Second, 50*time.Millisecond, "the promoted replica is checked")
		assert.Empty(t, w.lossLines(), "a failover reported as a loss")
	})
}
