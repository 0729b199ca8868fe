package redisstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
)

// TestRedisBytesPerEntry fills one log to its limit and reads MEMORY
// USAGE: the figures docs/algorithm.md reports. Run with -v to print them:
//
//	go test -run TestRedisBytesPerEntry -v ./core
func TestRedisBytesPerEntry(t *testing.T) {
	client := redistest.RedisClient(t)
	for _, tc := range []struct {
		limit   int
		maxByte float64 // per entry
	}{
		{limit: 100, maxByte: 24},
		{limit: 2000, maxByte: 100},
	} {
		store := newRedisStore(t, client)
		l, err := slidelog.New(store, slidelog.Policy{Name: "p", Limit: tc.limit, Window: time.Hour}, slidelog.WithName("usage"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() }) // and its fallback, if a slow call made one
		for range tc.limit {
			if res, err := l.Allow(t.Context(), "k"); err != nil || !res.Allowed {
				t.Fatalf("Allow = %+v, %v", res, err)
			}
		}
		key := store.LogKey(l.Name(), "k")
		bytes := logBytes(t, client, key)
		encoding, _ := client.ObjectEncoding(t.Context(), key).Result()
		perEntry := float64(bytes) / float64(tc.limit)
		t.Logf("limit %d: MEMORY USAGE %d bytes, %.1f B/entry, encoding %s", tc.limit, bytes, perEntry, encoding)
		if perEntry > tc.maxByte {
			t.Errorf("limit %d: %.1f B/entry, want at most %.0f", tc.limit, perEntry, tc.maxByte)
		}
	}

	// The effect of raising zset-max-listpack-entries for large limits
	// (docs/operations.md): the same 2,000 entries as one listpack (a
	// ziplist on Redis 6.2, whose name for the setting, which later
	// servers keep as an alias, is used here).
	const setting = "zset-max-ziplist-entries"
	old, err := client.ConfigGet(t.Context(), setting).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(old) != 1 {
		t.Fatalf("CONFIG GET %s = %v, want one value", setting, old)
	}
	for _, v := range old {
		t.Cleanup(func() { client.ConfigSet(context.Background(), setting, v) })
	}
	if err := client.ConfigSet(t.Context(), setting, "2048").Err(); err != nil {
		t.Fatal(err)
	}
	store := newRedisStore(t, client)
	l, err := slidelog.New(store, slidelog.Policy{Name: "p", Limit: 2000, Window: time.Hour}, slidelog.WithName("usage"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	for range 2000 {
		if _, err := l.Allow(t.Context(), "k"); err != nil {
			t.Fatal(err)
		}
	}
	bytes := logBytes(t, client, store.LogKey(l.Name(), "k"))
	encoding, _ := client.ObjectEncoding(t.Context(), store.LogKey(l.Name(), "k")).Result()
	t.Logf("limit 2000 with zset-max-listpack-entries 2048: MEMORY USAGE %d bytes, %.1f B/entry, encoding %s", bytes, float64(bytes)/2000, encoding)
	if (encoding != "listpack" && encoding != "ziplist") || float64(bytes)/2000 > 22 {
		t.Errorf("with zset-max-listpack-entries 2048: encoding %s, %.1f B/entry; want listpack (ziplist on Redis 6.2) at most 22 B/entry", encoding, float64(bytes)/2000)
	}
}

// logBytes is the MEMORY USAGE of a log's keys: the sorted set, its costs
// (absent while every cost is 1) and its state hash.
func logBytes(t *testing.T, client *redis.Client, key string) int64 {
	t.Helper()
	var total int64
	for _, k := range []string{key, key + ":c", key + ":s"} {
		n, err := client.MemoryUsage(t.Context(), k, 0).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatalf("MEMORY USAGE %s: %v", k, err)
		}
		total += n
	}
	return total
}
