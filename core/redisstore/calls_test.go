package redisstore_test

import (
	"slices"
	"testing"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The commands the script runs per decision, counted inside the script
// (not timed, so load does not matter): each command is about a
// microsecond of Redis CPU, so a change that adds one to the common path
// must show here. A key's first decision adds the entry and sets the
// log's expiry; the next ones read the expiry (PEXPIRETIME), count and add,
// until a quarter of the retention has passed. No state hash is read or
// written while every cost is 1 and one limiter uses the log.
func TestScriptCallsPerDecision(t *testing.T) {
	client := redistest.RedisClient(t)
	s := newRedisStore(t, client)
	ctx := t.Context()
	id := uint64(1)
	run := func(op string, req slidelog.Request, at int64) ([]string, []any) {
		t.Helper()
		calls, reply, err := redisstore.ScriptCalls(ctx, s, op, req, at)
		require.NoError(t, err)
		return calls, reply
	}
	take := func(key string, cost int, policies ...slidelog.Policy) ([]string, []any) {
		t.Helper()
		id++
		return run("take", slidelog.Request{Namespace: "calls", Key: key, Cost: cost, Policies: policies, ID: id}, 0)
	}
	minute := slidelog.Policy{Name: "m", Limit: 3, Window: time.Minute}
	second := slidelog.Policy{Name: "s", Limit: 2, Window: time.Second}

	if redisstore.UsesLegacyScript(s) {
		// Redis 6.2 has no PEXPIRETIME: there is no common path, every
		// decision runs the whole script after legacy.lua's guard (a ZADD
		// that changes nothing), and every log keeps a state hash.
		calls, reply := take("exact", 1, minute)
		require.EqualValues(t, 1, reply[0])
		assert.Equal(t, []string{"ZADD", "TIME", "PEXPIRETIME", "HGETALL", "EXISTS", "ZREMRANGEBYSCORE", "ZCOUNT", "ZADD", "HSET", "PEXPIREAT", "PEXPIREAT"}, calls, "Redis 6.2: first decision on a key")
		calls, reply = take("exact", 1, minute)
		require.EqualValues(t, 1, reply[0])
		assert.Equal(t, []string{"ZADD", "TIME", "PEXPIRETIME", "HGETALL", "EXISTS", "ZREMRANGEBYSCORE", "ZCOUNT", "ZADD", "PTTL"}, calls, "Redis 6.2: admission")
		_, reply = take("exact", 1, minute)
		require.EqualValues(t, 1, reply[0])
		calls, reply = take("exact", 1, minute)
		require.EqualValues(t, 0, reply[0])
		assert.Equal(t, []string{"ZADD", "TIME", "PEXPIRETIME", "HGETALL", "EXISTS", "ZREMRANGEBYSCORE", "ZCOUNT", "ZSCORE", "ZRANGE", "ZRANGEBYSCORE", "ZRANGEBYSCORE"}, calls, "Redis 6.2: denial")
		take("two", 1, minute, second)
		calls, reply = take("two", 1, minute, second)
		require.EqualValues(t, 1, reply[0])
		assert.Equal(t, []string{"ZADD", "TIME", "PEXPIRETIME", "HGETALL", "EXISTS", "ZREMRANGEBYSCORE", "ZCOUNT", "ZCOUNT", "ZADD", "PTTL"}, calls, "Redis 6.2: admission under two policies")
		return
	}

	calls, reply := take("exact", 1, minute)
	require.EqualValues(t, 1, reply[0])
	assert.Equal(t, []string{"TIME", "PEXPIRETIME", "ZADD", "PEXPIREAT"}, calls, "first decision on a key")
	calls, reply = take("exact", 1, minute)
	require.EqualValues(t, 1, reply[0])
	assert.Equal(t, []string{"TIME", "PEXPIRETIME", "ZCOUNT", "ZADD"}, calls, "admission")
	_, reply = take("exact", 1, minute)
	require.EqualValues(t, 1, reply[0])
	calls, reply = take("exact", 1, minute)
	require.EqualValues(t, 0, reply[0])
	assert.Equal(t, []string{"TIME", "PEXPIRETIME", "ZCOUNT", "ZSCORE", "ZRANGE", "ZRANGEBYSCORE"}, calls, "denial")

	// Two policies: one count per window.
	take("two", 1, minute, second)
	calls, reply = take("two", 1, minute, second)
	require.EqualValues(t, 1, reply[0])
	assert.Equal(t, []string{"TIME", "PEXPIRETIME", "ZCOUNT", "ZCOUNT", "ZADD"}, calls, "admission under two policies")

	// A retry of an admission: the common path finds the ID with ZADD NX
	// and hands over to the full steps, which record nothing.
	req := slidelog.Request{Namespace: "calls", Key: "retry", Cost: 1, Policies: []slidelog.Policy{minute}, ID: 1000}
	run("take", req, 0)
	run("take", req, 0)
	calls, reply = run("take", req, 0)
	require.EqualValues(t, 1, reply[0], "a retry is reported admitted again")
	common, full := handOver(t, calls)
	assert.Equal(t, []string{"TIME", "PEXPIRETIME", "ZCOUNT", "ZADD"}, common, "retry, common path")
	assert.LessOrEqual(t, len(full), 8, "retry, full steps: %v", full)

	// Costs and buckets run the full steps: pinned so that they do not
	// grow. A take of cost 1 on a log with costs is handed over by the
	// common path after reading the expiry.
	take("cost", 2, minute)
	calls, reply = take("cost", 1, minute)
	require.EqualValues(t, 1, reply[0])
	common, full = handOver(t, calls)
	assert.Equal(t, []string{"TIME", "PEXPIRETIME"}, common, "admission into a log with costs, common path")
	// 9: the ZCOUNT that checks each window's sum against the count of
	// its entries (docs/algorithm.md, "Damaged keys").
	assert.LessOrEqual(t, len(full), 9, "admission into a log with costs: %v", full)
	bucketed := slidelog.Policy{Name: "b", Limit: 3, Window: time.Minute, Precision: time.Second}
	take("bucket", 1, bucketed)
	calls, reply = take("bucket", 1, bucketed)
	require.EqualValues(t, 1, reply[0])
	assert.LessOrEqual(t, len(calls), 8, "bucketed admission: %v", calls)
}

// handOver splits the commands of a take that the common path handed over
// to the whole script (redisstore.CommonHandOver) into those of each.
func handOver(t *testing.T, calls []string) (common, full []string) {
	t.Helper()
	i := slices.Index(calls, redisstore.CommonHandOver)
	require.GreaterOrEqual(t, i, 0, "the common path did not hand over: %v", calls)
	return calls[:i], calls[i+1:]
}
