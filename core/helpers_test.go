package slidelog_test

import (
	"log/slog"
	"testing"

	"github.com/redis/go-redis/v9"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
	"github.com/stretchr/testify/require"
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
func newRedisStore(t testing.TB, client redis.UniversalClient, opts ...redisstore.Option) *redisstore.Store {
	t.Helper()
	opts = append([]redisstore.Option{redisstore.WithKeyPrefix(redistest.KeyPrefix(t, client))}, opts...)
	s, err := redisstore.New(client, opts...)
	if err != nil {
		t.Fatalf("NewRedisStore: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// newUnreachableStore returns a RedisStore, logging nothing, on a client
// of opts that may not reach Redis (WithStartUnreachable); both are closed
// when the test ends.
func newUnreachableStore(t *testing.T, opts *redis.Options) *redisstore.Store {
	t.Helper()
	client := redis.NewClient(opts)
	t.Cleanup(func() { _ = client.Close() })
	store, err := redisstore.New(client, redisstore.WithStartUnreachable(), redisstore.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	return store
}

// allowFromFallback makes n decisions for key "k" on l and requires each
// to be the fallback's, with no error.
func allowFromFallback(t *testing.T, l *slidelog.Limiter, n int) {
	t.Helper()
	for range n {
		res, err := l.Allow(t.Context(), "k")
		require.NoError(t, err)
		require.Equal(t, slidelog.SourceFallback, res.Source)
	}
}
