package redisstore

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Connect returns a go-redis client for the Redis at addrs, of the kind
// the server is: it asks the first address that answers whether it is a
// node of a Redis Cluster (INFO cluster) and returns a *redis.ClusterClient
// seeded with every address, with the settings of ClusterOptions, when it
// is, and a *redis.Client with the settings of ClientOptions when it is
// not. One address of a Cluster node is enough (a managed service's
// configuration endpoint, say); several addresses must be nodes of one
// Cluster.
//
// Each address is host:port or a URL: redis://[user:password@]host:port[/db]
// or rediss:// for TLS, with go-redis's query parameters (see
// redis.ParseURL; a Cluster URL may list more nodes with ?addr=host:port,
// see redis.ParseClusterURL). User, password and TLS settings of the first
// address apply to every node. Change the returned client's other options
// by building it yourself with ClientOptions or ClusterOptions.
//
// A master that Sentinels monitor is one address of its own:
//
//	redis+sentinel://[user:password@]host:port[,host:port…]/MASTERNAME[/db]
//
// with the Sentinels' addresses (rediss+sentinel:// for TLS; user and
// password are the servers', the query parameters sentinel_username and
// sentinel_password the Sentinels' own). Connect asks the Sentinels for
// the master and returns redis.NewFailoverClient with the settings of
// FailoverOptions.
//
// Connect waits until ctx is done and at most a second in all. It fails
// with an error wrapping ErrUnreachable, naming each address and why, when
// no address answers, one is malformed, or no Sentinel knows the master,
// and with ErrTopology when several addresses are given but the server is
// not a Cluster node, a Cluster URL selects a database other than 0, or
// an address is a read-only replica's or a Sentinel's where a server's
// was expected (or a server's where a Sentinel's was). The caller closes
// the client.
func Connect(ctx context.Context, addrs ...string) (redis.UniversalClient, error) {
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%w: no address given", ErrUnreachable)
	}
	if len(addrs) == 1 && isSentinelURL(addrs[0]) {
		return connectSentinel(ctx, addrs[0])
	}
	var seeds []*redis.Options
	for _, a := range addrs {
		o, err := parseAddr(a)
		if err != nil {
			return nil, err
		}
		seeds = append(seeds, o...)
	}
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	var errs []error
	for _, o := range seeds {
		probe := *o
		probe.DB = 0 // a Cluster node refuses SELECT
		c := redis.NewClient(&probe)
		err := dial(ctx, c.Options().Dialer, c.Options().Network, o.Addr)
		var r role
		if err == nil {
			if r, err = serverRole(ctx, c); err != nil {
				err = refusal(ctx, c.Options().Dialer, c.Options().Network, o.Addr, err)
			}
		}
		_ = c.Close()
		if err != nil {
			errs = append(errs, unreachableError(o.Addr, err))
			continue
		}
		switch {
		case r.sentinel:
			return nil, sentinelError(o.Addr)
		case r.replica && !r.cluster:
			return nil, replicaError(o.Addr)
		}
		if !r.cluster {
			if len(seeds) > 1 {
				return nil, fmt.Errorf("%w: %d addresses given, but %s is a standalone Redis, not a Cluster node; give its address alone", ErrTopology, len(seeds), o.Addr)
			}
			return redis.NewClient(o), nil
		}
		if o.DB != 0 {
			return nil, fmt.Errorf("%w: %s is a Cluster node, and a Cluster has only database 0, not %d", ErrTopology, o.Addr, o.DB)
		}
		return clusterClient(seeds, o), nil
	}
	return nil, errors.Join(errs...)
}

// clusterClient returns a ClusterClient seeded by every address of seeds,
// with the credentials and TLS settings of first.
func clusterClient(seeds []*redis.Options, first *redis.Options) *redis.ClusterClient {
	addrs := make([]string, len(seeds))
	for i, o := range seeds {
		addrs[i] = o.Addr
	}
	co := ClusterOptions(addrs...)
	co.Username = first.Username
	co.Password = first.Password
	co.CredentialsProvider = first.CredentialsProvider
	co.TLSConfig = first.TLSConfig
	co.Protocol = first.Protocol
	co.ClientName = first.ClientName
	if first.DialTimeout > 0 {
		co.DialTimeout = first.DialTimeout
	}
	if first.ReadTimeout != 0 {
		co.ReadTimeout = first.ReadTimeout
	}
	if first.WriteTimeout != 0 {
		co.WriteTimeout = first.WriteTimeout
	}
	if first.PoolSize > 0 {
		co.PoolSize = first.PoolSize
	}
	c := redis.NewClusterClient(co)
	ReloadStateOnDialError(c)
	return c
}

