// Package redisstore keeps sliding-window logs in Redis, on a single
// server or a Redis Cluster, and decides each request in Lua: one script
// run, or two when the common path's short script (a take of cost 1 on
// exact policies) hands the request over, having written nothing, to the
// whole script. The run that decides is atomic, so decisions are exact
// however many processes share the server.
//
//	client, err := redisstore.Connect(ctx, "10.0.0.1:6379") // a *redis.Client or a *redis.ClusterClient
//	// or, through Sentinels: redisstore.Connect(ctx, "redis+sentinel://10.0.0.5:26379,10.0.0.6:26379/mymaster")
//	if err != nil { ... }
//	store, err := redisstore.New(client, redisstore.WithKeySecret(secret))
//	if err != nil { ... }
//	limiter, err := slidelog.New(store, slidelog.PerMinute(100), slidelog.WithName("api"))
//
// A Store implements slidelog.Store, slidelog.Describer (a store named
// "redis"), slidelog.Router (so a limiter keeps a circuit breaker per
// Cluster master, and the key and master of a request are computed once
// per decision),
// slidelog.Recorder and slidelog.Keeper (so the limiter's fallback
// admissions are kept by the store and written back within their key's
// next decision, in its script call) and slidelog.Peeker (a key's usage, read by a
// script that writes nothing). WithReplicaAck makes admissions survive a
// master's failover. Decisions headed for one node while its
// pipelines are busy leave together in the next pipeline (see
// WithAutoPipelining).
//
// Connect asks the server whether it is a Redis Cluster node and returns
// the client that fits, or a failover client for a redis+sentinel:// URL.
// New checks the servers once: that a master answers and the client's
// kind matches the server, and that the server is no replica or Sentinel
// (ErrUnreachable, ErrTopology), that the user may run every command the
// store runs, on every master that answers (ErrPermission names the
// master and the commands refused), their version (Redis
// 6.2 or later, Valkey 7.2 or later), their maxmemory-policy (an evicting
// policy drops logs under memory pressure and lets clients through: New
// logs a warning, or fails with WithStrictConfig), and it loads the script
// on every master. A Cluster seed that accepts connections but does not
// answer, which each reading of the slot map may wait for, is logged as a
// warning. A single server's node, in routes, logs and errors, is
// its address; through a failover client, the current master's.
//
// # Node health
//
// A Store judges its nodes itself, once per node, for every limiter on it.
// A call waits for its node as long as the node answers, however long it
// queues or this process waits for a CPU. A node is stalled when a request
// went out to it and it has sent nothing back, on any of its connections,
// for the stall timeout (WithStallTimeout), counted in time this process
// could run. The evidence is the kernel's record of each TCP connection
// (the bytes that have arrived and when the last did), so a reply waiting
// unread in a socket is an answer, and a request this process has not yet
// written is not owed. The calls waiting on a stalled node end with an
// error wrapping slidelog.ErrStalled (a limiter's failure mode decides
// them), its connections are broken off, and its episode ends: each later
// call waits a full stall timeout again. A dial is owed while the kernel
// shows its socket waiting for the node's answer (SYN_SENT), not once the
// handshake is done, unless the client dials over TLS (the node then owes
// the answer to the TLS hello). On a Unix socket the evidence is the
// bytes the kernel holds unread. Where the kernel keeps no record of the
// order of requests and replies (TLS, a client used before New, go-redis's
// retries), the silence is counted in alive time, and before a verdict
// the kernel is asked when the node's bytes last arrived on this
// process's TCP connections to it (for a node named by its IP address):
// the shorter silence counts, so a reply that arrived is not taken for
// silence, read or not (its bytes count from their arrival). A key
// of a log that holds another type is deleted and rebuilt like a lost
// key, and a field of its hashes that the script never writes is
// repaired in the same run (rebuilt from what it summarises, or counted
// as the limit) and logged as a warning naming the key; an error of one
// key's data wraps slidelog.ErrDamagedKey. A node's reply that a key's
// hash slot has no master (CLUSTERDOWN Hash slot not served, as a failover
// can leave a slot for a moment) ends that call at once, not after
// go-redis's retries, with an error wrapping slidelog.ErrUnservedKey: the
// node serves its own slots on. Close ends
// every waiting call, and every later one, with slidelog.ErrClosed. See docs/operations.md, "How a failing node is told
// from a busy one".
//
// # Panics
//
// A Store follows the rule of slidelog.Observer: it recovers a panic of
// code the application gave it (a hook of the Redis client's, a
// connection of its dialer, WithClock's clock) only where no caller of
// its own would receive it. A round trip runs on a sender goroutine of
// the store's, or in the goroutine of a caller that sends other callers'
// calls with its own: a panic in it is recovered wherever it runs, so
// that the store stays whole, and goes on, with its value, to the caller
// of each call the round trip carried, on the caller's goroutine (the
// Take, Refund, Reset or Peek panics), as if the client had run there: it
// is no answer of the store's, so no failure mode decides the call (a
// limiter that fails open does not admit it) and no breaker counts it
// against the node. A panic breaking a stalled node's connections
// off, or in WriteBack's writers, is recovered too (the admission stays
// kept), and so is one of the client, the logger or a function given to
// Notify in a reading of the canaries, and one of the logger logging a
// stalled node on the monitor's goroutine. Each is logged at ERROR with its value and stack, at most once
// per 10 s per kind. A panic on the caller's goroutine alone, such as
// the clock's in a Take, reaches the caller.
package redisstore

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
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/internal/writeback"
)

