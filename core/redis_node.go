package slidelog

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// This file holds what the limiter asks of a RedisStore or MemoryStore
// beyond the Store interface: a way to reload the slot map, and the clock
// decisions are made by. (RedisStore.route, in redis_store.go, finds a
// key's Cluster node for the breaker.)

// topology returns a reloader of the slot map on a Cluster, nil otherwise.
func (s *RedisStore) topology() *reloader {
	if c, ok := s.client.(*redis.ClusterClient); ok {
		return &reloader{client: c}
	}
	return nil
}

// warm loads the store's script on every master and makes the client
// load its command table and slot map, so that the first decisions wait
// for none of it. Errors are left to the decisions.
func (s *RedisStore) warm(ctx context.Context) {
	load := func(ctx context.Context, c *redis.Client) error {
		return s.script().Load(ctx, c).Err()
	}
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		_ = c.ForEachMaster(ctx, load)
	case *redis.Client:
		_ = load(ctx, c)
	}
	_ = s.client.Exists(ctx, s.prefix+"warm").Err()
}

// redisClient returns the store's client.
func (s *RedisStore) redisClient() redis.UniversalClient { return s.client }

// decisionClock returns the clock a test gave the store, nil for the real
// one.
func (s *RedisStore) decisionClock() func() time.Time { return s.clock }

// decisionClock returns the clock a test gave the store, nil for the real
// one.
func (s *MemoryStore) decisionClock() func() time.Time { return s.clock }

// clockedStore is a store that can tell the clock of its decisions.
type clockedStore interface {
	decisionClock() func() time.Time
}