// parseAddr reads one address given to Connect: host:port, or a URL that
// may name several Cluster nodes. An address without a port or with an
// unknown scheme is an error here, before anything dials.
func parseAddr(a string) ([]*redis.Options, error) {
	a = strings.TrimSpace(a)
	scheme, _, isURL := strings.Cut(a, "://")
	if !isURL {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return nil, unreachableError(a, err)
		}
		return []*redis.Options{ClientOptions(a)}, nil
	}
	switch scheme {
	case "redis", "rediss", "unix":
	case sentinelScheme, sentinelTLSScheme:
		return nil, fmt.Errorf("%w at %s: a %s:// URL names Sentinels, and must be the only address given", ErrTopology, redact(a), scheme)
	default:
		return nil, fmt.Errorf("%w at %s: scheme %q, want redis://, rediss://, redis+sentinel:// or host:port", ErrUnreachable, redact(a), scheme)
	}
	o, err := redis.ParseURL(a)
	if err == nil {
		return []*redis.Options{recommended(o)}, nil
	}
	co, cerr := redis.ParseClusterURL(a)
	if cerr != nil || scheme == "unix" {
		return nil, fmt.Errorf("%w at %s: %w", ErrUnreachable, redact(a), err)
	}
	var out []*redis.Options
	for _, addr := range co.Addrs {
		o := ClientOptions(addr)
		o.Username, o.Password, o.TLSConfig = co.Username, co.Password, co.TLSConfig
		o.Protocol, o.ClientName = co.Protocol, co.ClientName
		if co.DialTimeout > 0 {
			o.DialTimeout = co.DialTimeout
		}
		if co.ReadTimeout != 0 {
			o.ReadTimeout = co.ReadTimeout
		}
		if co.WriteTimeout != 0 {
			o.WriteTimeout = co.WriteTimeout
		}
		out = append(out, o)
	}
	return out, nil
}

// recommended gives o the settings of ClientOptions where the URL set
// none.
func recommended(o *redis.Options) *redis.Options {
	o.ContextTimeoutEnabled = true
	if o.DialTimeout == 0 {
		o.DialTimeout = clientDialTimeout
	}
	if o.ReadTimeout == 0 {
		o.ReadTimeout = clientReadTimeout
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = clientWriteTimeout
	}
	if o.PoolTimeout == 0 {
		o.PoolTimeout = clientPoolTimeout
	}
	return o
}

// redact hides the password of a URL for error messages.
func redact(a string) string {
	u, err := url.Parse(a)
	if err != nil {
		return "the URL given"
	}
	return u.Redacted()
}

// dial opens and closes one connection to addr, so that a server that
// cannot be reached fails at once with the dialer's own error (connection
// refused, no such host, missing port) rather than after the client's dial
// retries with the context's deadline. A nil dialer is net.Dialer's.
func dial(ctx context.Context, dialer func(context.Context, string, string) (net.Conn, error), network, addr string) error {
	_, err := dialRemote(ctx, dialer, network, addr)
	return err
}

// dialConn opens a connection to addr with dialer (net.Dialer's when
// nil; network "tcp" when empty), ending when ctx does. go-redis's TLS
// dial (tls.DialWithDialer) ignores ctx and waits up to the client's dial
// timeout, 5 s by default, for the server's hello, which a server that
// does not speak TLS never sends: the dial runs on a goroutine of its
// own, which closes what it got if ctx ended first.
func dialConn(ctx context.Context, dialer func(context.Context, string, string) (net.Conn, error), network, addr string) (net.Conn, error) {
	if dialer == nil {
		var d net.Dialer
		dialer = d.DialContext
	}
	if network == "" {
		network = "tcp"
	}
	type dialed struct {
		conn net.Conn
		err  error
	}
	done := make(chan dialed, 1)
	go func() {
		conn, err := dialer(ctx, network, addr)
		done <- dialed{conn, err}
	}()
	select {
	case d := <-done:
		return d.conn, d.err
	case <-ctx.Done():
		go func() {
			if d := <-done; d.err == nil && d.conn != nil {
				_ = d.conn.Close()
			}
		}()
		return nil, context.Cause(ctx)
	}
}

