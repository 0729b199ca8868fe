package redisstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	slidelog "github.com/slidelog/slidelog/core"
)

// WithReplicaAck makes an admission durable before the store counts it as
// safe: every pipeline to a master ends with WAIT replicas timeout, in
// the same round trip, so one WAIT is shared by all the decisions of the
// pipeline (a lone decision pays one WAIT of its own). An admission that
// fewer than replicas replicas acknowledged within timeout is still
// returned to its caller as admitted, and the store keeps it (request ID,
// cost, policies, the server's time of the admission) until replicas
// acknowledge it: before the next decision of the same key, the store
// writes it back with the script's record operation, idempotently by
// request ID, to whichever master owns the key then. If its master failed
// over without replicating it, the new master thus counts it before it
// decides again, and no rolling window admits more than its limit.
//
// Bounds: the store keeps at most 100,000 unacknowledged admissions, each
// until it has left its longest window (those beyond are dropped and
// counted in ReplicaAckStats.Dropped). The write-back happens before the
// next decision of the key in this process; another process sharing the
// key writes back only what it admitted itself. While replicas stay
// behind, every decision on that master takes up to timeout longer, a
// warning is logged at most once every 10 s per store, and
// ReplicaAckStats counts the unacknowledged admissions.
//
// replicas is at least 1 (usually 1: the replica a failover promotes);
// timeout is from 1 ms to below the client's ReadTimeout, so that a WAIT
// that times out still reads its reply. New fails with
// slidelog.ErrInvalidOption otherwise. Commands other than decisions and
// write-backs (Refund, Reset) are not acknowledged.
func WithReplicaAck(replicas int, timeout time.Duration) Option {
	return optionFunc(func(c *config) error {
		if replicas < 1 {
			return fmt.Errorf("%w: replica acknowledgement by %d replicas, want at least 1", slidelog.ErrInvalidOption, replicas)
		}
		if timeout < time.Millisecond {
			return fmt.Errorf("%w: replica acknowledgement timeout %v, want at least 1ms", slidelog.ErrInvalidOption, timeout)
		}
		c.ack = &acker{replicas: replicas, timeout: timeout, pending: make(map[string][]unacked)}
		return nil
	})
}

// ReplicaAckStats are the counters of WithReplicaAck, for metrics.
type ReplicaAckStats struct {
	// Unacknowledged counts the admissions no replica acknowledged in
	// time, since the store was made.
	Unacknowledged uint64
	// WrittenBack counts the write-backs of kept admissions into their
	// key's master (an admission is written back again while replicas
	// still do not acknowledge it).
	WrittenBack uint64
	// Pending is how many unacknowledged admissions the store keeps now.
	Pending int
	// Dropped counts the admissions not kept because Pending was at its
	// bound of 100,000.
	Dropped uint64
}

