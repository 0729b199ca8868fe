package redisstore_test

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
	"github.com/stretchr/testify/require"
)

// The common path's script (common.lua) decides as the full steps would:
// the same sequence of takes, on the same clock, gets the same Results
// from a store that sends common.lua first and from one that never does
// (the Redis 6.2 variant of script.lua). Policies of one, two and three
// windows, shared windows, retries and denials are mixed at random; a
// difference in any field of any Result fails, on the standalone server
// and on the Cluster.
func TestCommonPathAgreesWithFullSteps(t *testing.T) {
	for name, client := range map[string]redis.UniversalClient{
		"Standalone": redistest.RedisClient(t),
		"Cluster":    redistest.ClusterClient(t),
	} {
		t.Run(name, func(t *testing.T) { commonPathAgrees(t, client) })
	}
}

func commonPathAgrees(t *testing.T, client redis.UniversalClient) {
	var us atomic.Int64
	us.Store(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC).UnixMicro())
	clock := func() time.Time { return time.UnixMicro(us.Load()) }
	common := newRedisStore(t, client, redisstore.WithClock(clock))
	full := newRedisStore(t, client, redisstore.WithClock(clock))
	redisstore.UseLegacyScript(full)
	ctx := t.Context()

	sets := [][]slidelog.Policy{
		{{Name: "a", Limit: 3, Window: 2 * time.Second}},
		{{Name: "a", Limit: 1, Window: time.Second}},
		{{Name: "a", Limit: 4, Window: 3 * time.Second}, {Name: "b", Limit: 2, Window: 500 * time.Millisecond}},
		{{Name: "a", Limit: 3, Window: time.Second}, {Name: "b", Limit: 2, Window: time.Second}},
		{{Name: "a", Limit: 5, Window: 4 * time.Second}, {Name: "b", Limit: 3, Window: time.Second}, {Name: "c", Limit: 2, Window: 300 * time.Millisecond}},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var admitted, denied, retried int
	for set, policies := range sets {
		for key := range 3 {
			name := fmt.Sprintf("set%d-key%d", set, key)
			var last uint64
			for step := range 60 {
				// Up to 0.4 s between takes, in steps of 0.1 s give or take
				// a microsecond: entries then leave windows at their edges.
				us.Add(max(0, rng.Int64N(5)*100_000+rng.Int64N(3)-1))
				id := rng.Uint64()
				if last != 0 && rng.IntN(8) == 0 {
					id = last // a retry of the previous call
					retried++
				}
				last = id
				req := slidelog.Request{Key: name, Cost: 1, Policies: policies, ID: id}
				req.Namespace = "common"
				got, err := common.Take(ctx, req)
				require.NoError(t, err)
				req.Namespace = "full"
				want, err := full.Take(ctx, req)
				require.NoError(t, err)
				require.Equal(t, want, got, "%s, step %d", name, step)
				if got.Allowed {
					admitted++
				} else {
					denied++
				}
			}
		}
	}
	// The mix exercised every branch.
	require.Greater(t, admitted, 100)
	require.Greater(t, denied, 100)
	require.Greater(t, retried, 50)
}
