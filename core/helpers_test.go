package slidelog_test

import (
	"testing"

	"github.com/redis/go-redis/v9"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/slidelogtest"
)

// newMemoryStore returns a MemoryStore closed when the test ends: a
// limiter does not close the store it is given.
func newMemoryStore(t testing.TB, opts ...slidelog.StoreOption) *slidelog.MemoryStore {
	t.Helper()
	s := slidelog.NewMemoryStore(opts...)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// newRedisStore returns a RedisStore on client under a key prefix of its
// own, whose keys are deleted when the test ends.
func newRedisStore(t *testing.T, client redis.UniversalClient, opts ...slidelog.StoreOption) *slidelog.RedisStore {
	t.Helper()
	opts = append([]slidelog.StoreOption{slidelog.WithKeyPrefix(slidelogtest.KeyPrefix(t, client))}, opts...)
	s, err := slidelog.NewRedisStore(client, opts...)
	if err != nil {
		t.Fatalf("NewRedisStore: %v", err)
	}
	return s
}
