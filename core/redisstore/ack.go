package redisstore

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/internal/writeback"
)

// WithReplicaAck makes an admission durable before the store counts it as
// safe: every pipeline to a master ends with WAIT replicas timeout, in
// the same round trip, so one WAIT is shared by all the decisions of the
// pipeline (a lone decision pays one WAIT of its own). An admission that
// fewer than replicas replicas acknowledged within timeout is still
// returned to its caller as admitted, and the store keeps it (request ID,
// cost, policies, the server's time of the admission, and the identity of
// the server that holds it) in its write-back journal, with the limiter's
// fallback admissions (slidelog.Keeper). Every later decision of the same
// key carries the key's kept admissions in its own script call, and the
// script records each one, idempotently by request ID, unless the master
// is the server known to hold it, before it decides. A server's identity
// is derived from its run_id (a new process) and master_replid (a new one
// at every promotion), not from the client's address, so a master change
// is noticed at the key's next decision on any client: a Cluster client,
// a Sentinel failover client, or one address that fails over behind a
// name. If its master failed over without replicating it, the new master
// thus counts it before it decides, and no rolling window admits more
// than its limit, however many decisions of the key run at once. An
// admission leaves the journal once replicas acknowledged a call that
// wrote it, or a later call to the same server.
//
// Bounds: the store keeps at most 100,000 admissions, each until it has
// left its longest window (those beyond are dropped and counted in
// ReplicaAckStats.Dropped). The write-back happens within the decisions
// of the key in this process; another process sharing the key writes back
// only what it admitted itself. While replicas stay behind, every decision
// on that master takes up to timeout longer, carries the key's kept
// admissions (four arguments each) and runs the whole script, a warning
// is logged at most once every 10 s per store, and ReplicaAckStats counts
// the unacknowledged admissions.
//
// replicas is at least 1. Set it to the number of replicas each master
// has: a failover promotes one of them, not necessarily one that
// acknowledged (Sentinel ranks replica-priority before the replication
// offset, and the replica that acknowledged may fail with the master),
// and what only the others acknowledged is then lost, up to one window's
// worth per key (a window of up to twice the limit; measured in
// docs/scaling.md, "Two replicas"). With replicas equal to the replica
// count, a replica that is down or behind makes each admission wait the
// timeout and be kept until it is back.
// timeout is from 1 ms to below the client's ReadTimeout, so that a WAIT
// that times out still reads its reply, and at most 3/4 of the stall
// timeout (WithStallTimeout), so that a master waiting for its replicas
// is not judged stalled. New fails with slidelog.ErrInvalidOption
// otherwise. Commands other than decisions and write-backs (Refund,
// Reset) are not acknowledged.
func WithReplicaAck(replicas int, timeout time.Duration) Option {
	return optionFunc(func(c *config) error {
		if replicas < 1 {
			return fmt.Errorf("%w: replica acknowledgement by %d replicas, want at least 1", slidelog.ErrInvalidOption, replicas)
		}
		if timeout < time.Millisecond {
			return fmt.Errorf("%w: replica acknowledgement timeout %v, want at least 1ms", slidelog.ErrInvalidOption, timeout)
		}
		c.ack = &acker{replicas: replicas, timeout: timeout}
		return nil
	})
}

// ReplicaAckStats are the counters of WithReplicaAck, for metrics.
type ReplicaAckStats struct {
	// Unacknowledged counts the admissions no replica acknowledged in
	// time, since the store was made.
	Unacknowledged uint64
	// WrittenBack counts the kept admissions written again into their
	// key's master within a decision (an admission is written again while
	// replicas still do not acknowledge it, and to every new master).
	WrittenBack uint64
	// Pending is how many admissions the store keeps now: those no
	// replica acknowledged, and a limiter's fallback admissions not yet
	// written (slidelog.Keeper).
	Pending int
	// Dropped counts the admissions not kept because Pending was at its
	// bound of 100,000.
	Dropped uint64
}

// ReplicaAckStats returns the counters of WithReplicaAck (Pending and
// Dropped also count the fallback admissions the store keeps).
func (s *Store) ReplicaAckStats() ReplicaAckStats {
	st := ReplicaAckStats{Pending: s.kept.Len(), Dropped: s.kept.Dropped()}
	if a := s.pipes.ack; a != nil {
		st.Unacknowledged, st.WrittenBack = a.unacked.Load(), a.written.Load()
	}
	return st
}

// ackWarnEvery is how often at most a store logs that replicas are behind.
const ackWarnEvery = 10 * time.Second

// ackRewriteEvery is how long after its last write a kept admission is
// written again to the same master (identity) while replicas do not
// acknowledge it, doubling with each write up to ackRewriteMax: the same
// server holds it, so this only guards against a server that lost writes
// without changing its identity. A master of another identity gets it
// within the key's next decision.
const (
	ackRewriteEvery = time.Second
	ackRewriteMax   = time.Minute
)