// dialRemote is dial, and returns the address the connection reached:
// the master's for a failover client, whose dialer asks the Sentinels and
// ignores addr.
func dialRemote(ctx context.Context, dialer func(context.Context, string, string) (net.Conn, error), network, addr string) (string, error) {
	conn, err := dialConn(ctx, dialer, network, addr)
	if err != nil {
		return "", err
	}
	remote := addr
	if ra := conn.RemoteAddr(); ra != nil && addr == failoverAddr {
		remote = ra.String()
	}
	return remote, conn.Close()
}

// failoverAddr is the address in the options of go-redis's failover
// client (redis.NewFailoverClient), which dials whichever server the
// Sentinels name as the master.
const failoverAddr = "FailoverClient"

// role is what a server says it is in INFO; a user not allowed INFO
// leaves it all false.
type role struct {
	cluster  bool // a node of a Redis Cluster (cluster_enabled:1)
	sentinel bool // a Sentinel (redis_mode:sentinel)
	replica  bool // a replica (role:slave)
}

// serverRole asks the server c talks to what it is (INFO, its default
// sections: server, replication and cluster among them). A user not
// allowed INFO, or a server whose configuration renamed INFO away, gets an
// unknown role, not an error: the store's probe of its commands (see
// checkCommands) tells what matters then.
func serverRole(ctx context.Context, c *redis.Client) (role, error) {
	info, err := c.Info(ctx).Result()
	if err != nil {
		if noPermission(err) || unknownCommand(err) {
			return role{}, nil
		}
		return role{}, err
	}
	var r role
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch k {
		case "cluster_enabled":
			r.cluster = v == "1"
		case "redis_mode", "server_mode": // Valkey 8 names it server_mode
			r.sentinel = v == "sentinel"
		case "role":
			r.replica = v == "slave"
		}
	}
	return r, nil
}

// noPermission reports whether err is a server's refusal of a command or
// key by the user's ACL.
func noPermission(err error) bool {
	return redis.HasErrorPrefix(err, "NOPERM")
}

// sentinelError is the error of a Sentinel's address given where a
// server's was expected.
func sentinelError(addr string) error {
	return fmt.Errorf("%w: %s is a Sentinel: use %s://%s/MASTERNAME (redisstore.Connect), or redis.NewFailoverClient(redisstore.FailoverOptions(...))", ErrTopology, addr, sentinelScheme, addr)
}

// replicaError is the error of a replica's address given where a
// master's was expected.
func replicaError(addr string) error {
	return fmt.Errorf("%w: %s is a read-only replica, where every decision would fail with READONLY; give its master's address, or its Sentinels' in a %s:// URL", ErrTopology, addr, sentinelScheme)
}

// unknownSentinelCommand reports whether err is a server's answer that
// it knows no SENTINEL command: "unknown command 'sentinel'" from Redis 7
// and Valkey, "unknown command `SENTINEL`" from Redis 6.2.
func unknownSentinelCommand(err error) bool {
	s := strings.ToLower(err.Error())
	return strings.Contains(s, "unknown command 'sentinel'") || strings.Contains(s, "unknown command `sentinel`")
}

// unreachableError wraps ErrUnreachable with the address and the cause,
// and a hint for an address that is a URL where host:port was wanted.
func unreachableError(addr string, err error) error {
	hint := ""
	switch {
	case strings.Contains(addr, "://"):
		addr = redact(addr)
		hint = " (a URL where host:port was wanted: give host:port, or give the URL to redisstore.Connect)"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		hint = fmt.Sprintf(" (no answer within %v)", checkTimeout)
	}
	return fmt.Errorf("%w at %s%s: %w", ErrUnreachable, addr, hint, err)
}

// failoverError is the error of a failover client (redis.NewFailoverClient)
// whose Sentinels named no master: ErrTopology when one of its Sentinel
// addresses is a server's (it does not know SENTINEL), as Connect says of
// a redis+sentinel:// URL, so that WithStartUnreachable does not start a
// store whose every decision would go to the failure mode; else
// ErrUnreachable, saying so when the Sentinels know no master of that
// name. go-redis does not tell which address answered what.
func failoverError(err error) error {
	switch {
	case unknownSentinelCommand(err):
		return fmt.Errorf("%w: a Sentinel address of the failover client is a Redis server, not a Sentinel (%w); give the Sentinels' addresses in FailoverOptions.SentinelAddrs, or use redisstore.Connect with a %s:// URL", ErrTopology, err, sentinelScheme)
	case errors.Is(err, redis.Nil):
		return fmt.Errorf("%w at %s: no Sentinel named a master of the name in FailoverOptions.MasterName (%w)", ErrUnreachable, nodeName(failoverAddr), err)
	}
	return unreachableError(nodeName(failoverAddr), err)
}

