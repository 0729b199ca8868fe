package redisstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
)

// A user who may not run PING on one Cluster master (which the store
// never sends) is no master that does not answer: New checks that
// master's commands like the others' and fails with ErrPermission naming
// it when the user may not run EVALSHA there either.
func TestClusterMasterWithoutPingIsChecked(t *testing.T) {
	admin := redistest.ClusterClient(t)
	m := masters(t, admin)[0]
	t.Run("one master, without evalsha", func(t *testing.T) {
		logged, err := newAsClusterUser(t, admin, func(addr string) []any {
			if addr == m {
				return []any{"-ping", "-evalsha"}
			}
			return nil
		})
		require.ErrorIs(t, err, redisstore.ErrPermission)
		assert.Contains(t, err.Error(), m+": the user may not run EVALSHA,")
		assert.NotContains(t, logged, "does not answer")
	})
	t.Run("every node", func(t *testing.T) {
		logged, err := newAsClusterUser(t, admin, func(string) []any { return []any{"-ping"} })
		require.NoError(t, err, "a user who may not run PING anywhere")
		assert.NotContains(t, logged, "does not answer")
	})
}

// newAsClusterUser runs New as a user of its own, allowed everything on
// each node of admin's Cluster but the rules rules(node) adds, and
// returns what New logged and its error.
func newAsClusterUser(t *testing.T, admin *redis.ClusterClient, rules func(addr string) []any) (string, error) {
	t.Helper()
	ctx := t.Context()
	var b [4]byte
	_, _ = rand.Read(b[:])
	user, pass := "slidelog-user-"+hex.EncodeToString(b[:]), "pw"
	for _, addr := range admin.Options().Addrs {
		n := redis.NewClient(&redis.Options{Addr: addr})
		r := append([]any{"acl", "setuser", user, "reset", "on", ">" + pass, "~*", "&*", "+@all"}, rules(addr)...)
		require.NoError(t, n.Do(ctx, r...).Err())
		t.Cleanup(func() {
			cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = n.Do(cctx, "acl", "deluser", user).Err()
			_ = n.Close()
		})
	}
	logs := &captured{}
	o := redisstore.ClusterOptions(admin.Options().Addrs...)
	o.Username, o.Password = user, pass
	c := redis.NewClusterClient(o)
	t.Cleanup(func() { _ = c.Close() })
	s, err := redisstore.New(c, redisstore.WithKeyPrefix(redistest.KeyPrefix(t, admin)), redisstore.WithLogger(slog.New(logs)))
	if s != nil {
		_ = s.Close()
	}
	t.Logf("New: %v; logged:\n%s", err, strings.Join(logs.all(), "\n"))
	return strings.Join(logs.all(), "\n"), err
}