// logKeyTypes are the types of logKeys's keys, in order.
var logKeyTypes = []any{"zset", "hash", "hash", "hash", "zset"}

// wrongType reports whether err is a server's WRONGTYPE reply: a key of
// the log holds a value of another type.
func wrongType(err error) bool {
	return err != nil && serverReplied(err) && strings.Contains(err.Error(), "WRONGTYPE")
}

// keyError reports whether err concerns the data of one key, not its
// node: a key of the wrong type, or the decision script failing on what
// it read (a script that cannot compile is the server's).
func keyError(err error) bool {
	if err == nil || !serverReplied(err) || compileError(err) {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "WRONGTYPE") || strings.Contains(msg, "user_script") || strings.Contains(msg, "Error running script")
}

// repair deletes the keys of the log at key that hold the wrong type, so
// that the next call rebuilds it like a damaged key, and logs it.
func (s *Store) repair(ctx context.Context, key string) {
	n, err := repairScript.Run(ctx, s.client, logKeys(key), logKeyTypes...).Int()
	if err == nil && n > 0 {
		s.logger.Warn("redisstore: deleted keys of the wrong type; the log is rebuilt from what is left, as a damaged key", "key", key, "deleted", n)
	}
}

// repairedFlag is added to the first value of a reply of the decision
// script (and the peek script) when it found a field of the key's hashes
// that the script never writes (a stray write: a word, a negative or
// fractional number, a missing sum beside buckets) and repaired it:
// rebuilt what it summarises from the data, or counted a damaged cost or
// bucket as the limit (docs/algorithm.md, "Damaged keys").
const repairedFlag = 2

// repaired clears repairedFlag from reply, a reply of the script at key,
// and logs a warning when it was set.
func (s *Store) repaired(key string, reply []int64) {
	if len(reply) > 0 && reply[0] > 0 && reply[0]&repairedFlag != 0 {
		reply[0] &^= repairedFlag
		s.logger.Warn("redisstore: repaired damaged fields of a key (values the script never writes); what they summarise was rebuilt, damaged costs and buckets count as the limit until they leave the window", "key", key)
	}
}

// notCommon is commonScript's reply when the full steps are needed.
const notCommon = -1

// Operations of the script (its ARGV[1]).
const (
	opTake   = "take"
	opRecord = "record"
	opRefund = "refund"
	// opTakeKept is a take that first writes the key's kept admissions
	// (write-back, see Store.takeKept).
	opTakeKept = "takew"
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

// checkTimeout bounds New's checks of the servers.
const checkTimeout = time.Second

// keyTagBytes is how many bytes of the identity's HMAC name its key: 128
// bits, so that no two identities share a key.
const keyTagBytes = 16

// Store keeps each identity's log in one Redis sorted set, one entry
// per admitted request carrying its cost, with a running sum per window
// beside it. It decides a request with one run of a Lua script, or two
// when the short script of the common case (a cost of 1 on exact
// policies) hands the request over to the full one, which it does having
// written nothing; each run is atomic, so decisions are exact on a single
// Redis and on a Redis Cluster alike, and a request of cost 200,000 costs
// Redis what one of cost 1 does. A key whose data holds another type
// costs a repair and a run more.
//
// It runs on Redis 6.2, 7.x and 8.x and on Valkey 7.2 and later. New
// reads the server version of every master: on Redis 6.2, which cannot
// parse the script's #!lua line, the store runs the script with legacy.lua
// in its place, whose first command is a write that needs memory and
// changes nothing, so that a server out of memory (noeviction) refuses
// the decision with OOM before it writes anything, as Redis 7 does; older
// servers make New fail with ErrUnsupportedVersion. When a server answers that it cannot compile the
// script (New could not reach it, or it was replaced since), the store
// reads the versions again, at most once a second.
//
// The key of an identity is prefix + "{" + tag + "}", where tag is the
// first 128 bits of HMAC-SHA-256(secret, namespace and identity),
// base64url-encoded (see LogKey). The
// hash tag keeps all of an identity's data in one slot, no identity can
// choose its key or, with a secret, its slot, and braces, colons or any
// other byte in an identity are harmless.
//
// A master that loses its keys (restarted without persistence, flushed)
// is found by the store's canary keys, one per master, read again at most
// once a second while decisions are made: the store logs it at ERROR and
// tells the limiters on it (Notify, slidelog.EventDataLost). See
// canary.go and docs/operations.md, "Lost data".
//
// Store is safe for concurrent use. Close does not close the client.
type Store struct {
	client redis.UniversalClient
	prefix string
	secret []byte
	clock  func() time.Time
	macs   sync.Pool
	pipes  *pipelines
	// kept is the write-back journal: admissions no replica acknowledged
	// (WithReplicaAck) and a limiter's fallback admissions (Keep),
	// written within their key's next decision (takeKept).
	kept     *writeback.Journal[slidelog.Request]
	topology *reloader   // nil unless a Cluster
	legacy   atomic.Bool // run legacyScript: a master is Redis 6.2
	pinned   bool        // tests: keep the variant whatever the servers are
	logger   *slog.Logger
	canary   *canaries // the canary keys that tell a master lost its data (canary.go)
	// detected is when (Unix ns) a script that failed to compile last
	// made the store read the servers' version.
	detected atomic.Int64
}

// Option configures a Store.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	keyPrefix        string
	keySecret        []byte
	clock            func() time.Time
	logger           *slog.Logger
	strict           bool
	startUnreachable bool
	pipelinesPerNode int
	pipeliningSet    bool
	ack              *acker // WithReplicaAck
	stall            time.Duration
}

