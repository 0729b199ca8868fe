package redisstore

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	slidelog "github.com/slidelog/slidelog/core"
)

// UseLegacyScript makes s run the script variant for Redis 6.2 (no #!lua
// line) for good, whatever New finds, so that the store suite can run it
// on the test servers.
func UseLegacyScript(s *Store) {
	s.legacy.Store(true)
	s.pinned = true
}

// SetLegacyScript sets the variant s runs until the servers' version is
// next read.
func SetLegacyScript(s *Store, legacy bool) { s.legacy.Store(legacy) }

// UsesLegacyScript reports whether s runs the variant for Redis 6.2.
func UsesLegacyScript(s *Store) bool { return s.legacy.Load() }

// NewUnchecked is New without its checks of the servers.
func NewUnchecked(client redis.UniversalClient, opts ...Option) (*Store, error) {
	s, _, err := newStore(client, opts)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
		defer cancel()
		s.pipes.hookNodes(ctx)
	}
	return s, err
}

// Check runs New's checks of the servers on s.
func Check(s *Store, opts ...Option) error {
	_, cfg, err := newStore(s.client, opts)
	if err != nil {
		return err
	}
	return s.check(cfg)
}

// countingScript is the decision script wrapped so that it also returns
// the name of every command it ran, in order: its text runs unchanged
// inside a function that sees a redis table whose call counts.
// countingLegacy is the same for the Redis 6.2 variant.
var (
	countingScript = redis.NewScript(counting(strings.TrimPrefix(scriptSource, "#!lua\n")))
	countingLegacy = redis.NewScript(counting(legacyScriptSource()))
	countingCommon = redis.NewScript(counting(strings.TrimPrefix(commonSource, "#!lua\n")))
)

func counting(source string) string {
	return `local calls, rcall, rpcall = {}, redis.call, redis.pcall
local redis = setmetatable({call = function(...)
  calls[#calls + 1] = string.upper((...))
  return rcall(...)
end, pcall = function(...)
  calls[#calls + 1] = string.upper((...))
  return rpcall(...)
end}, {__index = redis})
local function body()
` + source + `
end
return {calls, body()}
`
}

// CommonHandOver separates, in ScriptCalls, the commands of the common
// path's script from those of the whole script it handed over to.
const CommonHandOver = "--"

// ScriptCalls runs op ("take", "record" or "refund") on req as s would,
// with at for a record (Unix µs), and returns the commands the script
// ran and its reply.
// A take that Take would send to the common path's script first runs it
// first here too; when it hands over, the calls of both are returned,
// separated by CommonHandOver.
func ScriptCalls(ctx context.Context, s *Store, op string, req slidelog.Request, at int64) ([]string, []any, error) {
	key := s.LogKey(req.Namespace, req.Key)
	full := countingScript
	if s.legacy.Load() {
		full = countingLegacy
	}
	if op == opTake && s.common(req) {
		calls, reply, err := scriptCalls(ctx, s, countingCommon, []string{key}, s.commonArgs(nil, req))
		if err != nil || len(reply) != 1 || reply[0] != int64(notCommon) {
			return calls, reply, err
		}
		more, reply, err := scriptCalls(ctx, s, full, logKeys(key), s.args(op, req, at))
		return append(append(calls, CommonHandOver), more...), reply, err
	}
	return scriptCalls(ctx, s, full, logKeys(key), s.args(op, req, at))
}

func scriptCalls(ctx context.Context, s *Store, sc *redis.Script, keys []string, args []any) ([]string, []any, error) {
	v, err := sc.Run(ctx, s.client, keys, args...).Slice()
	if err != nil {
		return nil, nil, err
	}
	if len(v) != 2 {
		return nil, nil, fmt.Errorf("counting script returned %d values", len(v))
	}
	raw, _ := v[0].([]any)
	calls := make([]string, len(raw))
	for i, c := range raw {
		calls[i], _ = c.(string)
	}
	reply, _ := v[1].([]any)
	return calls, reply, nil
}

// Decode is decode, the reading of the script's reply to a take.
var Decode = decode

func init() { releasedCalls = new(atomic.Int64) }

// ReusedCalls returns how many calls were given back for reuse so far in
// this test binary.
func ReusedCalls() int64 { return releasedCalls.Load() }

// OpenBatchers counts s's batchers that are not closed, and the senders
// they count in flight.
func OpenBatchers(s *Store) (open, senders int) {
	for _, b := range s.pipes.batchers() {
		b.mu.Lock()
		if !b.closed.Load() {
			open++
		}
		senders += len(b.senders)
		b.mu.Unlock()
	}
	return open, senders
}

// MatchServer makes s, made by NewUnchecked, run the script variant the
// test servers need (the Redis 6.2 one on 6.2), reading their version
// through probe, so that s's own client still sends nothing.
func MatchServer(ctx context.Context, s *Store, probe redis.UniversalClient) error {
	legacy, err := serverVariant(ctx, probe, nil)
	if err != nil {
		return err
	}
	s.legacy.Store(legacy)
	return nil
}

// KeySlot is the Redis Cluster hash slot of key, with no hash tag, as the
// store computes it to place its canaries.
func KeySlot(key string) int { return int(crc16(key) % 16384) }
