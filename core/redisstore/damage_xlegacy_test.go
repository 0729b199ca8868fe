package redisstore_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
)

// A server without PEXPIRETIME (Redis 6.2, here a user that may not run
// it): every log keeps a state, and the state's x is the keys' expiry,
// compared with nothing. A stray write of "nan" into it must not stop the
// expiry from moving, or the keys expire while their entries still count
// and the window admits again what it admitted.
func TestDamagedStateExpiryWithoutPexpiretime(t *testing.T) {
	admin := redistest.RedisClient(t)
	client := admin
	name := "slidelog-nopexpiretime"
	err := admin.Do(t.Context(), "ACL", "SETUSER", name, "reset", "on", ">pw", "~*", "&*", "+@all", "-pexpiretime").Err()
	if err == nil {
		t.Cleanup(func() { _ = admin.Do(context.Background(), "ACL", "DELUSER", name).Err() })
		o := redisstore.ClientOptions(admin.Options().Addr)
		o.Username, o.Password = name, "pw"
		client = redis.NewClient(o)
		t.Cleanup(func() { _ = client.Close() })
	} else if !strings.Contains(err.Error(), "pexpiretime") {
		// Redis 6.2 has no PEXPIRETIME to take away: its own user will do.
		require.NoError(t, err)
	}
	s, err := redisstore.NewUnchecked(client, redisstore.WithKeyPrefix(redistest.KeyPrefix(t, admin)), redisstore.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	redisstore.UseLegacyScript(s)

	const limit, window = 4, 2 * time.Second
	policies := []slidelog.Policy{{Name: "p", Limit: limit, Window: window}}
	keys := keysOf(s, "xlegacy", "k")
	var admitted []slidelogtest.Admission
	id := uint64(100)
	take := func() {
		id++
		res, err := s.Take(t.Context(), slidelog.Request{Namespace: "xlegacy", Key: "k", Cost: 1, Policies: policies, ID: id})
		require.NoError(t, err)
		if res.Allowed {
			admitted = append(admitted, slidelogtest.Admission{Key: "k", Start: res.DecidedAt})
		}
	}
	take()
	x, err := client.HGet(t.Context(), keys[2], "x").Result()
	require.NoError(t, err, "the state holds x")
	t.Logf("x %s", x)
	require.NoError(t, admin.HSet(t.Context(), keys[2], "x", "nan").Err())
	end := time.Now().Add(5 * time.Second)
	for time.Now().Before(end) {
		take()
		time.Sleep(50 * time.Millisecond)
	}
	_, over := slidelogtest.CheckWindows(admitted, limit, window)
	require.Empty(t, over, "a window over the limit")
}