// New returns a store on client, a *redis.Client, a *redis.ClusterClient
// or anything else implementing redis.UniversalClient, after checking the
// servers (waiting at most a second in all, or a client's ReadTimeout more
// when its options lack ContextTimeoutEnabled). It checks that a master
// answers and that the client's kind matches the server: a ClusterClient
// on a standalone Redis, or a plain Client on a node of a Redis Cluster,
// fails with ErrTopology (Connect picks the right kind), as does a
// Cluster whose slot map leaves hash slots without a master. It reads the
// version of every master to pick the script variant they run, loads the
// script so the first decisions do not wait for it, and reads the
// maxmemory-policy. On a Cluster, masters that do not answer while others
// do are logged at ERROR level: decisions on their slots go to the
// limiter's failure mode until they answer, and they are checked once
// they do, as are masters New never saw (latecheck.go); masters that answer but
// refuse the client (a wrong password, protected mode) fail New with
// ErrUnreachable. A Cluster node (master or seed) that leaves a request
// unanswered for the client's ReadTimeout (half a second at most) is
// waited on once: New's later checks do not wait on it again, and run on
// the masters that answered.
//
// When no master answers (the server is down, its host does not resolve,
// the address has no port or is a URL, or it refuses the client: a Redis
// in protected mode or at maxclients, whose words the error quotes) New
// fails with ErrUnreachable, naming the address and the cause, unless
// WithStartUnreachable is given.
//
// It runs every command the store needs once, on two keys of its own
// under the key prefix that it deletes again: a user whose ACL refuses
// one fails New with ErrPermission, naming the command; a replica or a
// Sentinel fails it with ErrTopology, also when the user may not run
// INFO.
//
// It fails with ErrNilClient, slidelog.ErrInvalidOption, ErrUnreachable,
// ErrTopology, ErrPermission, ErrUnsupportedVersion, or ErrUnsafeConfig
// (only with WithStrictConfig).
func New(client redis.UniversalClient, opts ...Option) (*Store, error) {
	s, cfg, err := newStore(client, opts)
	if err != nil {
		return nil, err
	}
	if err := s.check(cfg); err != nil {
		return nil, err
	}
	return s, nil
}

// newStore builds a store without checking the servers.
func newStore(client redis.UniversalClient, opts []Option) (*Store, config, error) {
	if client == nil {
		return nil, config{}, ErrNilClient
	}
	cfg := config{keyPrefix: DefaultKeyPrefix, stall: DefaultStallTimeout}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.apply(&cfg); err != nil {
			return nil, cfg, err
		}
	}
	if cfg.logger == nil {
		cfg.logger = slog.Default()
	}
	s := &Store{client: client, prefix: cfg.keyPrefix, secret: cfg.keySecret, clock: cfg.clock, logger: cfg.logger, kept: writeback.New[slidelog.Request](), canary: newCanaries()}
	s.kept.OnDrop = func(dropped uint64) {
		cfg.logger.Warn("redisstore: write-back journal full: admissions dropped, Redis will not count them",
			"dropped", dropped, "max_entries", writeback.MaxEntries)
	}
	if !cfg.pipeliningSet {
		cfg.pipelinesPerNode = DefaultPipelinesPerNode
	}
	if cfg.ack != nil {
		if err := checkAck(client, cfg.ack, cfg.stall); err != nil {
			return nil, cfg, err
		}
		cfg.ack.logger = cfg.logger
	}
	s.pipes = newPipelines(client, cfg.pipelinesPerNode, cfg.ack, cfg.stall, cfg.logger)
	s.pipes.mon.onReply = s.canaryDue
	s.pipes.watchDials(client)
	s.macs.New = func() any { return &keyMAC{mac: hmac.New(sha256.New, s.secret)} }
	if c, ok := client.(*redis.ClusterClient); ok {
		s.topology = &reloader{client: c}
	}
	return s, cfg, nil
}

