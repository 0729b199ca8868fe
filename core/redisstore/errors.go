package redisstore

import "errors"

// Errors of New and Connect. Decisions fail with the errors of package
// slidelog.
var (
	// ErrNilClient reports a nil Redis client passed to New.
	ErrNilClient = errors.New("redisstore: nil redis client")
	// ErrUnsafeConfig reports a Redis server whose configuration lets
	// clients through: an evicting maxmemory-policy, which drops limiter
	// keys under memory pressure. New returns it only with
	// WithStrictConfig; otherwise it logs a warning.
	ErrUnsafeConfig = errors.New("redisstore: unsafe redis configuration")
	// ErrUnsupportedVersion reports a Redis server too old for the
	// decision script: Redis before 6.2, or Valkey before 7.2; or one that
	// does not know a command the store needs, which its configuration
	// renamed away (rename-command). The error names the command (every
	// one, when New finds several, in one error, which wraps ErrPermission
	// too when the user may not run others).
	ErrUnsupportedVersion = errors.New("redisstore: unsupported redis version")
	// ErrUnreachable reports that no Redis master answered within the
	// start timeout: the server is down or refuses connections, its host
	// name does not resolve, the address is malformed (no port, a URL
	// where host:port was wanted), or it refused the client (a wrong
	// password; protected mode or maxclients, where the error quotes the
	// server's words), also when only some masters of a Cluster do. The
	// error names the address and the cause. New returns it unless
	// WithStartUnreachable is given.
	ErrUnreachable = errors.New("redisstore: redis unreachable")
	// ErrTopology reports a client whose kind does not match the server,
	// or a server that cannot decide: a ClusterClient on a standalone
	// Redis, a plain Client on a node of a Redis Cluster (which would
	// answer MOVED for most keys), several addresses of servers that are
	// not a Cluster, a Cluster that assigns no master to some hash slots,
	// a read-only replica's address, or a Sentinel's (use
	// a redis+sentinel:// URL with Connect). Connect picks the right kind
	// by asking the server. The error names the address and the reason.
	ErrTopology = errors.New("redisstore: redis client does not match the server's topology")
	// ErrPermission reports a Redis user whose ACL refuses a command the
	// store needs, or the store's keys: every decision would fail with
	// NOPERM. The error names the address and the command (every one the
	// user may not run, in one error); see docs/operations.md for the ACL
	// a limiter needs.
	ErrPermission = errors.New("redisstore: redis user may not run what the store needs")
)
