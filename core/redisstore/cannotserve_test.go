package redisstore_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
)

// A Cluster node that replies CLUSTERDOWN cannot decide: go-redis retries
// that reply with a back-off of up to half a second, MaxRedirects times,
// so a decision would wait seconds for it. The store sends such decisions
// to the failure mode at once, and back to the node once it serves again.
func TestClusterDownGoesToFailureModeAtOnce(t *testing.T) {
	t.Parallel() // servers of its own: see ownServers
	// One node of its own, in cluster mode, its slots added by hand.
	addr := redistest.StartServer(t, redistest.ServerConfig{Args: []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"}}).Addr
	admin := redis.NewClient(&redis.Options{Addr: addr})
	defer admin.Close()
	require.NoError(t, admin.Do(t.Context(), allSlots("ADDSLOTS")...).Err())
	clusterOK := func() bool {
		info, err := admin.ClusterInfo(t.Context()).Result()
		return err == nil && strings.Contains(info, "cluster_state:ok")
	}
	require.Eventually(t, clusterOK, 10*time.Second, 20*time.Millisecond)

	client := redis.NewClusterClient(redisstore.ClusterOptions(addr))
	defer client.Close()
	s, err := redisstore.New(client)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	l, err := slidelog.New(s, slidelog.Policy{Name: "p", Limit: 1000, Window: time.Minute},
		slidelog.WithName("down"), slidelog.WithFailureMode(slidelog.FailError), slidelog.WithDenyCache(0))
	require.NoError(t, err)
	defer l.Close()
	_, err = l.Allow(t.Context(), "k")
	require.NoError(t, err)

	// The node no longer serves any slot: every command gets CLUSTERDOWN.
	require.NoError(t, admin.Do(t.Context(), allSlots("DELSLOTS")...).Err())
	var longest time.Duration
	for i := range 20 {
		start := time.Now()
		_, err := l.Allow(t.Context(), "k"+strconv.Itoa(i%3))
		took := time.Since(start)
		longest = max(longest, took)
		require.Error(t, err, "a decision on a node that replies CLUSTERDOWN")
		require.True(t, errors.Is(err, slidelog.ErrUnavailable), "want ErrUnavailable, got %v", err)
		if i == 0 { // then the breaker is open
			require.Contains(t, err.Error(), "CLUSTERDOWN")
		}
	}
	t.Logf("longest decision while the node replied CLUSTERDOWN: %v", longest)
	// go-redis alone takes over a second (8 retries, back-off up to
	// 512 ms); the store ends it with the first reply. The bound leaves
	// room for a busy machine.
	require.Less(t, longest, 400*time.Millisecond, "a decision waited on go-redis's retries of CLUSTERDOWN")

	// Serving again, the node decides again.
	require.NoError(t, admin.Do(t.Context(), allSlots("ADDSLOTS")...).Err())
	require.Eventually(t, clusterOK, 10*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool {
		d, err := l.Allow(t.Context(), "k")
		return err == nil && d.Source == redisstore.Source
	}, 10*time.Second, 50*time.Millisecond, "decisions never came back to the node")
}

// allSlots is CLUSTER sub (ADDSLOTS or DELSLOTS) with every slot: the
// *SLOTSRANGE commands are Redis 7's.
func allSlots(sub string) []any {
	args := []any{"CLUSTER", sub}
	for slot := range 16384 {
		args = append(args, slot)
	}
	return args
}