// check logs client settings and Redis configuration that weaken the
// store, checks that a master answers and that the client's kind matches
// the servers, picks the script variant and loads it; an unreachable
// server (unless cfg.startUnreachable), a mismatched client, an old server,
// or an evicting policy in strict mode, fails it.
func (s *Store) check(cfg config) error {
	for _, w := range clientWarnings(s.client) {
		cfg.logger.Warn("redisstore: redis client setting", "problem", w)
	}
	// The checks end when the servers have sent nothing for checkTimeout
	// while owing a reply, not after checkTimeout of wall time: a process
	// too busy to read a reply does not make a server unreachable.
	var probes atomic.Int32
	ctx, stop := s.pipes.checkContext(checkTimeout, nodeWait(s.client), &probes)
	defer stop()
	r, err := reach(ctx, s.client, &probes)
	switch {
	case err == nil:
	case errors.Is(err, ErrUnreachable) && cfg.startUnreachable:
		cfg.logger.Error("redisstore: starting without redis (WithStartUnreachable): every decision goes to the limiter's failure mode until redis answers", "error", err)
		s.pipes.hookNodes(ctx)
		return nil
	default:
		return err
	}
	s.pipes.hookNodes(ctx)
	for _, addr := range s.pipes.untrackedNodes() {
		cfg.logger.Warn("redisstore: the client had connections to this node before New, which the store cannot break off when the node stalls: "+
			"each of its decisions is handed to a sender goroutine, which costs CPU; create the store before the client's first command (as after redisstore.Connect)",
			"node", nodeName(addr))
	}
	for _, seed := range r.mute {
		cfg.logger.Warn("redisstore: a cluster seed accepted the connection but did not answer PING within the client's read timeout (1s at most): each reading of the slot map that tries it first (New's, and the client's after a MOVED or a failover) waits that long; mend it, or leave it out of the seeds",
			"seed", seed)
	}
	for _, d := range r.down {
		cfg.logger.Error("redisstore: a cluster master does not answer: decisions on its slots go to the limiter's failure mode until it does", "error", d.err)
	}
	// The later checks run on the masters that answered (on a Cluster),
	// each through its own client: the Cluster client would read the
	// slot map again for each, from the seeds in its own order, and wait
	// on a silent one.
	masters := r.masters
	checks := s.checkMasters(ctx, cfg.ack != nil, masters)
	var unusable []error
	for _, c := range checks {
		if cannotRun(c.err) {
			unusable = append(unusable, c.err)
		}
	}
	switch len(unusable) {
	case 0:
	case 1:
		return unusable[0]
	default:
		return fmt.Errorf("redisstore: the Cluster seeded by %s: %d of its %d masters cannot run commands the store needs, one master each:\n%w",
			s.checkedAddr(), len(unusable), len(checks), errors.Join(unusable...))
	}
	legacy := false
	for _, c := range checks {
		legacy = legacy || c.legacy
		logCommandCheck(cfg.logger, c)
	}
	switch err := s.checkVersion(ctx, masters); {
	case err == nil:
	case errors.Is(err, ErrUnsupportedVersion):
		return err
	default:
		cfg.logger.Warn("redisstore: could not read the redis version", "error", err)
		if legacy && !s.pinned {
			// No PEXPIRETIME: Redis 6.2.
			s.legacy.Store(true)
		}
	}
	s.warm(ctx, masters)
	s.checkReplicas(ctx, cfg.logger, masters)
	err = checkConfig(ctx, s.client, masters)
	if errors.Is(err, ErrUnsafeConfig) && cfg.strict {
		return err
	}
	logConfigCheck(cfg.logger, err)
	s.canary.checkedAt(s.checkedNodes(ctx, masters))
	s.readCanaries(ctx)
	return nil
}

// cannotRun reports whether err, checkCommands', says that the server
// cannot run the store's commands at all.
func cannotRun(err error) bool {
	return errors.Is(err, ErrPermission) || errors.Is(err, ErrTopology) || errors.Is(err, ErrUnsupportedVersion)
}