// reach checks that a master of client answers and that client's kind
// matches the server: it fails with ErrTopology for a ClusterClient on a
// standalone server or a plain Client on a Cluster node, and with
// ErrUnreachable when no master answers. On a Cluster whose slot map loads
// but some of whose masters do not answer, it returns those masters in
// its down, and in its mute the seeds that accepted a connection but did
// not answer it (see seedAnswer); its masters are those that answered,
// on which New's later checks run.
func reach(ctx context.Context, client redis.UniversalClient, probes *atomic.Int32) (reached, error) {
	dialRemote := func(ctx context.Context, dialer func(context.Context, string, string) (net.Conn, error), network, addr string) (string, error) {
		probes.Add(1)
		defer probes.Add(-1)
		return dialRemote(ctx, dialer, network, addr)
	}
	switch c := client.(type) {
	case *redis.Client:
		o := c.Options()
		addr, err := dialRemote(ctx, o.Dialer, o.Network, o.Addr)
		if err != nil && o.Addr == failoverAddr {
			return reached{}, failoverError(err)
		}
		if err != nil {
			return reached{}, unreachableError(nodeName(o.Addr), fmt.Errorf("%w%s", err, tlsHint(o.TLSConfig, err)))
		}
		r, err := serverRole(ctx, c)
		if err != nil {
			return reached{}, unreachableError(addr, refusal(ctx, o.Dialer, o.Network, addr, err))
		}
		switch {
		case r.sentinel:
			return reached{}, sentinelError(addr)
		case r.replica && !r.cluster:
			return reached{}, replicaError(addr)
		}
		if r.cluster {
			return reached{}, fmt.Errorf("%w: %s is a node of a Redis Cluster, where a plain redis.Client gets MOVED for most keys; use redis.NewClusterClient(redisstore.ClusterOptions(...)) or redisstore.Connect", ErrTopology, addr)
		}
		return reached{}, nil
	case *redis.ClusterClient:
		var found reached
		o := c.Options()
		seeds := strings.Join(o.Addrs, ",")
		// The seeds are dialled together, as the client's nodes dial (over
		// TLS when it says so): one that does not answer takes no time
		// from the others, and a TLS client on a Cluster that does not
		// speak TLS fails here, not in go-redis's reading of the slot map,
		// which tries the seeds in turn. Each connection then asks its
		// seed for an answer, while the checks go on; the answers are
		// collected once the slot map is read.
		dialErrs := make([]error, len(o.Addrs))
		answers := make([]chan error, len(o.Addrs))
		actx, stopAsking := context.WithCancel(ctx)
		defer stopAsking()
		wait := checkTimeout
		if o.ReadTimeout > 0 && o.ReadTimeout < wait {
			wait = o.ReadTimeout
		}
		var wg sync.WaitGroup
		for i, a := range o.Addrs {
			answers[i] = make(chan error, 1)
			wg.Add(1)
			go func() {
				dialer, tlsConfig := seedTCPDialer(o)
				probes.Add(1)
				conn, err := dialConn(ctx, dialer, "tcp", a)
				probes.Add(-1)
				if err == nil && tlsConfig != nil {
					// The kernel connected; the seed's TLS answer is
					// waited for as its answer to PING is, for wait.
					conn, err = seedHandshake(ctx, conn, tlsConfig, a, wait)
				}
				if err != nil {
					dialErrs[i] = fmt.Errorf("%s: %w%s", a, err, tlsHint(o.TLSConfig, err))
					wg.Done()
					if errors.Is(err, os.ErrDeadlineExceeded) {
						answers[i] <- err // accepted, and no TLS answer
					} else {
						answers[i] <- nil
					}
					return
				}
				wg.Done()
				answers[i] <- seedAnswer(actx, conn, wait)
			}()
		}
		wg.Wait()
		dialErrs = slices.DeleteFunc(dialErrs, func(err error) bool { return err == nil })
		if len(o.Addrs) > 0 && len(dialErrs) == len(o.Addrs) {
			return reached{}, fmt.Errorf("%w: no seed of the Cluster answered (%s): %w", ErrUnreachable, seeds, errors.Join(dialErrs...))
		}
		var mu sync.Mutex
		var refused []error
		err := c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			no := n.Options()
			perr := n.Ping(ctx).Err()
			if noPermission(perr) || unknownCommand(perr) {
				// A master that refuses PING to the user (the store sends
				// none) or had it renamed away answered all the same;
				// the check of its commands judges it.
				perr = nil
			}
			if perr != nil {
				perr = refusal(ctx, no.Dialer, no.Network, no.Addr, perr)
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case perr == nil:
				found.masters = append(found.masters, n)
			case refuses(perr):
				refused = append(refused, unreachableError(no.Addr, perr))
			default:
				found.down = append(found.down, silentMaster{no.Addr, unreachableError(no.Addr, perr)})
			}
			return nil
		})
		switch {
		case err != nil && strings.Contains(err.Error(), "cluster support disabled"):
			return reached{}, fmt.Errorf("%w: %s is a standalone Redis, not a Cluster node (%w); use redis.NewClient(redisstore.ClientOptions(...)) or redisstore.Connect", ErrTopology, seeds, err)
		case err != nil && strings.Contains(err.Error(), "unknown command"):
			// No CLUSTER command: a Sentinel's port, most likely.
			for _, a := range o.Addrs {
				seed := redis.NewClient(&redis.Options{Addr: a, Username: o.Username, Password: o.Password, TLSConfig: o.TLSConfig,
					Dialer: o.Dialer, ContextTimeoutEnabled: true, MaxRetries: -1})
				r, _ := serverRole(ctx, seed)
				_ = seed.Close()
				if r.sentinel {
					return reached{}, sentinelError(a)
				}
			}
			return reached{}, unreachableError(seeds, err)
		case err != nil && closedByServer(err):
			if errs := seedRefusals(ctx, o); len(errs) > 0 {
				return reached{}, fmt.Errorf("%w: no seed of the Cluster answered (%s): %w", ErrUnreachable, seeds, errors.Join(errs...))
			}
			return reached{}, unreachableError(seeds, err)
		case err != nil && ctx.Err() != nil:
			return reached{}, unreachableError(seeds, context.Cause(ctx))
		case err != nil:
			return reached{}, unreachableError(seeds, err)
		case len(refused) > 0:
			// A master that refuses the client (a wrong password, protected
			// mode) is a misconfiguration, which no failover mends.
			return reached{}, fmt.Errorf("%w: masters of the Cluster seeded by %s refuse the client (%d of %d), and decisions on their slots would go to the failure mode: %w",
				ErrUnreachable, seeds, len(refused), len(refused)+len(found.masters)+len(found.down), errors.Join(refused...))
		case len(found.masters) == 0 && len(found.down) > 0:
			errs := make([]error, len(found.down))
			for i, d := range found.down {
				errs[i] = d.err
			}
			return reached{}, fmt.Errorf("%w: no master of the Cluster seeded by %s answered: %w", ErrUnreachable, seeds, errors.Join(errs...))
		case len(found.masters) == 0:
			return reached{}, fmt.Errorf("%w: the Cluster seeded by %s has no master", ErrUnreachable, seeds)
		}
		// The slot map as a master that answered reads it: the Cluster
		// client would ask a node of its choice, perhaps a silent one.
		if err := slotCoverage(ctx, found.masters[0], seeds); err != nil {
			return reached{}, err
		}
		for i, ch := range answers {
			if err := <-ch; errors.Is(err, os.ErrDeadlineExceeded) {
				found.mute = append(found.mute, o.Addrs[i])
			}
		}
		return found, nil
	default:
		if err := client.Ping(ctx).Err(); err != nil {
			return reached{}, fmt.Errorf("%w: %w", ErrUnreachable, err)
		}
		return reached{}, nil
	}
}