// writeBackConcurrency is how many kept admissions WriteBack writes at
// once; they share the nodes' pipelines.
const writeBackConcurrency = 32

// acker is the configuration and counters of WithReplicaAck; what it
// keeps is in the store's journal (Store.kept).
type acker struct {
	replicas int
	timeout  time.Duration
	logger   *slog.Logger

	unacked, written atomic.Uint64
	warned           atomic.Int64 // Unix ns of the last warning
}

// warn logs, at most once every ackWarnEvery, that replicas are behind.
func (a *acker) warn(node string, acked int) {
	if last := a.warned.Load(); time.Since(time.Unix(0, last)) >= ackWarnEvery && a.warned.CompareAndSwap(last, time.Now().UnixNano()) {
		a.logger.Warn("redisstore: replicas did not acknowledge admissions in time; they are kept and written back within their key's next decision",
			"node", nodeName(node), "acknowledged", acked, "wanted", a.replicas, "timeout", a.timeout)
	}
}

// keepUnacked keeps the admission of req at at, which the server of
// identity server (writeback.Unknown when not known) holds since sent but
// replicas did not acknowledge (acked of them did).
func (s *Store) keepUnacked(key, node string, req slidelog.Request, at, sent time.Time, server int64, acked int) {
	a := s.pipes.ack
	a.unacked.Add(1)
	a.warn(node, acked)
	s.kept.Add(key, writeback.Entry[slidelog.Request]{Req: req, ID: req.ID, At: at, Expires: at.Add(longestWindow(req.Policies)), Server: server, Wrote: sent})
}

func longestWindow(ps []slidelog.Policy) time.Duration {
	var w time.Duration
	for _, p := range ps {
		w = max(w, p.Window)
	}
	return w
}

// takeKept decides req with the kept admissions of its key, es, written
// into the key's master first, in the same run of the script (operation
// 'takew'): each unless the master has the identity of the server known
// to hold it and wrote it less than its rewrite interval ago. Every
// decision of the key does so until they are settled, so none runs on a
// master that lacks them. The script replies with the master's identity;
// the admissions leave the journal once replicas acknowledged a write of
// them (or at once without WithReplicaAck), otherwise they now name that
// master.
func (s *Store) takeKept(ctx context.Context, req slidelog.Request, r slidelog.Route, es []writeback.Entry[slidelog.Request]) (slidelog.Result, error) {
	sent := s.now()
	args := make([]any, 0, 6+4*len(es)+3*len(req.Policies))
	args = append(args, opTakeKept, s.nowArg(), member(req.ID), req.Cost, 0, len(es))
	for i := range es {
		e := &es[i]
		server := e.Server
		if server > 0 && sent.Sub(e.Wrote) >= min(ackRewriteMax, ackRewriteEvery<<min(e.Writes, 6)) {
			server = writeback.Unwritten // due to be written to the same master again
		}
		e.Server = server // what Settle compares the master's identity with
		args = append(args, member(e.ID), e.Req.Cost, e.At.UnixMicro(), max(server, 0))
	}
	for _, p := range req.Policies {
		args = append(args, p.Limit, p.Window.Microseconds(), p.Precision.Microseconds())
	}
	reply, acked, err := s.pipes.runAcked(ctx, s.script(), logKeys(r.LogKey), r, args)
	if wrongType(err) {
		s.repair(ctx, r.LogKey)
		reply, acked, err = s.pipes.runAcked(ctx, s.script(), logKeys(r.LogKey), r, args)
	}
	if err != nil {
		return slidelog.Result{}, s.failed(ctx, err)
	}
	if len(reply) != 4+3*len(req.Policies) {
		return slidelog.Result{}, fmt.Errorf("%w: script returned %d values for %d policies and an identity", slidelog.ErrUnavailable, len(reply), len(req.Policies))
	}
	s.repaired(r.LogKey, reply)
	server := reply[len(reply)-1]
	if server <= 0 {
		// The server would not say who it is (INFO refused): every
		// kept admission stays of unknown identity, written again with
		// each decision.
		server = writeback.Unknown
	}
	res := decode(reply[:len(reply)-1], req.Policies, Source)
	a := s.pipes.ack
	durable := a == nil || acked >= a.replicas
	if a != nil {
		for i := range es {
			if es[i].Server != server {
				a.written.Add(1)
			}
		}
	}
	s.kept.Settle(r.LogKey, es, server, durable, sent)
	switch {
	case a == nil:
	case durable:
		s.kept.Acked(r.LogKey, server, sent)
	case res.Allowed:
		s.keepUnacked(r.LogKey, r.Node, req, res.DecidedAt, sent, server, acked)
	}
	return res, nil
}

