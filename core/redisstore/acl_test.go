package redisstore_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// docACLs returns the ACL SETUSER lines of docs/operations.md, each with
// the comment line above it (which names the servers it is for).
func docACLs(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open("../../docs/operations.md")
	require.NoError(t, err)
	defer f.Close()
	out := map[string][]string{}
	comment := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "# "):
			comment = line
		case strings.HasPrefix(line, "ACL SETUSER limiter "):
			out[comment] = strings.Fields(line)
		}
	}
	require.NoError(t, sc.Err())
	require.Len(t, out, 2, "docs/operations.md gives one ACL line for Redis 7+ and Valkey, one for Redis 6.2")
	return out
}

// aclFor returns the documented ACL line for the server admin talks to,
// as arguments, for user name with password pass.
func aclFor(t *testing.T, admin *redis.Client, name, pass string) []string {
	t.Helper()
	info, err := admin.Info(t.Context(), "server").Result()
	require.NoError(t, err)
	legacy := strings.Contains(info, "redis_version:6.2.")
	for comment, args := range docACLs(t) {
		if strings.Contains(comment, "6.2") != legacy {
			continue
		}
		args = slices.Clone(args)
		for i, a := range args {
			switch {
			case a == "limiter":
				args[i] = name
			case strings.HasPrefix(a, ">"):
				args[i] = ">" + pass
			}
		}
		t.Logf("%s: %s", comment, strings.Join(args, " "))
		return args
	}
	t.Fatalf("no ACL line for this server in docs/operations.md")
	return nil
}

// setUser runs an ACL SETUSER line given as its words.
func setUser(t *testing.T, admin *redis.Client, args []string) {
	t.Helper()
	cmd := make([]any, len(args))
	for i, a := range args {
		cmd[i] = a
	}
	require.NoError(t, admin.Do(t.Context(), cmd...).Err(), "%s", strings.Join(args, " "))
}

// The ACL line docs/operations.md gives for a limiter's user is enough:
// New starts with no warning about commands, and decisions, refunds,
// resets and peeks work. The same line without any one command the store
// needs fails New with ErrPermission naming that command; without INFO,
// New starts and decides (INFO is not a command it cannot do without).
func TestDocumentedACL(t *testing.T) {
	srv := redistest.StartServer(t, redistest.ServerConfig{})
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = admin.Close() })
	line := aclFor(t, admin, "limiter", "pw")

	user := func(t *testing.T, name string, args []string) redis.UniversalClient {
		t.Helper()
		args = slices.Clone(args)
		args[2] = name
		setUser(t, admin, args)
		o := redisstore.ClientOptions(srv.Addr)
		o.Username, o.Password = name, "pw"
		c := redis.NewClient(o)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	decide := func(t *testing.T, client redis.UniversalClient, logs *captured, opts ...redisstore.Option) {
		t.Helper()
		store, err := redisstore.New(client, append([]redisstore.Option{redisstore.WithKeyPrefix("slidelog:acl:"), redisstore.WithLogger(slog.New(logs))}, opts...)...)
		require.NoError(t, err)
		t.Cleanup(func() { _ = store.Close() })
		p := slidelog.Policy{Name: "p", Limit: 3, Window: time.Minute}
		for _, precision := range []time.Duration{0, time.Second} {
			p.Precision = precision
			l, err := slidelog.New(store, p, slidelog.WithName(fmt.Sprintf("acl%v", precision)), slidelog.WithFailureMode(slidelog.FailError), slidelog.WithDenyCache(0))
			require.NoError(t, err)
			for i := range 4 {
				res, err := l.AllowN(t.Context(), "k", 1)
				require.NoError(t, err)
				assert.Equal(t, i < 3, res.Allowed, "decision %d", i)
				assert.Equal(t, slidelog.Source("redis"), res.Source)
			}
			res, err := l.AllowN(t.Context(), "k", 2)
			require.NoError(t, err)
			require.False(t, res.Allowed)
			u, err := l.Peek(t.Context(), "k")
			require.NoError(t, err)
			assert.Equal(t, 0, u.Remaining)
			require.NoError(t, l.Reset(t.Context(), "k"))
			res, err = l.AllowN(t.Context(), "k", 1)
			require.NoError(t, err)
			require.True(t, res.Allowed, "allowed again after Reset")
			require.NoError(t, l.Refund(t.Context(), res))
			require.NoError(t, l.Close())
		}
	}

	t.Run("documented", func(t *testing.T) {
		logs := &captured{}
		decide(t, user(t, "limiter", line), logs)
		decide(t, user(t, "acker", line), logs, redisstore.WithReplicaAck(1, 10*time.Millisecond))
		for _, r := range logs.all() {
			assert.NotContains(t, r, "may not run", "a warning about the documented ACL")
			assert.NotContains(t, r, "canary", "a warning about the documented ACL")
		}
	})
	t.Run("without info", func(t *testing.T) {
		logs := &captured{}
		decide(t, user(t, "noinfo", slices.DeleteFunc(slices.Clone(line), func(a string) bool { return a == "+info" })), logs)
		assert.Contains(t, strings.Join(logs.all(), "\n"), "could not read the redis version", "a user without INFO is warned about")
	})

	// Every command the line allows, taken away alone.
	var cmds []string
	for _, a := range line {
		if c, ok := strings.CutPrefix(a, "+"); ok && c != "info" && c != "ping" {
			cmds = append(cmds, c)
		}
	}
	require.Contains(t, cmds, "zremrangebyscore")
	for _, c := range cmds {
		t.Run("without "+c, func(t *testing.T) {
			// The user's name holds "key": a command's refusal is not
			// taken for a key's.
			name := "keyless-" + strings.ReplaceAll(c, "|", "-")
			var opts []redisstore.Option
			if c == "wait" {
				opts = append(opts, redisstore.WithReplicaAck(1, 10*time.Millisecond))
			}
			logs := &captured{}
			without := slices.DeleteFunc(slices.Clone(line), func(a string) bool { return a == "+"+c })
			require.Len(t, without, len(line)-1)
			s, err := redisstore.New(user(t, name, without), append(opts, redisstore.WithLogger(slog.New(logs)))...)
			if c == "get" || c == "set" {
				// Only the canaries need them: New starts, and warns
				// that a master's loss of its keys goes unreported.
				require.NoError(t, err)
				_ = s.Close()
				assert.Contains(t, strings.Join(logs.all(), "\n"), "may not run these commands")
				assert.Contains(t, strings.Join(logs.all(), "\n"), strings.ToUpper(c))
				return
			}
			if c == "pexpiretime" {
				// The decisions' common path needs it; the whole script
				// does without.
				require.NoError(t, err)
				_ = s.Close()
				assert.Contains(t, strings.Join(logs.all(), "\n"), "PEXPIRETIME")
				return
			}
			require.Error(t, err, "New starts without %s", c)
			assert.ErrorIs(t, err, redisstore.ErrPermission)
			assert.Contains(t, err.Error(), "the user may not run "+strings.ToUpper(c)+",")
			assert.Contains(t, err.Error(), srv.Addr)
			assert.Nil(t, s)
		})
	}

	t.Run("keys outside the pattern", func(t *testing.T) {
		args := slices.Clone(line)
		for i, a := range args {
			if strings.HasPrefix(a, "~") {
				args[i] = "~other:*"
			}
		}
		_, err := redisstore.New(user(t, "otherkeys", args), redisstore.WithLogger(slog.New(slog.DiscardHandler)))
		require.ErrorIs(t, err, redisstore.ErrPermission)
		assert.Contains(t, err.Error(), "may not use the store's keys (slidelog:*)")
	})
}