// logCommandCheck logs what checkCommands found on a server that does
// not keep the store from running: commands it could not check, and the
// optional ones the user may not run.
func logCommandCheck(logger *slog.Logger, c commandCheck) {
	switch {
	case c.err != nil:
		logger.Warn("redisstore: could not check the commands the redis user may run", "error", c.err)
	case len(c.refused) > 0:
		logger.Warn("redisstore: the redis user may not run these commands (or the server renamed them away), which the store does without at a cost: without PEXPIRETIME each decision runs the whole script; without INFO kept admissions are sent again with each decision of their key; without GET or SET a master that loses its keys goes unreported",
			"node", c.addr, "commands", c.refused)
	}
}

// logConfigCheck logs what checkConfig found, when it is not nil.
func logConfigCheck(logger *slog.Logger, err error) {
	switch {
	case err == nil:
	case errors.Is(err, ErrUnsafeConfig):
		logger.Warn("redisstore: evicting maxmemory-policy lets clients through under memory pressure", "error", err)
	default:
		logger.Warn("redisstore: could not check the redis configuration", "error", err)
	}
}

// checkedAddr names the servers New checks in its errors: the address of
// a single server (a failover client's master), or a Cluster's seeds.
func (s *Store) checkedAddr() string {
	if c, ok := s.client.(*redis.ClusterClient); ok {
		return strings.Join(c.Options().Addrs, ",")
	}
	if a := s.pipes.singleNode(); a != "" {
		return a
	}
	if s.pipes.failover {
		return nodeName(failoverAddr)
	}
	return nodeName("")
}

// warm loads the store's scripts on every master (those of masters, see
// eachOf) and makes the client load its command table and slot map, so
// that the first decisions wait for none of it. Errors are left to the
// decisions.
func (s *Store) warm(ctx context.Context, masters []*redis.Client) {
	load := func(ctx context.Context, c *redis.Client) error {
		if !s.legacy.Load() {
			if err := commonScript.Load(ctx, c).Err(); err != nil {
				return err
			}
		}
		return s.script().Load(ctx, c).Err()
	}
	_ = eachOf(ctx, s.client, masters, load)
	_ = s.client.Exists(ctx, s.prefix+"warm").Err()
}

// WithKeyPrefix sets the prefix of every Redis key (default
// DefaultKeyPrefix). It may not contain '{' or '}', which would change the
// key's hash tag.
func WithKeyPrefix(prefix string) Option {
	return optionFunc(func(c *config) error {
		if strings.ContainsAny(prefix, "{}") {
			return fmt.Errorf("%w: key prefix %q contains a brace", slidelog.ErrInvalidOption, prefix)
		}
		c.keyPrefix = prefix
		return nil
	})
}

// WithKeySecret sets the secret of the HMAC that turns identities into
// Redis keys. Every instance sharing a Redis must use the same secret.
// Without one the HMAC key is empty: keys stay distinct and brace-proof,
// but a client that can pick its identity freely could search for
// identities that land on one Cluster slot.
func WithKeySecret(secret []byte) Option {
	return optionFunc(func(c *config) error {
		c.keySecret = append([]byte(nil), secret...)
		return nil
	})
}

// WithClock makes the store send the time from clock instead of letting
// the script read the Redis server's. It exists for tests that move time
// by hand; production code should not use it, since app instances with
// skewed clocks would disagree. Times are truncated to microseconds; a
// nil clock keeps the default.
func WithClock(clock func() time.Time) Option {
	return optionFunc(func(c *config) error {
		c.clock = clock
		return nil
	})
}

// WithLogger sets where New logs what it finds wrong with the servers or
// the client, such as an evicting maxmemory-policy or, with
// WithStartUnreachable, a Redis that does not answer (default
// slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", slidelog.ErrInvalidOption)
		}
		c.logger = l
		return nil
	})
}

// WithStrictConfig makes New fail with ErrUnsafeConfig when a server runs
// an evicting maxmemory-policy, instead of logging a warning.
func WithStrictConfig() Option {
	return optionFunc(func(c *config) error {
		c.strict = true
		return nil
	})
}

// WithStartUnreachable lets New return a store when no Redis master
// answers at start-up, for an app that must start while Redis is down:
// New then logs the cause at ERROR level instead of failing with
// ErrUnreachable, and every decision goes to the limiter's failure mode
// (counted as such, with source "fallback", "fail_open" or "fail_closed",
// by the limiter's observers) until Redis answers. A client whose kind does
// not match the server still fails New with ErrTopology.
func WithStartUnreachable() Option {
	return optionFunc(func(c *config) error {
		c.startUnreachable = true
		return nil
	})
}

// Source is the Source of a Redis store's decisions.
const Source slidelog.Source = "redis"

