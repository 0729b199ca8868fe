package slidelog

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed script.lua
var scriptSource string

// script is the one decision script; its text never changes per request.
// It declares itself with #!lua, so Redis 7 and later refuse it whole when
// out of memory. legacyScript is the same text without that line, for
// Redis 6.2, which cannot parse it (see RedisStore).
var (
	script       = redis.NewScript(scriptSource)
	legacyScript = redis.NewScript(legacyScriptSource())
)

// legacyScriptSource is the script without its #!lua line.
func legacyScriptSource() string { return strings.TrimPrefix(scriptSource, "#!lua\n") }

// Operations of the script (its ARGV[1]).
const (
	opTake   = "take"
	opRecord = "record"
	opRefund = "refund"
)

// logKeys returns the keys the script works on for the log at key: the
// log itself, the costs of its entries, its per-window state, the buckets
// of policies with a precision and the recent admissions into them. They
// share key's hash tag, so they live in one Cluster slot.
func logKeys(key string) []string {
	return []string{key, key + ":c", key + ":s", key + ":b", key + ":r"}
}

// DefaultKeyPrefix is the prefix of every Redis key unless WithKeyPrefix
// says otherwise.
const DefaultKeyPrefix = "slidelog:"

// keyTagBytes is how many bytes of the identity's HMAC name its key: 128
// bits, so that no two identities share a key.
const keyTagBytes = 16

// RedisStore keeps each identity's log in one Redis sorted set, one entry
// per admitted request carrying its cost, with a running sum per window
// beside it, and decides with one Lua script run per call, so decisions
// are atomic and exact on a single Redis and on a Redis Cluster alike, and
// a request of cost 200,000 costs Redis what one of cost 1 does.
//
// It runs on Redis 6.2, 7.x and 8.x and on Valkey 7.2 and later. New
// reads the server version of every master: on Redis 6.2, which cannot
// parse the script's #!lua line, the store runs the script without it and
// loses Redis 7's whole-script refusal when out of memory (a decision
// then fails at its first write that needs memory, or writes past
// maxmemory once it has freed some); older servers make New fail with
// ErrRedisVersion. When a server answers that it cannot compile the
// script (New could not reach it, or it was replaced since), the store
// reads the versions again, at most once a second.
//
// The key of an identity is prefix + "{" + tag + "}", where tag is the
// first 128 bits of HMAC-SHA-256(secret, namespace and identity),
// base64url-encoded (see Key). The
// hash tag keeps all of an identity's data in one slot, no identity can
// choose its key or, with a secret, its slot, and braces, colons or any
// other byte in an identity are harmless.
//
// RedisStore is safe for concurrent use. Close does not close the client.
type RedisStore struct {
	client redis.UniversalClient
	prefix string
	secret []byte
	clock  func() time.Time
	macs   sync.Pool
	pipes  *pipelines
	legacy atomic.Bool // run legacyScript: a master is Redis 6.2
	pinned bool        // tests: keep the variant whatever the servers are
	// detected is when (Unix ns) a script that failed to compile last
	// made the store read the servers' version.
	detected atomic.Int64
}

// NewRedisStore returns a store on client, a *redis.Client, a
// *redis.ClusterClient or anything else implementing
// redis.UniversalClient. Options: WithKeyPrefix, WithKeySecret,
// WithAutoPipelining, WithClock.
// It fails with ErrNilClient or ErrInvalidOption.
func NewRedisStore(client redis.UniversalClient, opts ...StoreOption) (*RedisStore, error) {
	if client == nil {
		return nil, ErrNilClient
	}
	cfg := storeConfig{keyPrefix: DefaultKeyPrefix}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.applyStore(&cfg); err != nil {
			return nil, err
		}
	}
	s := &RedisStore{client: client, prefix: cfg.keyPrefix, secret: cfg.keySecret, clock: cfg.clock}
	if !cfg.pipeliningSet {
		cfg.pipelinesPerNode = DefaultPipelinesPerNode
	}
	s.pipes = newPipelines(client, cfg.pipelinesPerNode)
	s.macs.New = func() any { return hmac.New(sha256.New, s.secret) }
	return s, nil
}