// reached is what reach found of a Cluster.
type reached struct {
	masters []*redis.Client // the masters that answered PING
	down    []silentMaster  // the masters that did not
	mute    []string        // the seeds that accepted a connection, and did not answer
}

// seedAnswer sends PING on conn, a new connection to a Cluster seed,
// and waits for wait, or until ctx ends, for the first byte of the
// seed's answer (a refusal, such as NOAUTH, is one), closing conn. It
// fails with os.ErrDeadlineExceeded when the seed sent nothing within
// wait: go-redis, which reads the slot map from the seeds in turn, waits
// its ReadTimeout for such a seed each time it tries it first.
func seedAnswer(ctx context.Context, conn net.Conn, wait time.Duration) error {
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(pastDeadline) })
	defer stop()
	if err := conn.SetDeadline(time.Now().Add(wait)); err != nil {
		return err
	}
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	var b [1]byte
	_, err := conn.Read(b[:])
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}

// silentMaster is a Cluster master that did not answer New's check.
type silentMaster struct {
	addr string
	err  error // wraps ErrUnreachable
}

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// slotCoverage fails with ErrTopology when the Cluster's slot map (CLUSTER
// SLOTS, as c, the client of a master that answered, reads it) leaves
// hash slots without a master: no node serves their keys,
// whose every decision would fail with CLUSTERDOWN (and, with
// cluster-require-full-coverage yes, every key's would). Unlike a master
// that does not answer, which a failover replaces, an unassigned slot
// stays so until an operator assigns it. A slot map that cannot be read
// (a user not allowed CLUSTER SLOTS) is left to the other checks.
func slotCoverage(ctx context.Context, c *redis.Client, seeds string) error {
	slots, err := c.ClusterSlots(ctx).Result() //nolint:staticcheck // CLUSTER SHARDS is Redis 7's, and 6.2 is supported
	if err != nil {
		return nil
	}
	covered := make([]bool, clusterSlots)
	for _, r := range slots {
		for i := max(r.Start, 0); i <= r.End && i < clusterSlots; i++ {
			covered[i] = true
		}
	}
	var ranges []string
	missing := 0
	for i := 0; i < clusterSlots; i++ {
		if covered[i] {
			continue
		}
		j := i
		for j+1 < clusterSlots && !covered[j+1] {
			j++
		}
		missing += j - i + 1
		switch {
		case len(ranges) == 8:
			ranges = append(ranges, "...")
		case len(ranges) > 8:
		case i == j:
			ranges = append(ranges, strconv.Itoa(i))
		default:
			ranges = append(ranges, strconv.Itoa(i)+"-"+strconv.Itoa(j))
		}
		i = j
	}
	if missing == 0 {
		return nil
	}
	return fmt.Errorf("%w: the Cluster seeded by %s assigns no master to %d of its %d hash slots (%s): no node serves their keys, and decisions of those keys would go to the failure mode (CLUSTERDOWN); assign them (CLUSTER ADDSLOTS, redis-cli --cluster fix)",
		ErrTopology, seeds, missing, clusterSlots, strings.Join(ranges, ","))
}

