package redisstore

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// scriptCommands are the commands the store's Lua scripts call, read from
// their text, upper case and sorted. A user that may run EVALSHA but not
// one of these gets NOPERM in the middle of a decision.
var scriptCommands = luaCommands(scriptSource, commonSource, repairSource, peekSource)

// luaCommands returns the commands the Lua sources call with redis.call
// or redis.pcall, upper case, sorted, each once.
func luaCommands(sources ...string) []string {
	re := regexp.MustCompile(`redis\.p?call\(\s*['"]([A-Za-z]+)['"]`)
	var out []string
	for _, src := range sources {
		for _, m := range re.FindAllStringSubmatch(src, -1) {
			if c := strings.ToUpper(m[1]); !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
	}
	slices.Sort(out)
	return out
}

// optionalCommands are commands the store does without: PEXPIRETIME
// (Redis 7 and later), which the decisions' common path needs, and
// without which each decision runs the whole script; and INFO, from
// which the script reads the server's identity (run_id, master_replid):
// without it every kept admission of a key is sent again with each of
// the key's decisions until it leaves the journal.
var optionalCommands = []string{"PEXPIRETIME", "INFO"}

// probe is one command of the start-up check of the user's permissions:
// the command's name as the docs spell it (a subcommand as
// "SCRIPT|LOAD"), and its arguments given the check's two keys, a sorted
// set and a hash under the store's prefix that no log uses, which the
// check deletes. Every probe runs harmlessly on them.
type probe struct {
	name string
	args func(zset, hash string) []any
}

// probeScript is the one-line script of the probes of EVAL, SCRIPT LOAD
// and EVALSHA: it touches no key.
const probeScript = "return 1"

// probes checks every command the store runs, in an order that leaves the
// check's keys deleted. The scripts' commands are probes of their own, on
// the check's keys; a command the scripts call that has no probe here
// fails the package's tests.
var probes = []probe{
	{"DEL", func(z, h string) []any { return []any{"del", z, h} }},
	{"EXISTS", func(z, h string) []any { return []any{"exists", z} }},
	{"TYPE", func(z, h string) []any { return []any{"type", z} }},
	{"TIME", func(z, h string) []any { return []any{"time"} }},
	{"ZADD", func(z, h string) []any { return []any{"zadd", z, 1, "m"} }},
	{"ZCOUNT", func(z, h string) []any { return []any{"zcount", z, "-inf", "+inf"} }},
	{"ZRANGE", func(z, h string) []any { return []any{"zrange", z, 0, -1} }},
	{"ZRANGEBYSCORE", func(z, h string) []any { return []any{"zrangebyscore", z, "-inf", "+inf"} }},
	{"ZSCORE", func(z, h string) []any { return []any{"zscore", z, "m"} }},
	{"ZREM", func(z, h string) []any { return []any{"zrem", z, "m"} }},
	{"ZREMRANGEBYRANK", func(z, h string) []any { return []any{"zremrangebyrank", z, 0, -1} }},
	{"ZREMRANGEBYSCORE", func(z, h string) []any { return []any{"zremrangebyscore", z, "-inf", "+inf"} }},
	{"HSET", func(z, h string) []any { return []any{"hset", h, "f", 1} }},
	{"HINCRBY", func(z, h string) []any { return []any{"hincrby", h, "f", 1} }},
	{"HGET", func(z, h string) []any { return []any{"hget", h, "f"} }},
	{"HMGET", func(z, h string) []any { return []any{"hmget", h, "f"} }},
	{"HGETALL", func(z, h string) []any { return []any{"hgetall", h} }},
	{"HLEN", func(z, h string) []any { return []any{"hlen", h} }},
	{"PEXPIRE", func(z, h string) []any { return []any{"pexpire", h, 60000} }},
	{"PEXPIREAT", func(z, h string) []any {
		return []any{"pexpireat", h, time.Now().Add(time.Minute).UnixMilli()}
	}},
	{"PTTL", func(z, h string) []any { return []any{"pttl", h} }},
	{"PEXPIRETIME", func(z, h string) []any { return []any{"pexpiretime", h} }},
	{"INFO", func(z, h string) []any { return []any{"info", "server"} }},
	{"HDEL", func(z, h string) []any { return []any{"hdel", h, "f"} }},
	{"SCRIPT|LOAD", func(z, h string) []any { return []any{"script", "load", probeScript} }},
	{"EVALSHA", func(z, h string) []any { return []any{"evalsha", redis.NewScript(probeScript).Hash(), 0} }},
	{"EVAL", func(z, h string) []any { return []any{"eval", probeScript, 0} }},
	{"DEL", func(z, h string) []any { return []any{"del", z, h} }},
}

// waitProbe checks WAIT, which WithReplicaAck needs.
var waitProbe = probe{"WAIT", func(z, h string) []any { return []any{"wait", 0, 0} }}

// checkCommands runs every command the store needs on the server client
// reaches (on a Cluster, the master of the check's keys; each master runs
// the same ACL in practice) and fails with an error naming the first
// command the user may not run (ErrPermission) or, where the server's
// answers show that it cannot decide at all, what it is (ErrTopology: a
// replica, a Sentinel, a Cluster node behind a plain client). It returns
// the optional commands refused, which the caller logs, and whether the
// server lacks PEXPIRETIME: of the servers New accepts, only Redis 6.2,
// which runs the legacy script (a user not allowed INFO leaves New no
// other way to tell).
func (s *Store) checkCommands(ctx context.Context, addr string, ack bool) (refused []string, legacy bool, err error) {
	zset := s.prefix + "{slidelog-start-check}:z"
	hash := s.prefix + "{slidelog-start-check}:h"
	ps := probes
	if ack {
		ps = append(slices.Clip(ps), waitProbe)
	}
	pipe := s.client.Pipeline()
	cmds := make([]*redis.Cmd, len(ps))
	for i, p := range ps {
		cmds[i] = pipe.Do(ctx, p.args(zset, hash)...)
	}
	_, _ = pipe.Exec(ctx)
	// A Sentinel knows neither DEL nor EXISTS (the first probes); a server
	// that knows one of them and not the other had it renamed away.
	sentinel := unknownCommand(cmds[0].Err()) && unknownCommand(cmds[1].Err())
	for i, c := range cmds {
		err := c.Err()
		switch {
		case err == nil, errors.Is(err, redis.Nil), redis.HasErrorPrefix(err, "NOSCRIPT"):
		case (noPermission(err) || unknownCommand(err) && ps[i].name != "PEXPIRETIME") && slices.Contains(optionalCommands, ps[i].name):
			// Refused by the user's ACL, or renamed away (rename-command).
			refused = append(refused, ps[i].name)
		case noPermission(err) && !strings.Contains(err.Error(), "permissions to run"):
			// "No permissions to access a key" (Redis 7 and later, Valkey),
			// "... to access one of the keys used as arguments" (6.2).
			return nil, false, fmt.Errorf("%w: %s: the user may not use the store's keys (%s*) with %s: %w; allow them with ~%s*", ErrPermission, addr, s.prefix, ps[i].name, err, s.prefix)
		case noPermission(err):
			return nil, false, fmt.Errorf("%w: %s: the user may not run %s, which the store needs: %w; see docs/operations.md for the ACL a limiter needs", ErrPermission, addr, ps[i].name, err)
		case redis.HasErrorPrefix(err, "READONLY"):
			return nil, false, replicaError(addr)
		case redis.HasErrorPrefix(err, "MOVED"):
			return nil, false, fmt.Errorf("%w: %s is a node of a Redis Cluster, where a plain redis.Client gets MOVED for most keys; use redis.NewClusterClient(redisstore.ClusterOptions(...)) or redisstore.Connect", ErrTopology, addr)
		case unknownCommand(err) && ps[i].name == "PEXPIRETIME":
			// Redis 6.2: the scripts do without it.
			legacy = true
		case unknownCommand(err) && sentinel:
			return nil, false, sentinelError(addr)
		case unknownCommand(err):
			return nil, false, fmt.Errorf("%w: %s does not know %s, which the store needs (renamed or disabled by rename-command in its configuration, or a server too old): %w", ErrUnsupportedVersion, addr, ps[i].name, err)
		default:
			return nil, false, fmt.Errorf("%s on %s: %w", ps[i].name, addr, err)
		}
	}
	return refused, legacy, nil
}

// unknownCommand reports whether err is a server's answer that it does not
// know the command: a Sentinel's to a data command, an old server's, or
// any server's to a command its configuration renamed away.
func unknownCommand(err error) bool {
	return err != nil && strings.Contains(err.Error(), "unknown command")
}