// WithKeyPrefix sets the prefix of every Redis key of a RedisStore
// (default DefaultKeyPrefix). It may not contain '{' or '}', which would
// change the key's hash tag. MemoryStore ignores it.
func WithKeyPrefix(prefix string) StoreOption {
	return storeOptionFunc(func(c *storeConfig) error {
		if strings.ContainsAny(prefix, "{}") {
			return fmt.Errorf("%w: key prefix %q contains a brace", ErrInvalidOption, prefix)
		}
		c.keyPrefix = prefix
		return nil
	})
}

// WithKeySecret sets the secret of the HMAC that turns identities into
// RedisStore keys. Every instance sharing a Redis must use the same secret.
// Without one the HMAC key is empty: keys stay distinct and brace-proof,
// but a client that can pick its identity freely could search for
// identities that land on one Cluster slot. MemoryStore ignores it.
func WithKeySecret(secret []byte) StoreOption {
	return storeOptionFunc(func(c *storeConfig) error {
		c.keySecret = append([]byte(nil), secret...)
		return nil
	})
}

// Key returns the Redis key that holds the log of identity in namespace
// (Request.Namespace; Limiter.Namespace gives a limiter's, its name). The
// costs of the log's entries and its per-window sums live beside it, in
// Key + ":c" and Key + ":s", and the buckets of policies with a precision
// and their latest admissions in Key + ":b" and Key + ":r", in the same
// hash slot. The HMAC reads
// the namespace's length as a uvarint, the namespace, then the identity,
// so no two (namespace, identity) pairs share a key.
func (s *RedisStore) Key(namespace, identity string) string {
	mac := s.macs.Get().(hash.Hash)
	mac.Reset()
	var n [binary.MaxVarintLen64]byte
	mac.Write(n[:binary.PutUvarint(n[:], uint64(len(namespace)))])
	mac.Write([]byte(namespace))
	mac.Write([]byte(identity))
	var sum [sha256.Size]byte
	tag := mac.Sum(sum[:0])[:keyTagBytes]
	s.macs.Put(mac)
	var buf [64]byte
	b := append(buf[:0], s.prefix...)
	b = append(b, '{')
	b = base64.RawURLEncoding.AppendEncode(b, tag)
	b = append(b, '}')
	return string(b)
}

// Take implements Store with one run of the decision script.
func (s *RedisStore) Take(ctx context.Context, req Request) (Result, error) {
	return s.take(ctx, req, s.route(ctx, req), wait{})
}

// route is where req's decision runs: its key and, on a Cluster, the
// address of the master holding it ("" on a single server or when the
// slot map does not know yet; the client then routes by key itself).
type route struct{ key, node string }

func (s *RedisStore) route(ctx context.Context, req Request) route {
	r := route{key: s.Key(req.Namespace, req.Key)}
	if c, ok := s.client.(*redis.ClusterClient); ok {
		if m, err := c.MasterForKey(ctx, r.key); err == nil {
			r.node = m.Options().Addr
		}
	}
	return r
}

// take runs the decision script for req at r, computed once per decision
// so that the limiter's breaker and the pipelines share it. With a w, the
// call also ends when w's node is found stalled, and reports the node's
// replies to w.
func (s *RedisStore) take(ctx context.Context, req Request, r route, w wait) (Result, error) {
	if err := req.validate(); err != nil {
		return Result{}, err
	}
	reply, err := s.pipes.run(ctx, s.script(), r, w, s.args(opTake, req, 0))
	if err != nil {
		if compileError(err) {
			s.redetect(ctx)
		}
		return Result{}, unavailable(ctx, err)
	}
	if len(reply) != 3+3*len(req.Policies) {
		return Result{}, fmt.Errorf("%w: script returned %d values for %d policies", ErrUnavailable, len(reply), len(req.Policies))
	}
	return decode(reply, req.Policies, SourceRedis), nil
}

// args are the script's arguments for op on req; at is the time of a
// recorded admission in microseconds (0 for the other operations).
func (s *RedisStore) args(op string, req Request, at int64) []any {
	args := make([]any, 0, 5+3*len(req.Policies))
	args = append(args, op, s.nowArg(), member(req.ID), req.Cost, at)
	for _, p := range req.Policies {
		args = append(args, p.Limit, p.windowMicros(), p.Precision.Microseconds())
	}
	return args
}