// URL schemes of a Sentinel-monitored master: redis+sentinel:// and, with
// TLS to the Sentinels and the servers, rediss+sentinel://.
const (
	sentinelScheme    = "redis+sentinel"
	sentinelTLSScheme = "rediss+sentinel"
)

// isSentinelURL reports whether a names a master through its Sentinels.
func isSentinelURL(a string) bool {
	scheme, _, ok := strings.Cut(strings.TrimSpace(a), "://")
	return ok && (scheme == sentinelScheme || scheme == sentinelTLSScheme)
}

// FailoverOptions returns go-redis options for the master named
// masterName that the Sentinels at sentinelAddrs monitor, with the
// settings of ClientOptions. Change the other fields (passwords, TLS,
// pool size) as you like before redis.NewFailoverClient.
func FailoverOptions(masterName string, sentinelAddrs ...string) *redis.FailoverOptions {
	return &redis.FailoverOptions{
		MasterName:            masterName,
		SentinelAddrs:         append([]string(nil), sentinelAddrs...),
		ContextTimeoutEnabled: true,
		DialTimeout:           clientDialTimeout,
		ReadTimeout:           clientReadTimeout,
		WriteTimeout:          clientWriteTimeout,
		PoolTimeout:           clientPoolTimeout,
	}
}

