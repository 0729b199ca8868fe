package redisstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
)

// A master whose slot of the start-up check's keys is migrating (CLUSTER
// SETSLOT ... MIGRATING, as during a live reshard) answers the check's
// commands on absent keys with ASK: New checks that master's commands all
// the same, with no warning that it could not, and names the command the
// user may not run there, as it did through the ClusterClient, which
// follows ASK.
func TestClusterCommandsCheckedOnMigratingSlot(t *testing.T) {
	admin := redistest.ClusterClient(t)
	ctx := t.Context()
	ms := masters(t, admin)
	require.GreaterOrEqual(t, len(ms), 2)
	// The check's tag on the first master, as New picks it: the first of
	// slidelog-start-check, -1, -2, ... whose slot that master serves.
	m := ms[0]
	var slot int64
	for i := 0; ; i++ {
		tag := "slidelog-start-check"
		if i > 0 {
			tag = fmt.Sprintf("%s-%d", tag, i)
		}
		n, err := admin.MasterForKey(ctx, "{"+tag+"}")
		require.NoError(t, err)
		if n.Options().Addr == m {
			slot, err = admin.ClusterKeySlot(ctx, "{"+tag+"}").Result()
			require.NoError(t, err)
			break
		}
	}
	src := redis.NewClient(&redis.Options{Addr: m})
	dst := redis.NewClient(&redis.Options{Addr: ms[1]})
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = src.Do(cctx, "cluster", "setslot", slot, "stable").Err()
		_ = src.Close()
		_ = dst.Close()
	})
	dstID, err := dst.ClusterMyID(ctx).Result()
	require.NoError(t, err)
	require.NoError(t, src.Do(ctx, "cluster", "setslot", slot, "migrating", dstID).Err())

	// A user of its own, who may not run INFO on that master.
	all, err := newAsClusterUser(t, admin, func(addr string) []any {
		if addr == m {
			return []any{"-info"}
		}
		return nil
	})
	require.NoError(t, err)
	t.Logf("slot %d of %s migrating", slot, m)
	for _, r := range strings.Split(all, "\n") {
		assert.NotContains(t, r, "could not check the commands", "a master New did not check")
	}
	assert.Contains(t, all, "node="+m+" commands=[INFO]", "the command the user may not run on that master")
}
