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
	// decision script: Redis before 6.2, or Valkey before 7.2.
	ErrUnsupportedVersion = errors.New("redisstore: unsupported redis version")
	// ErrUnreachable reports that no Redis master answered within the
	// start timeout: the server is down or refuses connections, its host
	// name does not resolve, the address is malformed (no port, a URL
	// where host:port was wanted), or it refused the client (a wrong
	// password). The error names the address and the cause. New returns
	// it unless WithStartUnreachable is given.
	ErrUnreachable = errors.New("redisstore: redis unreachable")
	// ErrTopology reports a client whose kind does not match the server:
	// a ClusterClient on a standalone Redis, a plain Client on a node of a
	// Redis Cluster (which would answer MOVED for most keys), or several
	// addresses of servers that are not a Cluster. Connect picks the right
	// kind by asking the server.
	ErrTopology = errors.New("redisstore: redis client does not match the server's topology")
)