// parseSentinelURL reads
// redis+sentinel://[user:password@]host:port[,host:port…]/MASTERNAME[/db]
// with the query parameters sentinel_username and sentinel_password (the
// Sentinels' own credentials; user and password are the servers').
func parseSentinelURL(a string) (*redis.FailoverOptions, error) {
	bad := func(why string) error {
		return fmt.Errorf("%w at %s: %s; want %s://[user:password@]host:port[,host:port…]/MASTERNAME", ErrUnreachable, redact(a), why, sentinelScheme)
	}
	u, err := url.Parse(strings.TrimSpace(a))
	if err != nil {
		return nil, bad("not a URL")
	}
	path := strings.Split(strings.Trim(u.Path, "/"), "/")
	if path[0] == "" || len(path) > 2 {
		return nil, bad("no master name")
	}
	var addrs []string
	for _, h := range strings.Split(u.Host, ",") {
		if _, _, err := net.SplitHostPort(h); err != nil {
			return nil, bad(fmt.Sprintf("Sentinel address %q: %v", h, err))
		}
		addrs = append(addrs, h)
	}
	o := FailoverOptions(path[0], addrs...)
	if len(path) == 2 {
		if o.DB, err = strconv.Atoi(path[1]); err != nil || o.DB < 0 {
			return nil, bad(fmt.Sprintf("database %q", path[1]))
		}
	}
	if u.User != nil {
		o.Username = u.User.Username()
		o.Password, _ = u.User.Password()
	}
	q := u.Query()
	o.SentinelUsername, o.SentinelPassword = q.Get("sentinel_username"), q.Get("sentinel_password")
	for k := range q {
		if k != "sentinel_username" && k != "sentinel_password" {
			return nil, bad(fmt.Sprintf("unknown parameter %q", k))
		}
	}
	if u.Scheme == sentinelTLSScheme {
		o.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return o, nil
}

// connectSentinel returns a failover client for the master a Sentinel URL
// names, once a Sentinel named its address; it fails with ErrUnreachable
// when none of the Sentinels answers with one, naming each and why.
func connectSentinel(ctx context.Context, a string) (redis.UniversalClient, error) {
	o, err := parseSentinelURL(a)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	var errs []error
	for _, addr := range o.SentinelAddrs {
		sc := redis.NewSentinelClient(&redis.Options{
			Addr: addr, Username: o.SentinelUsername, Password: o.SentinelPassword, TLSConfig: o.TLSConfig,
			ContextTimeoutEnabled: true, DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
			MaxRetries: -1,
		})
		err := dial(ctx, nil, "tcp", addr)
		var master []string
		if err == nil {
			master, err = sc.GetMasterAddrByName(ctx, o.MasterName).Result()
		}
		_ = sc.Close()
		switch {
		case errors.Is(err, redis.Nil):
			errs = append(errs, fmt.Errorf("%w at %s: the Sentinel monitors no master named %q", ErrUnreachable, addr, o.MasterName))
		case err != nil && strings.Contains(err.Error(), "unknown command"):
			errs = append(errs, fmt.Errorf("%w: %s is not a Sentinel (%w); give a Sentinel's address in a %s:// URL, or a server's as host:port", ErrTopology, addr, err, sentinelScheme))
		case err != nil:
			errs = append(errs, unreachableError(addr, err))
		case len(master) != 2:
			errs = append(errs, fmt.Errorf("%w at %s: the Sentinel answered %q for master %q", ErrUnreachable, addr, master, o.MasterName))
		default:
			return redis.NewFailoverClient(o), nil
		}
	}
	return nil, errors.Join(errs...)
}

// closedByServer reports whether err is a connection that ended under
// the client: EOF, a reset or a broken pipe.
func closedByServer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}

// refusalWait bounds how long refusal waits for the server's first words.
const refusalWait = 250 * time.Millisecond

// refusal returns err, the error of a command on a connection to addr,
// with the server's reason when it closed the connection because it
// refuses the client: a Redis in protected mode (no password, and a
// client not on 127.0.0.1 or ::1) or with maxclients connections sends
// one error line as it accepts the connection ("-DENIED Redis is running
// in protected mode ...", "-ERR max number of clients reached") and
// closes it, and a client that writes first sees only EOF, a reset or a
// broken pipe. refusal dials addr once more with dialer and reads, for at
// most refusalWait and without writing, what the server sends; err is
// returned as it is when it is no closed connection or the server says
// nothing.
func refusal(ctx context.Context, dialer func(context.Context, string, string) (net.Conn, error), network, addr string, err error) error {
	if !closedByServer(err) {
		return err
	}
	if line := serverGreeting(ctx, dialer, network, addr); strings.HasPrefix(line, "-") {
		return &refusedError{line: strings.TrimPrefix(line, "-"), err: err}
	}
	return err
}

// refusedError is the error of a server that refused the client with an
// error line as it accepted the connection.
type refusedError struct {
	line string // the server's, without its '-'
	err  error  // the client's own error
}

func (e *refusedError) Error() string {
	return fmt.Sprintf("the server refused the connection: %q (%v)", e.line, e.err)
}

func (e *refusedError) Unwrap() error { return e.err }

