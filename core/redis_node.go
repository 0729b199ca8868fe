package slidelog

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// This file holds what the limiter asks of a RedisStore or MemoryStore
// beyond the Store interface: which Cluster node a key lives on, a way to
// reload the slot map, and the clock decisions are made by.

// nodeOf returns the address of the master that holds identity's key on a
// Cluster, or "" on a standalone server or when the slot map is unknown.
func (s *RedisStore) nodeOf(ctx context.Context, namespace, identity string) string {
	c, ok := s.client.(*redis.ClusterClient)
	if !ok {
		return ""
	}
	m, err := c.MasterForKey(ctx, s.Key(namespace, identity))
	if err != nil {
		return ""
	}
	return m.Options().Addr
}

// topology returns a reloader of the slot map on a Cluster, nil otherwise.
func (s *RedisStore) topology() *reloader {
	if c, ok := s.client.(*redis.ClusterClient); ok {
		return &reloader{client: c}
	}
	return nil
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
