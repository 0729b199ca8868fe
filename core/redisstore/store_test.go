package redisstore_test

import (
	"strings"
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