// Describe implements slidelog.Describer: a remote store named "redis",
// on the clock given with WithClock (nil: the servers').
func (s *Store) Describe() slidelog.StoreInfo {
	return slidelog.StoreInfo{Name: string(Source), Clock: s.clock}
}

// LogKey returns the Redis key that holds the log of identity in
// namespace (slidelog.Request.Namespace: a limiter's name); a limiter's
// Router passes it back in slidelog.Route.LogKey. The costs of the log's
// entries and its per-window sums live beside it, in LogKey + ":c" and
// LogKey + ":s", and the buckets of policies with a precision and their
// latest admissions in LogKey + ":b" and LogKey + ":r", in the same hash
// slot. The HMAC reads
// the namespace's length as a uvarint, the namespace, then the identity,
// so no two (namespace, identity) pairs share a key.
func (s *Store) LogKey(namespace, identity string) string {
	k := s.macs.Get().(*keyMAC)
	k.mac.Reset()
	k.in = binary.AppendUvarint(k.in[:0], uint64(len(namespace)))
	k.in = append(k.in, namespace...)
	k.in = append(k.in, identity...)
	k.mac.Write(k.in)
	tag := k.mac.Sum(k.sum[:0])[:keyTagBytes]
	var buf [64]byte
	b := append(buf[:0], s.prefix...)
	b = append(b, '{')
	b = base64.RawURLEncoding.AppendEncode(b, tag)
	b = append(b, '}')
	if cap(k.in) > maxPooledKeyInput {
		k.in = nil // a long identity's buffer is not kept
	}
	s.macs.Put(k)
	return string(b)
}

// maxPooledKeyInput bounds the input buffer a keyMAC keeps between keys.
const maxPooledKeyInput = 1024

// keyMAC is LogKey's HMAC with buffers for its input and sum, reused through
// a sync.Pool so that a key costs one allocation: its string.
type keyMAC struct {
	mac hash.Hash
	in  []byte
	sum [sha256.Size]byte
}

// Route implements slidelog.Router: req's Redis key (LogKey) and the
// address of the master holding it: on a Cluster by the client's slot
// map ("" while the slot map does not know it), on a single server the
// client's address, and through a failover client the address of the
// master it last connected to ("" before its first connection).
func (s *Store) Route(ctx context.Context, req slidelog.Request) slidelog.Route {
	return s.route(ctx, req)
}

// Take implements slidelog.Store with one or two script runs, through the
// pipelines of the key's node, at req.Route when the limiter routed it. A
// take of cost 1 on exact policies (one or several) runs the common
// path's script (common.lua) first; where that does not decide, having
// written nothing (a log that is not plain, a retry), the whole script
// (script.lua) runs next and decides. Any other take runs the whole
// script alone. A key of the wrong type costs a repair and a run more.
// It expects a valid request (slidelog.Request.Validate), as a limiter
// sends. The log keeps an ID's low 48 bits: two IDs of one key that
// differ only above them are one request (a retry), so a caller choosing
// its own IDs draws them at random, as a limiter does, or counts them up.
func (s *Store) Take(ctx context.Context, req slidelog.Request) (slidelog.Result, error) {
	r := s.routed(ctx, req)
	if s.kept.Len() > 0 {
		// The key's kept admissions travel with its decision.
		if es := s.kept.Pending(r.LogKey, s.now(), nil); len(es) > 0 {
			return s.takeKept(ctx, req, r, es)
		}
	}
	sent := s.now()
	var (
		reply []int64
		acked int
		err   error
	)
	common := s.common(req)
	if common {
		call := newCall(commonScript, r.LogKey)
		call.args = s.commonArgs(call.argBuf[:0], req)
		call.member = call.args[0].(string)
		reply, acked, err = s.pipes.runCall(ctx, call, r)
		releaseCall(call) // reply is go-redis's, not the call's
		common = err != nil || len(reply) != 1 || reply[0] != notCommon
	}
	if !common {
		reply, acked, err = s.pipes.runAcked(ctx, s.script(), logKeys(r.LogKey), r, s.args(opTake, req, 0))
	}
	if wrongType(err) {
		// A key of the log holds another type: rebuild it, and decide
		// again with the same ID (a second run counts once).
		s.repair(ctx, r.LogKey)
		reply, acked, err = s.pipes.runAcked(ctx, s.script(), logKeys(r.LogKey), r, s.args(opTake, req, 0))
	}
	if err != nil {
		return slidelog.Result{}, s.failed(ctx, err)
	}
	if len(reply) != 3+3*len(req.Policies) {
		return slidelog.Result{}, fmt.Errorf("%w: script returned %d values for %d policies", slidelog.ErrUnavailable, len(reply), len(req.Policies))
	}
	s.repaired(r.LogKey, reply)
	res := decode(reply, req.Policies, Source)
	if a := s.pipes.ack; a != nil && res.Allowed && acked < a.replicas {
		// Written to a master whose identity this call did not learn.
		s.keepUnacked(r.LogKey, r.Node, req, res.DecidedAt, sent, writeback.Unknown, acked)
	}
	return res, nil
}

