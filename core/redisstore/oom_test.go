package redisstore_test

import (
	"strconv"
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

// A server out of memory with maxmemory-policy noeviction refuses every
// decision with OOM, having written nothing, on every server the store
// runs on. Redis 7 refuses the #!lua script whole; Redis 6.2 (and any
// server running the script without that line) refuses only a script's
// first write that needs memory, so a decision whose first write frees
// some (the eviction of entries that left the window, buckets that
// stopped counting) would then write past maxmemory: the legacy script
// starts with a write that needs memory and changes nothing. Both
// variants run here, on a redis-server of the test's own (the one on
// PATH: make test-servers puts Redis 6.2 and Valkey on it).
//
// The server is out of memory by a margin no client buffer can undo.
// Filled only until its first refusal, it is a few KiB past maxmemory at
// most, and falls back below as it frees the refused command's buffers
// and shrinks its clients' reply and query buffers in its cron (a new
// connection's 16 KiB reply buffer to what it used, within 100 ms): Redis
// 7.0 went 8 KiB under in the middle of the decisions, Redis 6.2 started
// them 5 KiB under, and a server under maxmemory runs a decision, rightly.
// So maxmemory is then set 1 MiB below what the server holds, and the
// test checks that it stayed past it to the end.
func TestOutOfMemoryRefusesEveryDecision(t *testing.T) {
	srv := redistest.StartServer(t, redistest.ServerConfig{Args: []string{"--maxmemory", "4mb", "--maxmemory-policy", "noeviction"}})
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer client.Close()
	info, err := client.Info(t.Context(), "server").Result()
	require.NoError(t, err)
	t.Logf("server: %s", serverVersionLine(info))

	clock := newTestClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	exact := slidelog.Policy{Name: "h", Limit: 100, Window: time.Hour}
	bucketed := slidelog.Policy{Name: "b", Limit: 100, Window: time.Hour, Precision: time.Minute}
	type variant struct {
		name   string
		store  *redisstore.Store
		before []string // identities with a log from before memory ran out
	}
	var variants []*variant
	for _, name := range []string{"detected", "legacy"} {
		s, err := redisstore.New(client, redisstore.WithClock(clock.Now), redisstore.WithKeyPrefix("oom-"+name+":"))
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		if name == "legacy" {
			redisstore.UseLegacyScript(s)
		}
		variants = append(variants, &variant{name: name, store: s})
	}
	id := uint64(0)
	take := func(s *redisstore.Store, key string, cost int, p slidelog.Policy) (slidelog.Result, error) {
		id++
		return s.Take(t.Context(), slidelog.Request{Namespace: "oom", Key: key, Cost: cost, Policies: []slidelog.Policy{p}, ID: id})
	}

	// Logs from before: entries of cost 2 (a log with a state hash and
	// costs) and buckets, which will have left their windows.
	for _, v := range variants {
		for i := range 20 {
			key := "old-cost" + strconv.Itoa(i)
			_, err := take(v.store, key, 2, exact)
			require.NoError(t, err)
			key2 := "old-bucket" + strconv.Itoa(i)
			_, err = take(v.store, key2, 1, bucketed)
			require.NoError(t, err)
			v.before = append(v.before, key, key2)
		}
	}
	snapshot := func(v *variant) map[string]string {
		m := map[string]string{}
		for _, key := range v.before {
			for _, k := range keysOf(v.store, "oom", key) {
				dump, err := client.Dump(t.Context(), k).Result()
				if err == redis.Nil {
					dump = "<none>"
				} else {
					require.NoError(t, err)
				}
				m[k] = dump
			}
		}
		return m
	}
	before := map[string]map[string]string{}
	for _, v := range variants {
		before[v.name] = snapshot(v)
	}

	// Fill memory until the server refuses a write.
	filled := 0
	for ; ; filled++ {
		err := client.Set(t.Context(), "junk:"+strconv.Itoa(filled), strings.Repeat("x", 4096), 0).Err()
		if err != nil {
			require.ErrorContains(t, err, "OOM", "filling memory")
			break
		}
		require.Less(t, filled, 10000, "the server never ran out of memory")
	}
	// Then take maxmemory a margin below what the server holds, far more
	// than its clients' buffers and every decision's writes.
	memory := func() (used, maxmemory int64) {
		info, err := client.Info(t.Context(), "memory").Result()
		require.NoError(t, err)
		for _, line := range strings.Split(info, "\n") {
			name, v, _ := strings.Cut(strings.TrimSpace(line), ":")
			if name == "used_memory" || name == "maxmemory" {
				n, err := strconv.ParseInt(v, 10, 64)
				require.NoError(t, err)
				if name == "used_memory" {
					used = n
				} else {
					maxmemory = n
				}
			}
		}
		require.NotZero(t, used, "INFO memory has no used_memory")
		require.NotZero(t, maxmemory, "INFO memory has no maxmemory")
		return used, maxmemory
	}
	const margin = 1 << 20
	used, _ := memory()
	require.NoError(t, client.ConfigSet(t.Context(), "maxmemory", strconv.FormatInt(used-margin, 10)).Err())
	usedBefore, maxmemory := memory()
	require.Greater(t, usedBefore-maxmemory, int64(margin/2), "used_memory %d, maxmemory %d: not out of memory by the margin", usedBefore, maxmemory)
	err = client.Set(t.Context(), "junk:after", "x", 0).Err()
	require.ErrorContains(t, err, "OOM", "a write on the server out of memory")
	dbsize, err := client.DBSize(t.Context()).Result()
	require.NoError(t, err)

	// Two hours later: every entry and bucket from before has left its
	// window, so a decision's first write could be an eviction.
	clock.Advance(2 * time.Hour)
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			refused := 0
			check := func(what string, _ slidelog.Result, err error) {
				t.Helper()
				if assert.Error(t, err, "%s: a decision on a server out of memory", what) {
					assert.ErrorIs(t, err, slidelog.ErrUnavailable, what)
					assert.ErrorContains(t, err, "OOM command not allowed", what)
					refused++
				}
			}
			for i := range 200 {
				res, err := take(v.store, "fresh"+strconv.Itoa(i), 1, exact)
				check("fresh key, cost 1", res, err)
			}
			for i := range 50 {
				res, err := take(v.store, "fresh-cost"+strconv.Itoa(i), 3, exact)
				check("fresh key, cost 3", res, err)
				res, err = take(v.store, "fresh-bucket"+strconv.Itoa(i), 1, bucketed)
				check("fresh key, bucketed", res, err)
			}
			for i := range 20 {
				res, err := take(v.store, "old-cost"+strconv.Itoa(i), 1, exact)
				check("log with costs whose entries left", res, err)
				res, err = take(v.store, "old-bucket"+strconv.Itoa(i), 1, bucketed)
				check("buckets that stopped counting", res, err)
			}
			t.Logf("%s: %d of 340 decisions refused with OOM (store runs the Redis 6.2 variant: %v)", v.name, refused, redisstore.UsesLegacyScript(v.store))

			// Nothing written: no fresh key exists, the old logs are as
			// they were, the key count has not moved.
			for prefix, count := range map[string]int{"fresh": 200, "fresh-cost": 50, "fresh-bucket": 50} {
				for i := range count {
					n, err := client.Exists(t.Context(), keysOf(v.store, "oom", prefix+strconv.Itoa(i))...).Result()
					require.NoError(t, err)
					assert.Zero(t, n, "keys of %s%d written on a server out of memory", prefix, i)
				}
			}
			assert.Equal(t, before[v.name], snapshot(v), "logs from before changed on a server out of memory")
			n, err := client.DBSize(t.Context()).Result()
			require.NoError(t, err)
			assert.Equal(t, dbsize, n, "keys on the server")
		})
	}
	usedAfter, _ := memory()
	t.Logf("used_memory %d before the decisions, %d after, maxmemory %d (%d fillers)", usedBefore, usedAfter, maxmemory, filled)
	assert.Greater(t, usedAfter, maxmemory, "the server was out of memory until the last decision")
}

// serverVersionLine names the server from INFO server.
func serverVersionLine(info string) string {
	var name, version string
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "redis_version:"); ok && version == "" {
			name, version = "redis", v
		}
		if v, ok := strings.CutPrefix(line, "valkey_version:"); ok {
			name, version = "valkey", v
		}
	}
	return name + " " + version
}
