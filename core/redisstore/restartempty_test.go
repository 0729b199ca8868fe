package redisstore_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
)

// A master without persistence that crashes and is restarted before its
// replica is promoted (a supervisor restarting it at once) comes back
// empty, and its replica then copies the empty dataset: every copy of its
// keys is gone, although a replica lived through the crash. WithReplicaAck
// cannot restore them: it keeps only what no replica acknowledged. This
// measures the bound docs/operations.md states for it: up to one window's
// worth of each key of that master admitted again (a window holds at most
// twice the limit), and that the store reports the loss (its canary,
// canary.go) though it cannot undo it.
func TestReplicaAckMasterRestartedEmpty(t *testing.T) {
	t.Parallel() // servers of its own: see ownServers
	master := redistest.StartServer(t, redistest.ServerConfig{})
	replica := redistest.StartServer(t, redistest.ServerConfig{ReplicaOf: master.Addr})
	client := redis.NewClient(redisstore.ClientOptions(master.Addr))
	t.Cleanup(func() { _ = client.Close() })
	logs := &captured{}
	s, err := redisstore.New(client, redisstore.WithReplicaAck(1, 50*time.Millisecond), redisstore.WithLogger(slog.New(logs)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })

	const limit = 10
	req := slidelog.Request{Namespace: "re", Key: "k", Cost: 1, Policies: []slidelog.Policy{{Limit: limit, Window: time.Minute}}}
	take := func(id uint64) bool {
		req.ID = id
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			res, err := s.Take(t.Context(), req)
			if err == nil {
				return res.Allowed
			}
			if time.Now().After(deadline) {
				t.Fatalf("take %d: %v", id, err)
			}
		}
	}
	before := 0
	for i := range limit + 1 {
		if take(uint64(i + 1)) {
			before++
		}
	}
	require.Equal(t, limit, before)
	require.Zero(t, s.ReplicaAckStats().Pending, "the replica acknowledged every admission")
	rc := redis.NewClient(&redis.Options{Addr: replica.Addr})
	t.Cleanup(func() { _ = rc.Close() })
	key := s.LogKey(req.Namespace, req.Key)
	require.EqualValues(t, limit, rc.ZCard(t.Context(), key).Val(), "the replica holds every admission")

	// The master crashes and is restarted at once, empty; its replica
	// resynchronises from it.
	master.Kill()
	require.NoError(t, master.Restart(t.Context()))
	require.Eventually(t, func() bool {
		info := rc.Info(t.Context(), "replication").Val()
		return strings.Contains(info, "master_link_status:up") && rc.Exists(t.Context(), key).Val() == 0
	}, 10*time.Second, 50*time.Millisecond, "the replica copies the restarted master's empty dataset")

	after := 0
	for i := range 2 * limit {
		if take(uint64(100 + i)) {
			after++
		}
	}
	t.Logf("admitted %d before the restart and %d after it in one window of limit %d; %+v", before, after, limit, s.ReplicaAckStats())
	if before+after > 2*limit {
		t.Errorf("got %d admissions in one window, above the stated bound of twice the limit (%d)", before+after, 2*limit)
	}
	require.Eventually(t, func() bool {
		take(uint64(time.Now().UnixNano()))
		return strings.Contains(strings.Join(logs.errorsLogged(), "\n"), "lost the store's keys")
	}, 10*time.Second, 50*time.Millisecond, "the loss reported")
}
