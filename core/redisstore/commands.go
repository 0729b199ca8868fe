package redisstore

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
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
// GET and SET read and write the canaries (canary.go): without them a
// master that loses its keys goes unreported.
var optionalCommands = []string{"PEXPIRETIME", "INFO", "GET", "SET"}

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
	{"SET", func(z, h string) []any { return []any{"set", z, "x", "px", 60000} }},
	{"GET", func(z, h string) []any { return []any{"get", z} }},
	{"DEL", func(z, h string) []any { return []any{"del", z, h} }},
}

// waitProbe checks WAIT, which WithReplicaAck needs.
var waitProbe = probe{"WAIT", func(z, h string) []any { return []any{"wait", 0, 0} }}

// checkTag is the hash tag of the check's keys (see probe); on a Cluster,
// a master that does not serve its slot gets the first of checkTag-1,
// checkTag-2, ... that it serves.
const checkTag = "slidelog-start-check"

// commandCheck is what checkCommands found on one server.
type commandCheck struct {
	addr    string   // the server's, or a Cluster's seeds
	refused []string // optional commands refused
	legacy  bool     // no PEXPIRETIME: Redis 6.2
	err     error
}

// checkMasters runs checkCommands on the server of a single-server client
// and, on a Cluster, on each of masters (those that answered New's PING:
// the others were logged as such), through its own client, together, so
// that one master whose ACL or configuration differs from the others' is
// found. The results are sorted by address.
func (s *Store) checkMasters(ctx context.Context, ack bool, masters []*redis.Client) []commandCheck {
	c, ok := s.client.(*redis.ClusterClient)
	if !ok {
		r := commandCheck{addr: s.checkedAddr()}
		r.refused, r.legacy, r.err = s.checkCommands(ctx, s.client, r.addr, checkTag, ack)
		return []commandCheck{r}
	}
	out := make([]commandCheck, len(masters))
	var wg sync.WaitGroup
	for i, n := range masters {
		wg.Go(func() {
			r := commandCheck{addr: n.Options().Addr}
			if tag, err := masterTag(ctx, c, r.addr); err != nil {
				r.err = err
			} else {
				r.refused, r.legacy, r.err = s.checkCommands(ctx, n, r.addr, tag, ack)
			}
			out[i] = r
		})
	}
	wg.Wait()
	slices.SortFunc(out, func(a, b commandCheck) int { return strings.Compare(a.addr, b.addr) })
	return out
}

// masterTag returns the first of checkTag, checkTag-1, checkTag-2, ...
// whose hash slot the master at addr serves, by the client's slot map. A
// master serves at least one of the Cluster's 16384 slots, and so, almost
// surely, one of the first 1<<16 tags.
func masterTag(ctx context.Context, c *redis.ClusterClient, addr string) (string, error) {
	for i := range 1 << 16 {
		tag := checkTag
		if i > 0 {
			tag = fmt.Sprintf("%s-%d", checkTag, i)
		}
		m, err := c.MasterForKey(ctx, "{"+tag+"}")
		if err != nil {
			return "", fmt.Errorf("the master of the check's keys on %s: %w", addr, err)
		}
		if m.Options().Addr == addr {
			return tag, nil
		}
	}
	return "", fmt.Errorf("no key of the check's is on %s by the slot map", addr)
}