// all returns the text of every record, attributes included.
func (c *captured) all() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, r := range c.records {
		var b strings.Builder
		b.WriteString(r.Message)
		r.Attrs(func(a slog.Attr) bool {
			b.WriteString(" " + a.Key + "=" + a.Value.String())
			return true
		})
		out = append(out, b.String())
	}
	return out
}

// has reports whether a record's text (see all) contains sub.
func (c *captured) has(sub string) bool {
	return slices.ContainsFunc(c.all(), func(r string) bool { return strings.Contains(r, sub) })
}

// On a Cluster, the documented line with +cluster|slots and +command (as
// docs/operations.md says) starts a store whose decisions work on every
// master.
func TestDocumentedACLOnCluster(t *testing.T) {
	cc := redistest.ClusterClient(t)
	addrs := cc.Options().Addrs
	name := fmt.Sprintf("limiter-%d", time.Now().UnixNano())
	var line []string
	for _, a := range addrs {
		admin := redis.NewClient(&redis.Options{Addr: a})
		t.Cleanup(func() {
			_ = admin.Do(context.Background(), "acl", "deluser", name).Err()
			_ = admin.Close()
		})
		line = aclFor(t, admin, name, "pw")
		setUser(t, admin, append(line, "+cluster|slots", "+command"))
	}
	doc, err := os.ReadFile("../../docs/operations.md")
	require.NoError(t, err)
	require.Contains(t, string(doc), "On a Cluster add\n`+cluster|slots +command`")

	o := redisstore.ClusterOptions(addrs...)
	o.Username, o.Password = name, "pw"
	client := redis.NewClusterClient(o)
	t.Cleanup(func() { _ = client.Close() })
	logs := &captured{}
	store, err := redisstore.New(client, redisstore.WithKeyPrefix("slidelog:aclc:"), redisstore.WithLogger(slog.New(logs)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	for _, r := range logs.all() {
		assert.NotContains(t, r, "may not run")
	}
	l, err := slidelog.New(store, slidelog.Policy{Name: "p", Limit: 2, Window: time.Minute}, slidelog.WithName("aclc"), slidelog.WithFailureMode(slidelog.FailError), slidelog.WithDenyCache(0))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	nodes := map[string]bool{}
	for i := range 30 {
		key := fmt.Sprintf("k%d", i)
		nodes[store.Route(t.Context(), slidelog.Request{Namespace: "aclc", Key: key}).Node] = true
		for j := range 3 {
			res, err := l.AllowN(t.Context(), key, 1)
			require.NoError(t, err)
			assert.Equal(t, j < 2, res.Allowed)
			assert.Equal(t, slidelog.Source("redis"), res.Source)
		}
		require.NoError(t, l.Reset(t.Context(), key))
	}
	assert.Len(t, nodes, 3, "keys on every master")
}