// serverGreeting dials addr and returns the first line the server sends
// unasked, within refusalWait; "" when it sends none.
func serverGreeting(ctx context.Context, dialer func(context.Context, string, string) (net.Conn, error), network, addr string) string {
	ctx, cancel := context.WithTimeout(ctx, refusalWait)
	defer cancel()
	conn, err := dialConn(ctx, dialer, network, addr)
	if err != nil {
		return ""
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	_ = conn.SetReadDeadline(deadline)
	var buf []byte
	chunk := make([]byte, 512)
	for len(buf) < 4096 && !bytes.Contains(buf, []byte("\n")) {
		n, err := conn.Read(chunk)
		buf = append(buf, chunk[:n]...)
		if err != nil {
			break
		}
	}
	line, _, _ := strings.Cut(string(buf), "\n")
	return strings.TrimSpace(line)
}

// refuses reports whether err is a server's refusal of the client, which
// lasts until its configuration or the client's changes: an error line
// as it accepted the connection (protected mode, maxclients), or a
// refused password (WRONGPASS, NOAUTH, and "AUTH ... called without any
// password configured").
func refuses(err error) bool {
	var r *refusedError
	return errors.As(err, &r) || redis.HasErrorPrefix(err, "WRONGPASS") || redis.HasErrorPrefix(err, "NOAUTH") ||
		strings.Contains(err.Error(), "without any password configured")
}

// seedRefusals returns, for each seed of the Cluster client o that
// refuses the client as it connects (see refusal), an error naming the
// seed and the server's words; the seeds are asked together.
func seedRefusals(ctx context.Context, o *redis.ClusterOptions) []error {
	errs := make([]error, len(o.Addrs))
	var wg sync.WaitGroup
	for i, a := range o.Addrs {
		wg.Go(func() {
			dialer := seedDialer(o)
			if line := serverGreeting(ctx, dialer, "tcp", a); strings.HasPrefix(line, "-") {
				errs[i] = unreachableError(a, &refusedError{line: strings.TrimPrefix(line, "-"), err: io.EOF})
			}
		})
	}
	wg.Wait()
	return slices.DeleteFunc(errs, func(err error) bool { return err == nil })
}

// seedDialer dials the Cluster node at addr as the client's node clients
// do: with o's Dialer, or a net.Dialer of o's DialTimeout, over TLS when
// o says so. Unlike go-redis's own TLS dial (tls.DialWithDialer), it ends
// with its context.
func seedDialer(o *redis.ClusterOptions) func(context.Context, string, string) (net.Conn, error) {
	if o.Dialer != nil {
		return o.Dialer
	}
	nd := &net.Dialer{Timeout: o.DialTimeout}
	if nd.Timeout == 0 {
		nd.Timeout = 5 * time.Second // go-redis's default
	}
	if o.TLSConfig == nil {
		return nd.DialContext
	}
	td := &tls.Dialer{NetDialer: nd, Config: o.TLSConfig}
	return td.DialContext
}

// seedTCPDialer returns seedDialer(o) and no TLS configuration, unless
// the client dials over TLS with go-redis's own dialer: then a net.Dialer
// of o's DialTimeout and the TLS configuration for seedHandshake, so that
// a seed whose kernel accepts the connection but which never answers the
// TLS hello is told from one that cannot be reached, and its handshake
// is bounded as its answer to PING is (see seedAnswer).
func seedTCPDialer(o *redis.ClusterOptions) (func(context.Context, string, string) (net.Conn, error), *tls.Config) {
	if o.Dialer != nil || o.TLSConfig == nil {
		return seedDialer(o), nil
	}
	nd := &net.Dialer{Timeout: o.DialTimeout}
	if nd.Timeout == 0 {
		nd.Timeout = 5 * time.Second // go-redis's default
	}
	return nd.DialContext, o.TLSConfig
}

// seedHandshake runs the TLS handshake on conn, a connection to the seed
// at addr, as tls.Dialer would (the server's name from addr unless
// config names one), waiting at most wait for the seed's answer, or
// until ctx ends. It closes conn when it fails, with
// os.ErrDeadlineExceeded when the seed sent nothing within wait.
func seedHandshake(ctx context.Context, conn net.Conn, config *tls.Config, addr string, wait time.Duration) (net.Conn, error) {
	if config.ServerName == "" {
		config = config.Clone()
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		config.ServerName = host
	}
	if err := conn.SetDeadline(time.Now().Add(wait)); err != nil {
		_ = conn.Close()
		return nil, err
	}
	tc := tls.Client(conn, config)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = conn.Close()
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, err
	}
	return tc, nil
}

// tlsHint is what an error of a dial over TLS (tlsConfig not nil) adds
// when the server sent no TLS answer: a server that does not listen for
// TLS on the port reads the client's hello as the start of a command and
// waits for the rest, or answers it with a Redis error.
func tlsHint(tlsConfig *tls.Config, err error) string {
	var rh tls.RecordHeaderError
	switch {
	case tlsConfig == nil:
		return ""
	case errors.As(err, &rh), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		errors.Is(err, errNoAnswer), errors.Is(err, os.ErrDeadlineExceeded):
		return " (the client dials over TLS, and the server sent no TLS answer: does it listen for TLS on this port?)"
	}
	return ""
}
