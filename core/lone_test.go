package slidelog_test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
)

// A lone decision on a healthy node is sent from its caller's goroutine:
// no sender goroutine, no ticker, on a single Redis and on a Cluster, with
// go-redis's plain options and the limiter's defaults (issue 19). Each
// decision used to start one goroutine.
func TestLoneDecisionStartsNoGoroutine(t *testing.T) {
	for _, tc := range []struct {
		give   string
		client func(t *testing.T) redis.UniversalClient
	}{
		{"standalone", func(t *testing.T) redis.UniversalClient {
			redistest.RedisClient(t) // fails or skips without Redis
			return redis.NewClient(&redis.Options{Addr: os.Getenv(redistest.EnvRedisAddr)})
		}},
		{"cluster", func(t *testing.T) redis.UniversalClient {
			redistest.ClusterClient(t)
			return redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(os.Getenv(redistest.EnvClusterAddrs), ",")})
		}},
	} {
		t.Run(tc.give, func(t *testing.T) {
			client := tc.client(t)
			t.Cleanup(func() { _ = client.Close() })
			store := newRedisStore(t, client) // its keys are deleted at cleanup
			l, err := slidelog.New(store, slidelog.PerMinute(1000))
			require.NoError(t, err)
			t.Cleanup(func() { _ = l.Close() })
			// Warm up: connections, the script, the slot map.
			for i := range 20 {
				_, err := l.Allow(t.Context(), "warm-"+strconv.Itoa(i))
				require.NoError(t, err)
			}
			const decisions = 200
			start := goroutinesCreated()
			for i := range decisions {
				res, err := l.Allow(t.Context(), "user-"+strconv.Itoa(i))
				require.NoError(t, err)
				require.Equal(t, redisstore.Source, res.Source, "decision %d", i)
			}
			started := goroutinesCreated() - start
			// A busy machine can delay a reply past half the stall
			// timeout, which starts the limiter's monitor: a few, never
			// one per decision.
			assert.Less(t, started, uint64(decisions/10), "goroutines started by %d lone decisions", decisions)
		})
	}
}
