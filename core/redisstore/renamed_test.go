package redisstore_test

import (
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
)

// A server whose configuration renames INFO away (rename-command INFO "")
// is one New accepts, as it accepts a user not allowed INFO: INFO is
// optional (the scripts read the server's identity with pcall and do
// without it). New starts with warnings, not ErrUnreachable: the server
// answers. Decisions come from Redis.
func TestRenamedInfoStarts(t *testing.T) {
	srv := redistest.StartServer(t, redistest.ServerConfig{Args: []string{"--rename-command", "INFO", `""`}})
	for _, connect := range []bool{false, true} {
		var client redis.UniversalClient
		if connect {
			c, err := redisstore.Connect(t.Context(), srv.Addr)
			require.NoError(t, err, "Connect on a server without INFO")
			client = c
		} else {
			client = redis.NewClient(redisstore.ClientOptions(srv.Addr))
		}
		t.Cleanup(func() { _ = client.Close() })
		logs := &captured{}
		store, err := redisstore.New(client, redisstore.WithLogger(slog.New(logs)))
		t.Logf("New: %v, logs %q", err, logs.all())
		require.NoError(t, err, "New on a server without INFO")
		t.Cleanup(func() { _ = store.Close() })
		assert.Contains(t, strings.Join(logs.all(), "\n"), "INFO", "a warning names the missing INFO")
		l, err := slidelog.New(store, slidelog.PerMinute(3), slidelog.WithDenyCache(0), slidelog.WithFailureMode(slidelog.FailError))
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Close() })
		key := "renamed-info-" + time.Now().Format("150405.000000000")
		for i := range 4 {
			res, err := l.Allow(t.Context(), key)
			require.NoError(t, err)
			assert.Equal(t, redisstore.Source, res.Source)
			assert.Equal(t, i < 3, res.Allowed, "decision %d", i)
		}
	}
}

// A server whose configuration renames away a command the store needs
// fails New with the command's name and the address, never as something
// it is not: a Redis without DEL is not a Sentinel.
func TestRenamedCommandIsNamed(t *testing.T) {
	for _, cmd := range []string{"DEL", "EXISTS", "EVALSHA", "ZADD"} {
		t.Run(cmd, func(t *testing.T) {
			srv := redistest.StartServer(t, redistest.ServerConfig{Args: []string{"--rename-command", cmd, `""`}})
			_, err := newErr(t, redis.NewClient(redisstore.ClientOptions(srv.Addr)))
			require.Error(t, err)
			assert.NotErrorIs(t, err, redisstore.ErrTopology)
			assert.NotContains(t, err.Error(), "Sentinel")
			assert.Contains(t, err.Error(), srv.Addr)
			assert.Contains(t, err.Error(), cmd)
			assert.Contains(t, err.Error(), "rename-command")
		})
	}
}

// New names every command it cannot use in one error, not the first
// alone: a user who fixes one command at a time would otherwise restart
// once per command. Renamed commands keep ErrUnsupportedVersion, refused
// ones ErrPermission, and the error of both kinds wraps both.
func TestEveryUnusableCommandIsNamed(t *testing.T) {
	renamed := []string{"ZADD", "EVALSHA", "HGETALL"}
	var args []string
	for _, c := range renamed {
		args = append(args, "--rename-command", c, c+"-renamed-away")
	}
	srv := redistest.StartServer(t, redistest.ServerConfig{Args: args})
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = admin.Close() })
	// A user refused two more commands on the same server.
	require.NoError(t, admin.Do(t.Context(), "acl", "setuser", "few", "on", ">pw", "~*", "+@all", "-zrem", "-hdel").Err())

	for _, tc := range []struct {
		name      string
		user      string
		wantIs    []error
		wantNames []string
	}{
		{"renamed", "", []error{redisstore.ErrUnsupportedVersion}, renamed},
		{"renamed and refused", "few", []error{redisstore.ErrUnsupportedVersion, redisstore.ErrPermission}, append(slices.Clone(renamed), "ZREM,", "HDEL,")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := redisstore.ClientOptions(srv.Addr)
			if tc.user != "" {
				o.Username, o.Password = tc.user, "pw"
			}
			_, err := newErr(t, redis.NewClient(o))
			require.Error(t, err)
			for _, want := range tc.wantIs {
				assert.ErrorIs(t, err, want)
			}
			assert.Contains(t, err.Error(), srv.Addr)
			for _, c := range tc.wantNames {
				assert.Contains(t, err.Error(), c, "the error names %s", c)
			}
		})
	}
}
