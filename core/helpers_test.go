package slidelog_test

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
)

// newMemoryStore returns a MemoryStore closed when the test ends: a
// limiter does not close the store it is given.
func newMemoryStore(t testing.TB, opts ...memstore.Option) *memstore.Store {
	t.Helper()
	s := memstore.New(opts...)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// newRedisStore returns a RedisStore on client under a key prefix of its
// own, whose keys are deleted when the test ends.
func newRedisStore(t *testing.T, client redis.UniversalClient, opts ...redisstore.Option) *redisstore.Store {
	t.Helper()
	opts = append([]redisstore.Option{redisstore.WithKeyPrefix(redistest.KeyPrefix(t, client))}, opts...)
	s, err := redisstore.New(client, opts...)
	if err != nil {
		t.Fatalf("NewRedisStore: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}
