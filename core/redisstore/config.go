package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Client settings ClientOptions and ClusterOptions use. A store does not
// need them to detect a failing node (it judges its nodes itself, see
// WithStallTimeout), but short timeouts return the connections of a
// stalled node to the pool sooner.
const (
	clientDialTimeout  = 500 * time.Millisecond
	clientReadTimeout  = 500 * time.Millisecond
	clientWriteTimeout = 500 * time.Millisecond
	clientPoolTimeout  = 500 * time.Millisecond
	clusterRedirects   = 8
)

// ClientOptions returns go-redis options for a standalone Redis at addr
// with settings that suit a limiter: ContextTimeoutEnabled, so that a
// caller's context deadline bounds reads and writes in flight, and short
// dial, read, write and pool timeouts, so that round trips to a stalled
// server end soon. go-redis's plain options work too: the store finds a
// stalled node by its silence, not by client timeouts. Change the
// other fields (password, TLS, pool size) as you like before
// redis.NewClient.
func ClientOptions(addr string) *redis.Options {
	return &redis.Options{
		Addr:                  addr,
		ContextTimeoutEnabled: true,
		DialTimeout:           clientDialTimeout,
		ReadTimeout:           clientReadTimeout,
		WriteTimeout:          clientWriteTimeout,
		PoolTimeout:           clientPoolTimeout,
	}
}

// ClusterOptions returns go-redis options for a Redis Cluster seeded by
// addrs, with the settings of ClientOptions and MaxRedirects 8, since a
// live reshard can answer MOVED several times in a row. go-redis does not
// reload its slot map when a dead master refuses connections
// (go-redis#3979); a Store does that itself when a call fails, and
// ReloadStateOnDialError does it for other users of the client.
func ClusterOptions(addrs ...string) *redis.ClusterOptions {
	return &redis.ClusterOptions{
		Addrs:                 append([]string(nil), addrs...),
		ContextTimeoutEnabled: true,
		DialTimeout:           clientDialTimeout,
		ReadTimeout:           clientReadTimeout,
		WriteTimeout:          clientWriteTimeout,
		PoolTimeout:           clientPoolTimeout,
		MaxRedirects:          clusterRedirects,
	}
}

// topologyReloadInterval is the least time between two slot-map reloads
// the limiter or the dial hook asks for (go-redis adds its own 200 ms
// cooldown).
const topologyReloadInterval = 100 * time.Millisecond

// reloader asks a ClusterClient to reload its slot map, at most once per
// topologyReloadInterval.
type reloader struct {
	client *redis.ClusterClient
	last   atomic.Int64 // unix nanoseconds
}

func (r *reloader) reload() {
	if r == nil {
		return
	}
	now := time.Now().UnixNano()
	last := r.last.Load()
	if now-last < int64(topologyReloadInterval) || !r.last.CompareAndSwap(last, now) {
		return
	}
	r.client.ReloadState(context.Background())
}

// ReloadStateOnDialError makes c reload its slot map (debounced) whenever
// dialling a node fails, such as a dead master refusing connections, so
// that c finds the promoted replica soon after failover instead of at its
// next periodic reload (go-redis#3979). Call it once, before using c; a
// Store on c does the same for its own calls without it.
func ReloadStateOnDialError(c *redis.ClusterClient) {
	r := &reloader{client: c}
	c.OnNewNode(func(node *redis.Client) {
		node.AddHook(dialHook{r: r})
	})
}

type dialHook struct{ r *reloader }

func (h dialHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err != nil && ctx.Err() == nil {
			h.r.reload()
		}
		return conn, err
	}
}

func (h dialHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h dialHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// evictingPolicy reports whether a maxmemory-policy removes keys.
func evictingPolicy(policy string) bool {
	return policy != "noeviction" && policy != ""
}

// CheckConfig reads maxmemory-policy from every master of client and
// fails with an error wrapping ErrUnsafeConfig when one evicts keys
// (allkeys-lru, volatile-ttl, ...): under memory pressure such a server
// drops limiter logs and lets clients through. Use noeviction: writes then
// fail with OOM and the limiter falls back. Other failures (unreachable
// server, CONFIG disabled) are returned as they are.
func CheckConfig(ctx context.Context, client redis.UniversalClient) error {
	return checkConfig(ctx, client, nil)
}

// checkConfig is CheckConfig on masters (see eachOf).
func checkConfig(ctx context.Context, client redis.UniversalClient, masters []*redis.Client) error {
	check := func(ctx context.Context, c *redis.Client) error {
		v, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
		if err != nil {
			return fmt.Errorf("config get maxmemory-policy on %s: %w", nodeName(c.Options().Addr), err)
		}
		if p := strings.ToLower(v["maxmemory-policy"]); evictingPolicy(p) {
			return fmt.Errorf("%w: %s has maxmemory-policy %s, which evicts limiter keys under memory pressure; use noeviction", ErrUnsafeConfig, nodeName(c.Options().Addr), p)
		}
		return nil
	}
	if err := eachOf(ctx, client, masters, check); err != errClientKind {
		return err
	}
	return errors.New("slidelog: cannot check the configuration of this client type")
}

// errClientKind is eachMaster's error for a client of another kind.
var errClientKind = errors.New("redisstore: a client of an unknown kind")

// eachMaster runs fn on every master of a Cluster client, every shard of
// a Ring, or the one server of a Client (standalone, or Sentinel's
// master), and returns the first error; errClientKind for a client of
// another kind.
func eachMaster(ctx context.Context, client redis.UniversalClient, fn func(context.Context, *redis.Client) error) error {
	switch c := client.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, fn)
	case *redis.Ring:
		return c.ForEachShard(ctx, fn)
	case *redis.Client:
		return fn(ctx, c)
	}
	return errClientKind
}

// eachOf runs fn on each of masters together and returns their errors
// joined, or, when masters is empty, is eachMaster: New's checks after
// reach run on the Cluster masters that answered it, through their own
// clients, without the reading of the slot map that the Cluster client
// makes for each call of eachMaster.
func eachOf(ctx context.Context, client redis.UniversalClient, masters []*redis.Client, fn func(context.Context, *redis.Client) error) error {
	if len(masters) == 0 {
		return eachMaster(ctx, client, fn)
	}
	errs := make([]error, len(masters))
	var wg sync.WaitGroup
	for i, m := range masters {
		wg.Go(func() { errs[i] = fn(ctx, m) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// nodeWait is how long New's check waits for a node of a Cluster
// client that leaves a request unanswered before it holds the node
// silent for the rest of the check (see checkContext): the client's
// ReadTimeout, and half the check's time at most, so that a silent node
// is found before the check's own time ends; 0 (no node is held silent:
// the check ends) for a client of one server.
func nodeWait(client redis.UniversalClient) time.Duration {
	c, ok := client.(*redis.ClusterClient)
	if !ok {
		return 0
	}
	wait := checkTimeout / 2
	if rt := c.Options().ReadTimeout; rt > 0 && rt < wait {
		wait = rt
	}
	return wait
}

// clientWarnings lists settings of client that break resharding.
func clientWarnings(client redis.UniversalClient) []string {
	var out []string
	if c, ok := client.(*redis.ClusterClient); ok {
		o := c.Options()
		if o.MaxRedirects < clusterRedirects {
			out = append(out, fmt.Sprintf("MaxRedirects is %d: a live reshard can fail decisions; use at least %d (redisstore.ClusterOptions)", o.MaxRedirects, clusterRedirects))
		}
	}
	return out
}