// failed turns a failed call's error into one wrapping
// slidelog.ErrUnavailable. A server that could not compile the script
// makes the store read the versions again; any other failure but the
// caller's own cancellation makes a Cluster client reload its slot map,
// so that it finds a promoted replica soon.
func (s *Store) failed(ctx context.Context, err error) error {
	if errors.Is(err, slidelog.ErrClosed) {
		return err
	}
	if keyError(err) {
		return fmt.Errorf("%w: %w: %w", slidelog.ErrUnavailable, slidelog.ErrDamagedKey, err)
	}
	if compileError(err) {
		s.redetect(ctx)
	}
	if ctx.Err() == nil {
		s.topology.reload()
	}
	return unavailable(ctx, err)
}

// route is where req's decision runs: its key and the address of the
// master holding it (see Route; when the slot map does not know it yet,
// the client routes by key itself).
func (s *Store) route(ctx context.Context, req slidelog.Request) slidelog.Route {
	r := slidelog.Route{LogKey: s.LogKey(req.Namespace, req.Key)}
	// Without a slot map, finding the master would wait for its first
	// load (seconds on a dead Cluster): leave the node unknown, and the
	// client routes the call by its key.
	if c, ok := s.client.(*redis.ClusterClient); ok && s.pipes.mapped.Load() {
		if m, err := c.MasterForKey(ctx, r.LogKey); err == nil {
			r.Node = m.Options().Addr
		}
	} else if !ok {
		r.Node = s.pipes.singleNode()
	}
	return r
}

// routed is req.Route, or req's route when the caller did not give one.
func (s *Store) routed(ctx context.Context, req slidelog.Request) slidelog.Route {
	if req.Route.LogKey != "" {
		return req.Route
	}
	return s.route(ctx, req)
}

// args are the script's arguments for op on req; at is the time of a
// recorded admission in microseconds (0 for the other operations).
func (s *Store) args(op string, req slidelog.Request, at int64) []any {
	args := make([]any, 0, 5+3*len(req.Policies))
	args = append(args, op, s.nowArg(), member(req.ID), req.Cost, at)
	for _, p := range req.Policies {
		args = append(args, p.Limit, p.Window.Microseconds(), p.Precision.Microseconds())
	}
	return args
}

// commonArgs appends commonScript's arguments for req to args.
func (s *Store) commonArgs(args []any, req slidelog.Request) []any {
	args = append(args, member(req.ID), s.nowArg())
	for _, p := range req.Policies {
		args = append(args, p.Limit, p.Window.Microseconds())
	}
	return args
}

// common reports whether req may run commonScript first: a take of cost
// 1 on exact policies, on servers that run the whole script.
func (s *Store) common(req slidelog.Request) bool {
	if req.Cost != 1 || s.legacy.Load() {
		return false
	}
	for _, p := range req.Policies {
		if p.Precision != 0 {
			return false
		}
	}
	return true
}

// script returns the variant of the decision script the servers run.
func (s *Store) script() *redis.Script {
	if s.legacy.Load() {
		return legacyScript
	}
	return script
}

// Refund implements slidelog.Store with one run of the script: it removes
// the request's entry and subtracts the cost recorded with it (whatever
// req.Cost says) from every window that counts it. For the policies of
// req with a precision it subtracts the cost from the bucket the request
// was counted in, if the request is among the latest admissions the
// script remembers (see docs/algorithm.md); otherwise it changes nothing
// there, which can only over-count.
func (s *Store) Refund(ctx context.Context, req slidelog.Request) error {
	req.Cost = max(req.Cost, 1)
	r := s.routed(ctx, req)
	s.kept.Forget(r.LogKey, req.ID)
	reply, err := s.pipes.run(ctx, s.script(), r, s.args(opRefund, req, 0))
	if wrongType(err) {
		s.repair(ctx, r.LogKey)
		reply, err = s.pipes.run(ctx, s.script(), r, s.args(opRefund, req, 0))
	}
	if err != nil {
		return s.failed(ctx, err)
	}
	s.repaired(r.LogKey, reply)
	return nil
}

