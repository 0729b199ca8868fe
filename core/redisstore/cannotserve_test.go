package redisstore_test

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
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

// A hash slot that no master serves is a fault of that slot, not of a
// node: a node asked for one of its keys replies CLUSTERDOWN Hash slot not
// served, and serves its own slots on. Decisions on the slot's keys go to
// the failure mode at once; decisions on every other key, on the same
// node too, stay on Redis. (A Cluster failing a master over can leave a
// slot unserved in a node's view for a moment; here the slot is taken from
// every node's view by hand, on a Cluster that serves the rest, as
// cluster-require-full-coverage no lets it.)
func TestUnservedSlotFailsOnlyItsKeys(t *testing.T) {
	t.Parallel() // servers of its own: see ownServers
	c := redistest.StartCluster(t, redistest.ClusterConfig{Masters: 2, Args: []string{"--cluster-require-full-coverage", "no"}})
	client := redis.NewClusterClient(redisstore.ClusterOptions(c.Addrs()...))
	defer client.Close()
	s, err := redisstore.New(client)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	l, err := slidelog.New(s, slidelog.Policy{Name: "p", Limit: 1_000_000, Window: time.Minute},
		slidelog.WithName("hole"), slidelog.WithFailureMode(slidelog.FailError), slidelog.WithDenyCache(0))
	require.NoError(t, err)
	defer l.Close()

	ctx := t.Context()
	slot, err := client.ClusterKeySlot(ctx, s.LogKey(l.Name(), "hole")).Result()
	require.NoError(t, err)
	owner, err := client.MasterForKey(ctx, s.LogKey(l.Name(), "hole"))
	require.NoError(t, err)
	// Keys of other slots on the slot's own master, and on the other one.
	var same, other []string
	for i := 0; len(same) < 8 || len(other) < 8; i++ {
		k := "k" + strconv.Itoa(i)
		m, err := client.MasterForKey(ctx, s.LogKey(l.Name(), k))
		require.NoError(t, err)
		ks, err := client.ClusterKeySlot(ctx, s.LogKey(l.Name(), k)).Result()
		require.NoError(t, err)
		switch {
		case ks == slot:
		case m.Options().Addr == owner.Options().Addr && len(same) < 8:
			same = append(same, k)
		case m.Options().Addr != owner.Options().Addr && len(other) < 8:
			other = append(other, k)
		}
	}
	for _, k := range append(append([]string{"hole"}, same...), other...) {
		_, err := l.Allow(ctx, k)
		require.NoError(t, err, "before the slot is taken away")
	}

	for _, n := range c.Nodes {
		admin := redis.NewClient(&redis.Options{Addr: n.Addr})
		require.NoError(t, admin.Do(ctx, "CLUSTER", "DELSLOTS", slot).Err(), "DELSLOTS %d on %s", slot, n.Addr)
		_ = admin.Close()
	}

	// Callers on the slot's key and on the others, at once, as a server's
	// requests come: the slot's key fails fast, no other key fails.
	var (
		mu       sync.Mutex
		holeErrs int
		failed   []string
		slowest  time.Duration
	)
	var wg sync.WaitGroup
	deadline := time.Now().Add(2 * time.Second)
	for _, k := range append(append([]string{"hole", "hole"}, same...), other...) {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				start := time.Now()
				_, err := l.Allow(ctx, k)
				took := time.Since(start)
				mu.Lock()
				if k == "hole" {
					slowest = max(slowest, took)
					if err != nil {
						holeErrs++
						assert.ErrorIs(t, err, slidelog.ErrUnavailable)
					}
				} else if err != nil && len(failed) < 10 {
					failed = append(failed, k+": "+err.Error())
				}
				mu.Unlock()
				time.Sleep(time.Millisecond)
			}
		})
	}
	wg.Wait()
	require.Positive(t, holeErrs, "no decision on the unserved slot failed")
	require.Empty(t, failed, "decisions on served slots failed while another slot had no master")
	require.Less(t, slowest, 400*time.Millisecond, "a decision on the unserved slot waited on go-redis's retries")
}