// ReplicaAckStats returns the counters of WithReplicaAck; all zero without it.
func (s *Store) ReplicaAckStats() ReplicaAckStats {
	a := s.pipes.ack
	if a == nil {
		return ReplicaAckStats{}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return ReplicaAckStats{Unacknowledged: a.unacked.Load(), WrittenBack: a.written.Load(), Pending: a.size, Dropped: a.dropped.Load()}
}

// ackMaxPending bounds the unacknowledged admissions a store keeps.
const ackMaxPending = 100_000

// ackWarnEvery is how often at most a store logs that replicas are behind.
const ackWarnEvery = 10 * time.Second

// ackRewriteEvery is how long after its last write a kept admission is
// written back to the same master again while replicas do not acknowledge
// it, doubling with each write-back up to ackRewriteMax; a change of the
// key's master writes it back at the next decision.
const (
	ackRewriteEvery = time.Second
	ackRewriteMax   = time.Minute
)

// ackWriteBackConcurrency is how many write-backs of one key run at once;
// they share the node's pipelines.
const ackWriteBackConcurrency = 32

// acker keeps the admissions of a store that replicas did not acknowledge.
type acker struct {
	replicas int
	timeout  time.Duration
	logger   *slog.Logger

	mu      sync.Mutex
	pending map[string][]unacked // by Redis key
	size    int
	count   atomic.Int64 // size, read without the lock

	unacked, written, dropped atomic.Uint64
	warned                    atomic.Int64 // Unix ns of the last warning
}

// unacked is one admission to write back: the request, when it was
// admitted, when it leaves its longest window, and the master that last
// received it and when.
type unacked struct {
	req     slidelog.Request
	at      time.Time
	expires time.Time
	node    string
	wrote   time.Time
	writes  int // write-backs to node so far
}

// keep stores the admission of req at at, written to node at wrote, which
// replicas did not acknowledge (acked of them did).
func (a *acker) keep(key, node string, req slidelog.Request, at, wrote time.Time, acked int) {
	a.unacked.Add(1)
	a.keepAgain(key, unacked{req: req, at: at, node: node, wrote: wrote}, acked)
}

// keepAgain keeps e again, not counting it as a new one.
func (a *acker) keepAgain(key string, e unacked, acked int) {
	if last := a.warned.Load(); time.Since(time.Unix(0, last)) >= ackWarnEvery && a.warned.CompareAndSwap(last, time.Now().UnixNano()) {
		a.logger.Warn("redisstore: replicas did not acknowledge admissions in time; they are kept and written back before their key's next decision",
			"node", e.node, "acknowledged", acked, "wanted", a.replicas, "timeout", a.timeout)
	}
	if e.expires.IsZero() {
		longest := time.Duration(0)
		for _, p := range e.req.Policies {
			longest = max(longest, p.Window)
		}
		e.expires = e.at.Add(longest)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.size >= ackMaxPending {
		a.dropped.Add(1)
		return
	}
	a.pending[key] = append(a.pending[key], e)
	a.size++
	a.count.Store(int64(a.size))
}

// due removes and returns the admissions kept for key that must be
// written back before a decision on node at now: those last written to
// another master, or to this one ackRewriteEvery ago. Those that left
// their window are dropped.
func (a *acker) due(key, node string, now time.Time) []unacked {
	if a.count.Load() == 0 {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	es := a.pending[key]
	if es == nil {
		return nil
	}
	var out []unacked
	keep := es[:0]
	for _, e := range es {
		switch {
		case !now.Before(e.expires):
		case e.node != node || now.Sub(e.wrote) >= min(ackRewriteMax, ackRewriteEvery<<min(e.writes, 6)):
			out = append(out, e)
		default:
			keep = append(keep, e)
		}
	}
	a.set(key, es, keep)
	return out
}

// acked drops the admissions kept for key that node received before
// sent: a pipeline sent to node at sent that replicas acknowledged shows
// that they hold everything node had written before.
func (a *acker) acked(key, node string, sent time.Time) {
	if a.count.Load() == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	es := a.pending[key]
	keep := es[:0]
	for _, e := range es {
		if e.node != node || !e.wrote.Before(sent) {
			keep = append(keep, e)
		}
	}
	a.set(key, es, keep)
}

// forget drops the admission of request id kept for key (a refund), or
// every admission kept for key when all is set (a reset).
func (a *acker) forget(key string, id uint64, all bool) {
	if a == nil || a.count.Load() == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	es := a.pending[key]
	keep := es[:0]
	for _, e := range es {
		if !all && e.req.ID != id {
			keep = append(keep, e)
		}
	}
	a.set(key, es, keep)
}

// set replaces the admissions kept for key, es, by keep (a prefix of es's
// array); a.mu is held.
func (a *acker) set(key string, es, keep []unacked) {
	a.size -= len(es) - len(keep)
	a.count.Store(int64(a.size))
	if len(keep) == 0 {
		delete(a.pending, key)
		return
	}
	a.pending[key] = keep
}

// writeBack writes the admissions kept for r's key that are due (see
// due) to the master that owns the key now, before a decision on it, up to
// ackWriteBackConcurrency at once so that they share pipelines. A failed
// write-back keeps them and fails the decision (the limiter then falls
// back), so that no decision is made on a master that may lack them.
func (s *Store) writeBack(ctx context.Context, r slidelog.Route) error {
	a := s.pipes.ack
	es := a.due(r.Key, r.Node, s.now())
	if len(es) == 0 {
		return nil
	}
	errs := make([]error, len(es))
	sem := make(chan struct{}, ackWriteBackConcurrency)
	var wg sync.WaitGroup
	for i := range es {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			e := &es[i]
			sent := s.now()
			_, acked, err := s.pipes.runAcked(ctx, s.script(), logKeys(r.Key), r, s.args(opRecord, e.req, e.at.UnixMicro()))
			switch {
			case err != nil:
				errs[i] = err
			case acked < a.replicas:
				a.written.Add(1)
				if e.node == r.Node {
					e.writes++
				} else {
					e.writes = 0
				}
				e.node, e.wrote = r.Node, sent
				errs[i] = errNotAcked
			default:
				a.written.Add(1)
			}
		})
	}
	wg.Wait()
	var first error
	for i, err := range errs {
		if err == nil {
			continue
		}
		a.keepAgain(r.Key, es[i], 0)
		if first == nil && err != errNotAcked {
			first = err
		}
	}
	return first
}

// errNotAcked marks a write-back replicas did not acknowledge: kept, not a
// failure.
var errNotAcked = errors.New("redisstore: not acknowledged")

// now is the store's clock: WithClock's, or the process's.
func (s *Store) now() time.Time {
	if s.clock != nil {
		return s.clock()
	}
	return time.Now()
}

// sendNode runs calls in one pipeline on node's own connection, not
// through the Cluster client, whose pipeline starts a goroutine per
// node. With WithReplicaAck the calls then WAIT in the same pipeline, so
// that WAIT counts the replicas holding exactly their writes. Calls the
// node lost the script for (NOSCRIPT) are sent again with EVAL; calls it
// no longer owns (MOVED, ASK) go through the Cluster client, one by one
// and with no acknowledgement (acked 0), and are kept like any other.
func (b *batcher) sendNode(ctx context.Context, node *redis.Client, live []*scriptCall) {
	run := func(calls []*scriptCall, eval bool) (retry, moved []*scriptCall) {
		p := node.Pipeline()
		cmds := make([]*redis.Cmd, len(calls))
		for i, c := range calls {
			if eval {
				cmds[i] = c.script.Eval(ctx, p, c.keys, c.args...)
			} else {
				cmds[i] = c.script.EvalSha(ctx, p, c.keys, c.args...)
			}
		}
		var wait *redis.Cmd
		if b.ack != nil {
			wait = p.Do(ctx, "wait", b.ack.replicas, b.ack.timeout.Milliseconds())
		}
		_, _ = p.Exec(ctx)
		acked := 0
		if wait != nil {
			acked, _ = wait.Int() // 0 when WAIT failed
		}
		for i, c := range calls {
			err := cmds[i].Err()
			switch {
			case err != nil && !eval && redis.HasErrorPrefix(err, "NOSCRIPT"):
				b.replied()
				retry = append(retry, c)
				continue
			case err != nil && (redis.HasErrorPrefix(err, "MOVED") || redis.HasErrorPrefix(err, "ASK")):
				b.replied()
				moved = append(moved, c)
				continue
			}
			c.reply, c.err = cmds[i].Int64Slice()
			c.acked = acked
			b.answer(c)
		}
		return retry, moved
	}
	retry, moved := run(live, false)
	if len(retry) > 0 {
		var more []*scriptCall
		_, more = run(retry, true)
		moved = append(moved, more...)
	}
	if len(moved) > 0 {
		b.sendPlain(ctx, moved)
	}
}

// sendPlain runs calls through the client, routed by key, without WAIT.
func (b *batcher) sendPlain(ctx context.Context, calls []*scriptCall) {
	for _, c := range calls {
		c.reply, c.err = c.script.Run(ctx, b.client, c.keys, c.args...).Int64Slice()
		b.answer(c)
	}
}

// nodeClient returns the client of the master that holds key, for a
// pipeline on its own connection: the client itself on a single server;
// nil when it is not known, or when the batcher's calls may be headed for
// several masters (their node was not known when they came) and need the
// Cluster client's routing.
func (b *batcher) nodeClient(ctx context.Context, key string) *redis.Client {
	switch c := b.client.(type) {
	case *redis.ClusterClient:
		if b.conns == nil && b.ack == nil {
			return nil
		}
		if n, err := c.MasterForKey(ctx, key); err == nil {
			return n
		}
	case *redis.Client:
		return c
	}
	return nil
}

// checkAck checks WithReplicaAck against the client's read timeout.
func checkAck(client redis.UniversalClient, a *acker, stall time.Duration) error {
	var read time.Duration
	switch c := client.(type) {
	case *redis.ClusterClient:
		read = c.Options().ReadTimeout
	case *redis.Client:
		read = c.Options().ReadTimeout
	default:
		return fmt.Errorf("%w: replica acknowledgement needs a *redis.Client or *redis.ClusterClient, not %T", slidelog.ErrInvalidOption, client)
	}
	if read == 0 {
		read = 3 * time.Second // go-redis's default
	}
	if read > 0 && a.timeout >= read {
		return fmt.Errorf("%w: replica acknowledgement timeout %v not below the client's ReadTimeout %v", slidelog.ErrInvalidOption, a.timeout, read)
	}
	// WAIT's reply is owed for up to the timeout: the master must not look
	// stalled meanwhile.
	if most := stall - stall/4; a.timeout > most {
		return fmt.Errorf("%w: replica acknowledgement timeout %v leaves a master waiting for its replicas too close to the stall timeout %v, where it would be judged stalled: use at most %v, or raise redisstore.WithStallTimeout", slidelog.ErrInvalidOption, a.timeout, stall, most)
	}
	return nil
}

// checkReplicas logs every master with fewer connected replicas than
// WithReplicaAck waits for: each admission on it would wait the timeout
// and be kept.
func (s *Store) checkReplicas(ctx context.Context, logger *slog.Logger) {
	a := s.pipes.ack
	if a == nil {
		return
	}
	check := func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "replication").Result()
		if err != nil {
			logger.Warn("redisstore: could not count the replicas of a master", "node", c.Options().Addr, "error", err)
			return nil
		}
		n := 0
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "connected_slaves:"); ok {
				n, _ = strconv.Atoi(v)
			}
		}
		if n < a.replicas {
			logger.Warn("redisstore: a master has fewer replicas than WithReplicaAck waits for; each of its admissions will wait the timeout and be kept",
				"node", c.Options().Addr, "replicas", n, "wanted", a.replicas, "timeout", a.timeout)
		}
		return nil
	}
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		_ = c.ForEachMaster(ctx, check)
	case *redis.Client:
		_ = check(ctx, c)
	}
}