// Keep implements slidelog.Keeper: the store keeps the admission req of
// a limiter's fallback, made at at, in the journal where it keeps the
// admissions replicas did not acknowledge, and writes it into the key's
// log within the key's next decision (or WriteBack), before deciding.
func (s *Store) Keep(req slidelog.Request, at time.Time) {
	if req.ValidateRecord(at) != nil {
		return
	}
	key := req.Route.LogKey
	if key == "" {
		key = s.LogKey(req.Namespace, req.Key)
	}
	s.kept.Add(key, writeback.Entry[slidelog.Request]{Req: req, ID: req.ID, At: at, Expires: at.Add(longestWindow(req.Policies)), Server: writeback.Unwritten})
}

// Forget implements slidelog.Keeper: it drops the kept admission of
// req.ID under req's key.
func (s *Store) Forget(req slidelog.Request) {
	if s.kept.Len() > 0 {
		s.kept.Forget(s.LogKey(req.Namespace, req.Key), req.ID)
	}
}

// Unwritten implements slidelog.Keeper: how many kept admissions no
// server holds yet.
func (s *Store) Unwritten() int { return s.kept.Unwritten() }

// WriteBack implements slidelog.Keeper: it records every kept admission
// that no server holds yet, up to 32 at once; after a failed write it
// tries no more.
func (s *Store) WriteBack(ctx context.Context) (written, left int) {
	if s.kept.Unwritten() == 0 {
		return 0, 0
	}
	var (
		mu      sync.Mutex
		wg      sync.WaitGroup
		failing atomic.Bool
	)
	// Also when the loop panics (WithClock's clock, on the caller's
	// goroutine): no writer outlives the call.
	defer wg.Wait()
	sem := make(chan struct{}, writeBackConcurrency)
	for _, key := range s.kept.Keys() {
		for _, e := range s.kept.Pending(key, s.now(), nil) {
			if e.Server != writeback.Unwritten {
				continue
			}
			sem <- struct{}{}
			if failing.Load() {
				// A write failed: the rest wait for the next round (or
				// their key's next decision), not a stall timeout each.
				<-sem
				mu.Lock()
				left++
				mu.Unlock()
				continue
			}
			wg.Go(func() {
				defer func() { <-sem }()
				req := e.Req
				req.Route = slidelog.Route{}
				err := s.writeBackOne(ctx, req, e.At)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failing.Store(true)
					left++
				} else {
					written++
				}
			})
		}
	}
	wg.Wait()
	return written, left
}

// writeBackOne records one kept admission for WriteBack, on a writer
// goroutine of its own; Record settles it. A panic there (WithClock's
// clock, the client) is recovered and logged, and fails the write: the
// admission stays for a later attempt.
func (s *Store) writeBackOne(ctx context.Context, req slidelog.Request, at time.Time) (err error) {
	defer func() {
		if p := recover(); p != nil {
			s.pipes.mon.panics.log(panicWriteBack, p)
			err = panicError(panicWriteBack, p)
		}
	}()
	return s.Record(ctx, req, at)
}

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
	var addWait func(redis.Pipeliner) *redis.Cmd
	if b.ack != nil {
		addWait = func(p redis.Pipeliner) *redis.Cmd {
			return p.Do(ctx, "wait", b.ack.replicas, b.ack.timeout.Milliseconds())
		}
	}
	run := func(calls []*scriptCall, eval bool) (retry, moved []*scriptCall) {
		cmds, wait := b.pipeline(ctx, node, calls, func(p redis.Pipeliner, c *scriptCall) *redis.Cmd {
			if eval {
				return c.script.Eval(ctx, p, c.keys, c.args...)
			}
			return c.script.EvalSha(ctx, p, c.keys, c.args...)
		}, addWait)
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
		c.reply, c.err = b.runScript(ctx, c)
		b.answer(c)
	}
}

// nodeClient returns the client of the master that holds key, for a
// pipeline on its own connection: the client itself on a single server;
// nil when it is not known, or when the batcher's calls may be headed for
// several masters (their node was not known when they came) and need the
// Cluster client's routing.
func (b *batcher) nodeClient(ctx context.Context, key string) (node *redis.Client) {
	defer func() {
		if p := recover(); p != nil {
			// A hook of the client's, reading the slot map: the calls
			// go through the Cluster client's routing, and fail there
			// if it panics again.
			_ = b.recoverRoundTrip(p)
			node = nil
		}
	}()
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
// WithReplicaAck waits for (each admission on it would wait the timeout
// and be kept), and every master with more (a failover to a replica that
// did not acknowledge loses what only the others hold: docs/scaling.md,
// "Two replicas").
func (s *Store) checkReplicas(ctx context.Context, logger *slog.Logger, masters []*redis.Client) {
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
		if n > a.replicas {
			logger.Warn("redisstore: a master has more replicas than WithReplicaAck waits for; a failover to one that did not acknowledge loses the admissions only the others hold (set it to the replica count)",
				"node", c.Options().Addr, "replicas", n, "wanted", a.replicas)
		}
		return nil
	}
	_ = eachOf(ctx, s.client, masters, check)
}