// script returns the variant of the decision script the servers run.
func (s *RedisStore) script() *redis.Script {
	if s.legacy.Load() {
		return legacyScript
	}
	return script
}

// Refund implements Store with one run of the script: it removes the
// request's entry and subtracts the cost recorded with it (whatever
// req.Cost says) from every window that counts it. For the policies of
// req with a precision it subtracts the cost from the bucket the request
// was counted in, if the request is among the latest admissions the
// script remembers (see docs/algorithm.md); otherwise it changes nothing
// there, which can only over-count.
func (s *RedisStore) Refund(ctx context.Context, req Request) error {
	req.Cost = max(req.Cost, 1)
	err := s.script().Run(ctx, s.client, logKeys(s.Key(req.Namespace, req.Key)), s.args(opRefund, req, 0)...).Err()
	if err != nil {
		return unavailable(ctx, err)
	}
	return nil
}

// Record writes an admission that was decided elsewhere (the limiter's
// local fallback while Redis was unreachable) into req's log at time at,
// to the microsecond, with req.Cost, without checking any limit: from
// then on it counts against later decisions until at plus each window.
// It is one run of the script, on the key and slot of Take. Recording an
// ID already in the log, by Take or Record, changes nothing; an
// admission that has left every window of req.Policies is not written.
// It fails with ErrInvalidPolicy, ErrInvalidCost or ErrUnavailable.
func (s *RedisStore) Record(ctx context.Context, req Request, at time.Time) error {
	return s.record(ctx, req, at, s.route(ctx, req), wait{})
}

// record is Record at r, through the pipelines, ending early when w's
// node stalls.
func (s *RedisStore) record(ctx context.Context, req Request, at time.Time, r route, w wait) error {
	if err := req.validateRecord(at); err != nil {
		return err
	}
	if _, err := s.pipes.run(ctx, s.script(), r, w, s.args(opRecord, req, at.UnixMicro())); err != nil {
		return unavailable(ctx, err)
	}
	return nil
}

// Reset implements Store: it deletes the identity's keys.
func (s *RedisStore) Reset(ctx context.Context, req Request) error {
	if err := s.client.Del(ctx, logKeys(s.Key(req.Namespace, req.Key))...).Err(); err != nil {
		return unavailable(ctx, err)
	}
	return nil
}

// Close implements Store. It does not close the Redis client, which the
// caller owns.
func (s *RedisStore) Close() error { return nil }

func (s *RedisStore) nowArg() int64 {
	if s.clock == nil {
		return 0 // the script reads the server's clock
	}
	return s.clock().UnixMicro()
}

// memberBytes is the length of a log entry's member: the low 48 bits of
// the request ID. Six bytes keep an entry's member in jemalloc's 8-byte
// size class inside a skiplist (an 8-byte member takes 16) and shorten
// every listpack entry, while two requests of one key share a member with
// probability about n/2^48 per admission (n entries in the window): such
// a collision would read as a retry and let one request through
// unrecorded, about once in 10^11 admissions into a full log of 2,000.
const memberBytes = 6

// member is the binary form of a request ID's low 48 bits: the shortest
// member that stays unique per call. Retries of a call send the same one.
func member(id uint64) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], id)
	return string(b[8-memberBytes:])
}

// decode turns the reply of the script's take into a Result.
func decode(reply []int64, policies []Policy, source Source) Result {
	allowed := reply[0] == 1
	states := make([]PolicyResult, len(policies))
	for i, p := range policies {
		v := reply[3+3*i:]
		states[i] = PolicyResult{
			Policy:     p,
			Allowed:    allowed || v[1] == 0,
			Remaining:  int(v[0]),
			RetryAfter: time.Duration(v[1]) * time.Microsecond,
			ResetAfter: time.Duration(v[2]) * time.Microsecond,
		}
	}
	res := NewResult(states, source)
	res.DecidedAt = time.UnixMicro(reply[1])
	res.steady = time.Duration(reply[2]) * time.Microsecond
	return res
}

// unavailable wraps a Redis error in ErrUnavailable, keeping the context's
// own error visible when the caller gave up.
func unavailable(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
		return fmt.Errorf("%w: %w (%w)", ErrUnavailable, ctxErr, err)
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}
