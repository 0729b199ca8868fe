package redisstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// On a Cluster, New checks the commands the store needs on every master,
// not on the master of its check's keys alone: a user whose ACL on one
// other master lacks EVALSHA and ZADD (which every decision there would
// need) fails New with ErrPermission naming that master and both
// commands, and one lacking a command on two masters names each; one
// whose ACL there lacks PEXPIRETIME starts, with a warning naming that
// master. The test's user is its own, created on every node
// of the test Cluster and deleted when the test ends.
func TestClusterCommandsCheckedOnEveryMaster(t *testing.T) {
	admin := redistest.ClusterClient(t)
	ctx := t.Context()
	var b [4]byte
	_, _ = rand.Read(b[:])
	user, pass := "slidelog-acl-"+hex.EncodeToString(b[:]), "pw"
	nodes := map[string]*redis.Client{}
	for _, addr := range admin.Options().Addrs {
		nodes[addr] = redis.NewClient(&redis.Options{Addr: addr})
	}
	allow := func(t *testing.T, n *redis.Client) {
		t.Helper()
		require.NoError(t, n.Do(ctx, "acl", "setuser", user, "reset", "on", ">"+pass, "~*", "&*", "+@all").Err())
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, n := range nodes {
			_ = n.Do(cctx, "acl", "deluser", user).Err()
			_ = n.Close()
		}
	})
	for _, n := range nodes {
		allow(t, n)
	}

	prefix := redistest.KeyPrefix(t, admin)
	checked, err := admin.MasterForKey(ctx, prefix+"{slidelog-start-check}:z")
	require.NoError(t, err)
	var other string
	ms := masters(t, admin)
	for _, m := range ms {
		if m != checked.Options().Addr {
			other = m
			break
		}
	}
	require.NotEmpty(t, other, "the test Cluster has one master")
	t.Logf("the check's keys are on %s; the ACL differs on %s", checked.Options().Addr, other)

	connect := func(t *testing.T, logs *captured) (*redisstore.Store, error) {
		t.Helper()
		o := redisstore.ClusterOptions(admin.Options().Addrs...)
		o.Username, o.Password = user, pass
		c := redis.NewClusterClient(o)
		t.Cleanup(func() { _ = c.Close() })
		s, err := redisstore.New(c, redisstore.WithKeyPrefix(prefix), redisstore.WithLogger(slog.New(logs)))
		if err == nil {
			t.Cleanup(func() { _ = s.Close() })
		}
		return s, err
	}
	restrict := func(t *testing.T, master string, rules ...any) {
		t.Helper()
		require.NoError(t, nodes[master].Do(ctx, append([]any{"acl", "setuser", user}, rules...)...).Err())
		t.Cleanup(func() { allow(t, nodes[master]) })
	}

	t.Run("without evalsha and zadd", func(t *testing.T) {
		restrict(t, other, "-evalsha", "-zadd")
		s, err := connect(t, &captured{})
		require.Error(t, err, "New starts with a master that may not run EVALSHA nor ZADD")
		assert.Nil(t, s)
		assert.ErrorIs(t, err, redisstore.ErrPermission)
		for _, c := range []string{"EVALSHA", "ZADD"} {
			assert.Contains(t, err.Error(), other+": the user may not run "+c+",")
		}
		assert.NotContains(t, err.Error(), checked.Options().Addr+":", "a master whose ACL is whole is named")
	})
	t.Run("two masters", func(t *testing.T) {
		restrict(t, other, "-evalsha")
		restrict(t, checked.Options().Addr, "-hincrby")
		_, err := connect(t, &captured{})
		require.ErrorIs(t, err, redisstore.ErrPermission)
		assert.Contains(t, err.Error(), fmt.Sprintf("2 of its %d masters cannot run commands the store needs", len(ms)))
		assert.Contains(t, err.Error(), other+": the user may not run EVALSHA,")
		assert.Contains(t, err.Error(), checked.Options().Addr+": the user may not run HINCRBY,")
	})
	t.Run("without pexpiretime", func(t *testing.T) {
		info, err := checked.Do(t.Context(), "COMMAND", "INFO", "pexpiretime").Slice()
		require.NoError(t, err)
		if len(info) == 1 && info[0] == nil {
			// Redis 6.2 has no PEXPIRETIME, and its script needs none: New
			// starts without a word of it.
			logs := &captured{}
			_, err := connect(t, logs)
			require.NoError(t, err)
			assert.NotContains(t, strings.Join(logs.all(), "\n"), "PEXPIRETIME")
			return
		}
		restrict(t, other, "-pexpiretime")
		logs := &captured{}
		_, err = connect(t, logs)
		require.NoError(t, err)
		all := strings.Join(logs.all(), "\n")
		assert.Contains(t, all, "node="+other+" commands=[PEXPIRETIME]")
		assert.NotContains(t, all, "node="+checked.Options().Addr)
	})
}

// masters returns the addresses of the Cluster's masters.
func masters(t *testing.T, c *redis.ClusterClient) []string {
	t.Helper()
	var out []string
	slots, err := c.ClusterSlots(t.Context()).Result() //nolint:staticcheck // CLUSTER SHARDS is Redis 7 and later; these tests run on 6.2 too
	require.NoError(t, err)
	for _, s := range slots {
		if len(s.Nodes) > 0 && !slices.Contains(out, s.Nodes[0].Addr) {
			out = append(out, s.Nodes[0].Addr)
		}
	}
	return out
}
