package slidelog_test

import (
	"github.com/redis/go-redis/v9"
	"testing"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/slidelogtest"
)

func TestMemoryStoreConformance(t *testing.T) {
	slidelogtest.RunStoreSuite(t, func(t *testing.T, clock func() time.Time) slidelog.Store {
		return slidelog.NewMemoryStore(slidelog.WithClock(clock))
	})
}

func TestRedisStoreConformance(t *testing.T) {
	client := slidelogtest.RedisClient(t)
	slidelogtest.RunStoreSuite(t, func(t *testing.T, clock func() time.Time) slidelog.Store {
		return newRedisStore(t, client, slidelog.WithClock(clock))
	})
}

func TestClusterStoreConformance(t *testing.T) {
	client := slidelogtest.ClusterClient(t)
	slidelogtest.RunStoreSuite(t, func(t *testing.T, clock func() time.Time) slidelog.Store {
		return newRedisStore(t, client, slidelog.WithClock(clock))
	})
}

func TestStoreConformanceWithoutPipelining(t *testing.T) {
	for name, client := range map[string]redis.UniversalClient{
		"Standalone": slidelogtest.RedisClient(t),
		"Cluster":    slidelogtest.ClusterClient(t),
	} {
		t.Run(name, func(t *testing.T) {
			slidelogtest.RunStoreSuite(t, func(t *testing.T, clock func() time.Time) slidelog.Store {
				return newRedisStore(t, client, slidelog.WithClock(clock), slidelog.WithAutoPipelining(0))
			})
		})
	}
}