// checkCommands runs every command the store needs on the server client
// reaches (for a ClusterClient, the master of the check's keys: New runs
// it on each master's own client, with a tag of that master's slots) on
// the check's keys, with hash tag tag, and fails with one error naming
// every command
// the user may not run (ErrPermission) and every one the server does not
// know (ErrUnsupportedVersion), wrapping both when both occur, or, where
// the server's answers show that it cannot decide at all, with what it is
// (ErrTopology: a replica, a Sentinel, a Cluster node behind a plain
// client). It returns
// the optional commands refused, which the caller logs, and whether the
// server lacks PEXPIRETIME: of the servers New accepts, only Redis 6.2,
// which runs the legacy script (a user not allowed INFO leaves New no
// other way to tell).
func (s *Store) checkCommands(ctx context.Context, client redis.Cmdable, addr, tag string, ack bool) (refused []string, legacy bool, err error) {
	zset := s.prefix + "{" + tag + "}:z"
	hash := s.prefix + "{" + tag + "}:h"
	ps := probes
	if ack {
		ps = append(slices.Clip(ps), waitProbe)
	}
	pipe := client.Pipeline()
	cmds := make([]*redis.Cmd, len(ps))
	for i, p := range ps {
		cmds[i] = pipe.Do(ctx, p.args(zset, hash)...)
	}
	_, _ = pipe.Exec(ctx)
	_, cluster := s.client.(*redis.ClusterClient)
	// A Sentinel knows neither DEL nor EXISTS (the first probes); a server
	// that knows one of them and not the other had it renamed away.
	sentinel := unknownCommand(cmds[0].Err()) && unknownCommand(cmds[1].Err())
	// Every command the store cannot use is named, not the first alone:
	// one restart per command would find them one by one.
	var unusable []error
	var keyless []string // commands refused on the store's keys
	var keyErr, other error
	named := map[string]bool{}
	for i, c := range cmds {
		err := c.Err()
		name := ps[i].name
		switch {
		case err == nil, errors.Is(err, redis.Nil), redis.HasErrorPrefix(err, "NOSCRIPT"):
		case (noPermission(err) || unknownCommand(err) && name != "PEXPIRETIME") && slices.Contains(optionalCommands, name):
			// Refused by the user's ACL, or renamed away (rename-command).
			refused = append(refused, name)
		case redis.HasErrorPrefix(err, "ASK") && cluster:
			// A Cluster master's own client on a slot migrating away (a
			// live reshard), whose absent keys it sends elsewhere: the
			// server redirects only a command the user may run and it
			// knows (the ACL and the command table are checked first).
		case redis.HasErrorPrefix(err, "READONLY"):
			return nil, false, replicaError(addr)
		case redis.HasErrorPrefix(err, "MOVED") && cluster:
			// A Cluster master's own client, whose slot moved away since the
			// slot map was read.
			if other == nil {
				other = fmt.Errorf("%s on %s: %w", name, addr, err)
			}
		case redis.HasErrorPrefix(err, "MOVED"):
			return nil, false, fmt.Errorf("%w: %s is a node of a Redis Cluster, where a plain redis.Client gets MOVED for most keys; use redis.NewClusterClient(redisstore.ClusterOptions(...)) or redisstore.Connect", ErrTopology, addr)
		case unknownCommand(err) && name == "PEXPIRETIME":
			// Redis 6.2: the scripts do without it.
			legacy = true
		case unknownCommand(err) && sentinel:
			return nil, false, sentinelError(addr)
		case named[name]:
			// DEL is probed twice.
		case noPermission(err) && !strings.Contains(err.Error(), "permissions to run"):
			// "No permissions to access a key" (Redis 7 and later, Valkey),
			// "... to access one of the keys used as arguments" (6.2).
			named[name] = true
			keyless = append(keyless, name)
			if keyErr == nil {
				keyErr = err
			}
		case noPermission(err):
			named[name] = true
			unusable = append(unusable, fmt.Errorf("%w: %s: the user may not run %s, which the store needs: %w; see docs/operations.md for the ACL a limiter needs", ErrPermission, addr, name, err))
		case unknownCommand(err):
			named[name] = true
			unusable = append(unusable, fmt.Errorf("%w: %s does not know %s, which the store needs (renamed or disabled by rename-command in its configuration, or a server too old): %w", ErrUnsupportedVersion, addr, name, err))
		default:
			if other == nil {
				other = fmt.Errorf("%s on %s: %w", name, addr, err)
			}
		}
	}
	if len(keyless) > 0 {
		unusable = append(unusable, fmt.Errorf("%w: %s: the user may not use the store's keys (%s*) with %s: %w; allow them with ~%s*", ErrPermission, addr, s.prefix, strings.Join(keyless, ", "), keyErr, s.prefix))
	}
	switch len(unusable) {
	case 0:
		return refused, legacy, other
	case 1:
		return nil, false, unusable[0]
	}
	return nil, false, fmt.Errorf("redisstore: %s: %d commands the store needs cannot be used, one line each:\n%w", addr, len(unusable), errors.Join(unusable...))
}

// unknownCommand reports whether err is a server's answer that it does not
// know the command: a Sentinel's to a data command, an old server's, or
// any server's to a command its configuration renamed away.
func unknownCommand(err error) bool {
	return err != nil && strings.Contains(err.Error(), "unknown command")
}
