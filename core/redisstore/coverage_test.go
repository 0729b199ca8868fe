package redisstore_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
)

// A Cluster that leaves hash slots unassigned cannot decide the keys
// there: every decision of such a key would go to the failure mode
// (CLUSTERDOWN Hash slot not served), and with
// cluster-require-full-coverage yes every decision of every key would.
// New refuses it with ErrTopology, naming the seeds and the slots, even
// with WithStartUnreachable: no master is down, the slots have no master.
func TestNewRefusesUncoveredSlots(t *testing.T) {
	for _, full := range []string{"no", "yes"} {
		t.Run("cluster-require-full-coverage "+full, func(t *testing.T) {
			addr := redistest.StartServer(t, redistest.ServerConfig{Args: []string{
				"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
				"--cluster-require-full-coverage", full,
			}}).Addr
			admin := redis.NewClient(&redis.Options{Addr: addr})
			defer admin.Close()
			args := []any{"CLUSTER", "ADDSLOTS"}
			for slot := 5000; slot < 16384; slot++ {
				args = append(args, slot)
			}
			require.NoError(t, admin.Do(t.Context(), args...).Err())
			require.Eventually(t, func() bool {
				info, err := admin.ClusterInfo(t.Context()).Result()
				return err == nil && strings.Contains(info, "cluster_slots_assigned:11384")
			}, 10*time.Second, 20*time.Millisecond)

			for _, opts := range [][]redisstore.Option{nil, {redisstore.WithStartUnreachable()}} {
				client := redis.NewClusterClient(redisstore.ClusterOptions(addr))
				t.Cleanup(func() { _ = client.Close() })
				logs := &captured{}
				start := time.Now()
				store, err := redisstore.New(client, append(opts, redisstore.WithLogger(slog.New(logs)))...)
				took := time.Since(start)
				if store != nil {
					_ = store.Close()
				}
				t.Logf("New: %v (after %v), logs %q", err, took.Round(time.Millisecond), logs.all())
				require.ErrorIs(t, err, redisstore.ErrTopology, "a Cluster with 5000 slots unassigned started a store")
				assert.Contains(t, err.Error(), addr)
				assert.Contains(t, err.Error(), "0-4999")
				assert.Less(t, took, startBound, "New took %v to fail", took)
			}
		})
	}
}

// Every slot of the rig's Cluster is assigned: New starts on it.
func TestNewAcceptsCoveredCluster(t *testing.T) {
	seeds := redistest.ClusterClient(t).Options().Addrs
	client := redis.NewClusterClient(redisstore.ClusterOptions(seeds...))
	t.Cleanup(func() { _ = client.Close() })
	logs := &captured{}
	store, err := redisstore.New(client, redisstore.WithLogger(slog.New(logs)))
	require.NoError(t, err)
	_ = store.Close()
	for _, l := range logs.all() {
		assert.False(t, strings.Contains(l, "slot"), "a covered Cluster logged %q", l)
	}
}