// Record implements slidelog.Recorder: it writes an admission that was decided elsewhere (the limiter's
// local fallback while Redis was unreachable) into req's log at time at,
// to the microsecond, with req.Cost, without checking any limit: from
// then on it counts against later decisions until at plus each window.
// It is one run of the script, on the key and slot of Take. Recording an
// ID already in the log, by Take or Record, changes nothing; an
// admission that has left every window of req.Policies is not written.
// It fails with slidelog.ErrInvalidPolicy, ErrInvalidCost or
// ErrUnavailable.
func (s *Store) Record(ctx context.Context, req slidelog.Request, at time.Time) error {
	if err := req.ValidateRecord(at); err != nil {
		return err
	}
	r := s.routed(ctx, req)
	sent := s.now()
	reply, acked, err := s.pipes.runAcked(ctx, s.script(), logKeys(r.LogKey), r, s.args(opRecord, req, at.UnixMicro()))
	if wrongType(err) {
		s.repair(ctx, r.LogKey)
		reply, acked, err = s.pipes.runAcked(ctx, s.script(), logKeys(r.LogKey), r, s.args(opRecord, req, at.UnixMicro()))
	}
	if err != nil {
		return s.failed(ctx, err)
	}
	s.repaired(r.LogKey, reply)
	switch a := s.pipes.ack; {
	case a == nil || acked >= a.replicas:
		s.kept.Forget(r.LogKey, req.ID) // written (and acknowledged): a kept fallback admission leaves
	default:
		a.unacked.Add(1)
		a.warn(r.Node, acked)
		s.kept.Add(r.LogKey, writeback.Entry[slidelog.Request]{Req: req, ID: req.ID, At: at, Expires: at.Add(longestWindow(req.Policies)), Server: writeback.Unknown, Wrote: sent})
	}
	return nil
}

// Reset implements slidelog.Store: it deletes the identity's keys, with
// one run of a script on the key's master.
func (s *Store) Reset(ctx context.Context, req slidelog.Request) error {
	r := s.routed(ctx, req)
	s.kept.ForgetKey(r.LogKey)
	if _, err := s.pipes.run(ctx, resetScript, r, nil); err != nil {
		return s.failed(ctx, err)
	}
	return nil
}

// Close implements slidelog.Store: the calls waiting on a node end with
// slidelog.ErrClosed, and so do later ones. It does not close the Redis
// client, which the caller owns.
func (s *Store) Close() error {
	s.closeCanaries()
	s.pipes.mon.close()
	return nil
}

func (s *Store) nowArg() int64 {
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

// decode turns the reply of the script's take into a Result. Whether the
// request was admitted is the script's verdict alone (reply[0]); on a
// denial the policies it violated are those with a retry (the script gives
// every violated policy one), and should none have one, every policy is
// reported denied rather than the denial read as an admission.
func decode(reply []int64, policies []slidelog.Policy, source slidelog.Source) slidelog.Result {
	allowed := reply[0] == 1
	if len(policies) == 1 {
		// What NewResult makes of one policy's state, without the slice:
		// the policy binds, and is violated exactly when the script
		// denied.
		p, v := policies[0], reply[3:6]
		res := slidelog.Result{
			Allowed: allowed, Limit: p.Limit, Remaining: int(v[0]),
			ResetAfter: time.Duration(v[2]) * time.Microsecond,
			Policy:     p, Source: source,
			DecidedAt: time.UnixMicro(reply[1]),
			StableFor: time.Duration(reply[2]) * time.Microsecond,
		}
		if !allowed {
			res.RetryAfter = time.Duration(max(v[1], 0)) * time.Microsecond
		}
		return res
	}
	states := make([]slidelog.PolicyResult, len(policies))
	denied := false
	for i, p := range policies {
		v := reply[3+3*i:]
		states[i] = slidelog.PolicyResult{
			Policy:     p,
			Allowed:    allowed || v[1] <= 0,
			Remaining:  int(v[0]),
			RetryAfter: time.Duration(max(v[1], 0)) * time.Microsecond,
			ResetAfter: time.Duration(v[2]) * time.Microsecond,
		}
		denied = denied || !states[i].Allowed
	}
	if !allowed && !denied {
		for i := range states {
			states[i].Allowed = false
		}
	}
	res := slidelog.NewResult(states, source)
	res.DecidedAt = time.UnixMicro(reply[1])
	res.StableFor = time.Duration(reply[2]) * time.Microsecond
	return res
}

// unavailable wraps a Redis error in ErrUnavailable, once (a node's
// refusal already wraps it), keeping the context's own error visible when
// the caller gave up.
func unavailable(ctx context.Context, err error) error {
	ctxErr := ctx.Err()
	if ctxErr != nil && errors.Is(err, ctxErr) {
		ctxErr = nil
	}
	switch {
	case errors.Is(err, slidelog.ErrUnavailable) && ctxErr != nil:
		return fmt.Errorf("%w (%w)", err, ctxErr)
	case errors.Is(err, slidelog.ErrUnavailable):
		return err
	case ctxErr != nil:
		return fmt.Errorf("%w: %w (%w)", slidelog.ErrUnavailable, ctxErr, err)
	}
	return fmt.Errorf("%w: %w", slidelog.ErrUnavailable, err)
}
