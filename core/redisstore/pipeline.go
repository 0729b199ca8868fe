package redisstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	slidelog "github.com/slidelog/slidelog/core"
)

// DefaultPipelinesPerNode is how many pipelines a Store keeps in flight to
// one Redis node when automatic pipelining is on.
const DefaultPipelinesPerNode = 2

// WithAutoPipelining switches a Store's automatic pipelining on
// (pipelinesPerNode > 0, the default being DefaultPipelinesPerNode) or off
// (0). When on, decisions headed for the same Redis node while that node's
// pipelines are busy wait and leave together in the next pipeline, one
// round trip for all of them: no timer, so a lone caller goes out at once.
// When off, every decision is its own EVALSHA, with as many in flight per
// node as the client's pool has connections. Either way a caller waits for
// its reply as long as its context allows and its node is not found
// stalled: when the node has sent nothing for the stall timeout
// (WithStallTimeout), the store itself ends the call with an error
// wrapping slidelog.ErrStalled; nothing cancels the caller's context.
func WithAutoPipelining(pipelinesPerNode int) Option {
	return optionFunc(func(c *config) error {
		c.pipelinesPerNode = max(0, pipelinesPerNode)
		c.pipeliningSet = true
		return nil
	})
}

// scriptCall is one decision waiting for its pipeline.
type scriptCall struct {
	script  *redis.Script
	ctx     context.Context
	keys    []string // the script's KEYS; keys[0] routes the call
	args    []any
	member  string          // the request's member, which its request carries; "" if none
	stalled <-chan struct{} // closed when the node is found stalled or the store closed
	reply   []int64
	acked   int // replicas that acknowledged the call's pipeline (WithReplicaAck)
	err     error
	done    chan struct{} // closed when answered or made to lead; nil for a call sent inline
	canLead bool          // its caller may send it (mayRunInline)
	// mine is set, in the caller's goroutine, once no other goroutine
	// holds the call any more: it was sent inline, or its caller saw done
	// closed, the sender's last touch. Only then may it be reused.
	mine bool

	// Set, under the batcher's lock, when the call is to be sent from its
	// caller's goroutine with the batch lead (see handLocked).
	lead    []*scriptCall
	leadCtx context.Context
	leadGen uint64
	// state is callWaiting until the caller leaves (callGone: do not
	// send it) or a sender makes it lead its batch (callLed), whichever
	// comes first; the other then finds it taken.
	state atomic.Int32

	// The storage of keys, args and lead for the commonest call (one key,
	// up to four arguments, sent alone), kept in the call's own
	// allocation.
	keyBuf  [1]string
	argBuf  [4]any
	selfBuf [1]*scriptCall
}

// The states of a scriptCall (its state field).
const (
	callWaiting int32 = iota
	callGone          // its caller left: no sender sends it
	callLed           // made to lead its batch (lead is set)
)

// batcher sends the script calls for one node. At most limit senders
// are in flight, each sending up to maxBatch calls (0: all that queued)
// per round trip; calls that arrive meanwhile queue, and the sender that
// returns first takes the queue next. A call that finds no sender in
// flight is its own sender, in its caller's goroutine (see inline).
//
// When the node is found stalled, its senders are written off: their
// round trips are cancelled (no retries; a read in progress still ends
// only at the client's read timeout), they stop taking work, and they no
// longer count against limit, so that calls after the node recovers go
// out on new connections instead of queueing behind dead ones. Each stall
// writes off at most limit senders, each living at most one read timeout
// more: the goroutines stay bounded.
type batcher struct {
	client   redis.UniversalClient // routes by key; follows MOVED and ASK
	limit    int
	maxBatch int
	mu       sync.Mutex
	queue    []*scriptCall
	inflight int
	senders  map[*sender]struct{}

	// A dial to the node failed: the node said no, which is not
	// slowness. refusal is closed then (and a new one made by the next
	// caller), so that the callers waiting leave at once with refusedErr,
	// and callers that come within refusedFor of it, with no reply since,
	// do not wait either.
	refusal    chan struct{}
	refusedErr error
	refusedAt  time.Time
	refused    atomic.Bool  // refusedErr is set: a reply must clear it
	mapped     *atomic.Bool // the pipelines' mapped; nil on a single server
	ack        *acker       // WithReplicaAck; nil without

	// conns are the node's connections, nil when the node's address is
	// not known (calls routed by the client): a lone call reads in its
	// caller's goroutine only when they can be broken off (see do).
	conns *connSet

	// The node's health (see monitor). node is its address ("" when
	// not known, or on a single server); master, on a single server,
	// holds the address of the server the client reaches (see
	// pipelines.master).
	mon       *monitor
	node      string
	master    *atomic.Pointer[string]
	waiting   atomic.Int64  // calls waiting on the node: counted in under mu, out without it
	busySince int64         // when (monotime.Now) waiting last left 0, or of the last verdict
	epoch     chan struct{} // closed when the node is judged stalled, or the store closed
	closed    atomic.Bool   // the store is closed: set under mu
	lastReply atomic.Int64  // when (monotime.Now) the node last replied
	// Owned by the monitor's goroutine: the node's silence in alive
	// time, and the progress it last saw.
	silence time.Duration
	seen    int64
	// The node's silence by its connections' kernel record (see
	// monitor.stalled): since when, and how much of it counts.
	quietSince int64
	quiet      time.Duration
	// byAlive is set when the monitor last judged the node in alive time
	// (the kernel could not tell), for the verdict's log line.
	byAlive bool
	// kernelSaid is what the kernel said of the node before a verdict
	// in alive time (see aliveSilence), for the log line: how long ago
	// its last bytes arrived on this process's connections, or "unknown"
	// or "nothing" (no connection has received any).
	kernelSaid string

	// The calls sent inline (see inline) share inlineCtx, made when the
	// first of them needs it and cancelled, then dropped, when they are
	// written off or a dial fails. inlineN of them are in flight, each
	// counted in inflight; writing them off adds one to inlineGen, so
	// that each finds on its return that its slot is gone.
	inlineCtx    context.Context
	inlineCancel context.CancelFunc
	inlineN      int
	inlineGen    uint64
	// root is the parent of the contexts of the round trips, made once
	// (see roundTripContext).
	root context.Context
}

// refusedFor is how long after a failed dial, with no reply since, a call
// to the node fails at once instead of waiting for its own dial.
const refusedFor = time.Second

// refuse records that the node cannot decide (a dial to it failed, or it
// replied that it cannot serve: see cannotServe) and sends the callers
// waiting on it to their failure mode.
func (b *batcher) refuse(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refusedErr = fmt.Errorf("%w: %w", slidelog.ErrUnavailable, err)
	b.refusedAt = time.Now()
	b.refused.Store(true)
	// The callers sending inline are in go-redis's dial retries or its
	// retries of a reply such as CLUSTERDOWN, which end with the context.
	b.cancelInlineLocked()
	if b.refusal != nil {
		close(b.refusal)
		b.refusal = nil
	}
}

// answered clears a refusal: the node replied.
func (b *batcher) answered() {
	if !b.refused.Load() {
		return
	}
	b.mu.Lock()
	b.refusedErr = nil
	b.refused.Store(false)
	b.mu.Unlock()
}

// sender is one goroutine sending batches for a batcher.
type sender struct {
	ctx    context.Context
	cancel context.CancelFunc
	off    bool // written off: exits after its round trip, uncounted
}

// startLocked starts a sender for batch; b.mu is held and a slot taken.
func (b *batcher) startLocked(batch []*scriptCall) {
	ctx, cancel := context.WithCancel(b.roundTripContext())
	s := &sender{ctx: ctx, cancel: cancel}
	if b.senders == nil {
		b.senders = make(map[*sender]struct{})
	}
	b.senders[s] = struct{}{}
	go b.run(s, batch)
}

// roundTripContext is the root of the contexts b's round trips run in:
// it carries b, so that a reply the client's hooks see during a round
// trip reaches the batcher that sent it (see sentBy). b.mu is held.
func (b *batcher) roundTripContext() context.Context {
	if b.root == nil {
		b.root = context.WithValue(context.Background(), sentByKey{}, b)
	}
	return b.root
}

// sentByKey is the key of the batcher in a round trip's context.
type sentByKey struct{}

// sentBy returns the batcher whose round trip ctx is, or nil.
func sentBy(ctx context.Context) *batcher {
	b, _ := ctx.Value(sentByKey{}).(*batcher)
	return b
}

// cancelInlineLocked cancels the round trips of the calls sent inline;
// the next one gets a new context. b.mu is held.
func (b *batcher) cancelInlineLocked() {
	if b.inlineCancel != nil {
		b.inlineCancel()
		b.inlineCtx, b.inlineCancel = nil, nil
	}
}

// writeOffLocked writes off the senders in flight, because the node
// stalled or the store closed, and, unless it closed, starts a new sender
// for what queued meanwhile. b.mu is held.
func (b *batcher) writeOffLocked() {
	for s := range b.senders {
		s.off = true
		s.cancel()
		b.inflight--
		delete(b.senders, s)
	}
	b.inflight -= b.inlineN
	b.inlineN = 0
	b.inlineGen++
	b.cancelInlineLocked()
	if !b.closed.Load() && b.inflight < b.limit { // a closed store sends nothing more
		if batch := b.takeLocked(); batch != nil {
			b.inflight++
			b.startLocked(batch)
		}
	}
}

// do sends call, or queues it and waits for its reply, for the call's
// context, or for its node to be found stalled, whichever comes first. A
// reply that has arrived is always used.
func (b *batcher) do(call *scriptCall) ([]int64, error) {
	b.mu.Lock()
	if b.closed.Load() {
		b.mu.Unlock()
		return nil, slidelog.ErrClosed
	}
	b.beginLocked(call)
	reply, err := b.wait(call)
	b.end()
	return reply, err
}

// wait is do once call is counted in; b.mu is held and released.
func (b *batcher) wait(call *scriptCall) ([]int64, error) {
	if b.refusedErr != nil && time.Since(b.refusedAt) < refusedFor {
		err := b.refusedErr
		b.mu.Unlock()
		return nil, err
	}
	if b.refusal == nil {
		b.refusal = make(chan struct{})
	}
	refusal := b.refusal
	inline := b.mayRunInline(call)
	call.canLead = inline && call.ctx.Done() == nil
	if inline && b.inflight < b.limit && len(b.queue) == 0 {
		return b.inline(call) // unlocks b.mu
	}
	call.done = make(chan struct{})
	b.queue = append(b.queue, call)
	if b.inflight < b.limit {
		// The sender runs apart from every caller, so that a caller can
		// give up on a stalled node while the round trip is still out.
		b.inflight++
		b.startLocked(b.takeLocked())
	}
	b.mu.Unlock()
	stalled := false
	select {
	case <-call.done:
		call.mine = true // answered, or made to lead the batch from here
		if call.lead != nil {
			return b.lead(call)
		}
		return b.verdictOr(call, call.reply, call.err)
	case <-call.ctx.Done():
	case <-call.stalled:
		stalled = true
	case <-refusal:
		if reply, err, ok := b.leave(call); ok {
			return b.verdictOr(call, reply, err)
		}
		b.mu.Lock()
		err := b.refusedErr
		b.mu.Unlock()
		if err == nil {
			err = fmt.Errorf("%w: connection refused", slidelog.ErrUnavailable)
		}
		return nil, err
	}
	if reply, err, ok := b.leave(call); ok {
		return b.verdictOr(call, reply, err)
	}
	if stalled {
		return nil, b.stallError()
	}
	// The call may still run in Redis: it then holds an entry its caller
	// never used, which can only make the limiter stricter.
	return nil, context.Cause(call.ctx)
}

// verdictOr returns call's reply and error, the error of a round trip that
// the node's stall verdict ended (its sender's context cancelled, its
// connection broken off) being the verdict's: ErrStalled, or ErrClosed
// when the store closed. An error of a call whose own context ended is
// left as it is.
func (b *batcher) verdictOr(call *scriptCall, reply []int64, err error) ([]int64, error) {
	if err != nil && call.ctx.Err() == nil {
		select {
		case <-call.stalled:
			return nil, b.stallError()
		default:
		}
	}
	return reply, err
}

// leave marks call, whose caller stops waiting, gone, so that no sender
// sends it; ok reports that its reply had arrived already, and is used.
// A call made to lead its batch (see handLocked) as its caller left
// passes the batch to a sender goroutine.
func (b *batcher) leave(call *scriptCall) (reply []int64, err error, ok bool) {
	// A call not made to lead leaves without the batcher's lock: when a
	// stall verdict ends the waits of every caller of the node at once,
	// they do not queue for it, nor for a holder the scheduler preempted.
	select {
	case <-call.done:
		if call.state.Load() == callWaiting { // answered: a sender's last touch
			call.mine = true
			return call.reply, call.err, true
		}
	default:
	}
	if call.state.CompareAndSwap(callWaiting, callGone) {
		// A reply arriving from now on is not used, nor is the error a
		// sender gives a call it finds gone.
		return nil, nil, false
	}
	// Made to lead its batch (the only other state a waiting caller can
	// find): the batch passes to a sender goroutine.
	b.mu.Lock()
	defer b.mu.Unlock()
	batch := call.lead
	call.lead, call.done = nil, nil // done was closed to hand over
	call.state.Store(callGone)
	if call.leadGen == b.inlineGen {
		b.inlineN--
		b.startLocked(batch) // the slot passes to a sender goroutine
	} else {
		// Written off meanwhile, with its slot: the batch is sent
		// uncounted, and fails with the written-off context.
		go b.run(&sender{ctx: call.leadCtx, cancel: func() {}, off: true}, batch)
	}
	return nil, nil, false
}

// mayRunInline reports whether call may be sent from its caller's
// goroutine: the node's connections can be broken off when it stalls,
// and either the caller's context can never end or the call can be
// broken off alone when it does (its request carries its member: see
// claim). With go-redis's plain options a read in flight ignores the
// context. A call whose context can end never sends other callers'
// calls (canLead): breaking it off would fail them too. b.mu is held.
func (b *batcher) mayRunInline(call *scriptCall) bool {
	return b.conns != nil && !b.conns.untracked.Load() && (call.ctx.Done() == nil || call.member != "")
}

// inline sends call, which found a sender's slot free and nothing queued,
// from its caller's goroutine: no hand-off to a sender. Calls arriving
// while the slots are taken queue, and leave together when a slot frees
// (see handLocked). If the node is judged stalled meanwhile, its
// connections are broken off (see batcher.verdict), which ends the read at
// once. b.mu is held and released.
func (b *batcher) inline(call *scriptCall) ([]int64, error) {
	call.mine = true
	b.inflight++
	call.selfBuf[0] = call
	call.lead = call.selfBuf[:]
	b.leadLocked(call)
	b.mu.Unlock()
	if call.ctx.Done() == nil {
		return b.lead(call)
	}
	// The caller's context can end while the reply is read: then the
	// call's connection, and only it, is broken off, and the round trip's
	// context ends too, so that go-redis does not send it again on
	// another connection.
	cl := b.conns.claim(call.member)
	ctx, cancel := context.WithCancel(call.leadCtx)
	call.leadCtx = ctx
	stop := context.AfterFunc(call.ctx, func() {
		cancel()
		cl.cancel()
	})
	reply, err := b.lead(call)
	stop()
	cancel()
	b.conns.unclaim(cl)
	if err != nil && call.ctx.Err() != nil {
		err = context.Cause(call.ctx)
	}
	return reply, err
}

// leadLocked makes call the sender of call.lead, in its caller's
// goroutine, on a slot already counted in inflight. b.mu is held.
func (b *batcher) leadLocked(call *scriptCall) {
	b.inlineN++
	if b.inlineCtx == nil {
		b.inlineCtx, b.inlineCancel = context.WithCancel(b.roundTripContext())
	}
	call.leadCtx, call.leadGen = b.inlineCtx, b.inlineGen
}

// handLocked passes a slot whose sender is done to batch: to the first of
// its callers that may send from its own goroutine (woken to do so), or
// else to a sender goroutine. b.mu is held.
func (b *batcher) handLocked(batch []*scriptCall) {
	for _, c := range batch {
		if c.canLead && c.state.CompareAndSwap(callWaiting, callLed) {
			c.lead = batch
			b.leadLocked(c)
			close(c.done)
			return
		}
	}
	b.startLocked(batch)
}

// lead sends call.lead, call's batch, from call's goroutine, then passes
// the slot on to what queued meanwhile, or frees it; call's own reply
// comes with the batch.
func (b *batcher) lead(call *scriptCall) ([]int64, error) {
	batch := call.lead
	call.lead, call.done = nil, nil // done, if any, was closed to hand over
	b.send(call.leadCtx, batch)

	b.mu.Lock()
	if call.leadGen == b.inlineGen { // not written off
		b.inlineN--
		if next := b.takeLocked(); next != nil {
			b.handLocked(next)
		} else {
			b.inflight--
		}
	}
	refusedErr := b.refusedErr
	b.mu.Unlock()
	if call.err == nil {
		return call.reply, nil
	}
	select {
	case <-call.stalled:
		return nil, b.stallError()
	default:
	}
	if refusedErr != nil {
		return nil, refusedErr
	}
	return call.reply, call.err
}

// run sends batch, then whatever queued meanwhile, until the queue is
// empty. A round trip ends with its reply or the client's own timeouts.
func (b *batcher) run(s *sender, batch []*scriptCall) {
	for batch != nil {
		b.send(s.ctx, batch)
		batch = b.take(s)
	}
	s.cancel()
}

// take returns s's next batch, or nil and one sender fewer in flight.
func (b *batcher) take(s *sender) []*scriptCall {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s.off {
		return nil
	}
	batch := b.takeLocked()
	if batch == nil {
		b.inflight--
		delete(b.senders, s)
	}
	return batch
}

func (b *batcher) takeLocked() []*scriptCall {
	if len(b.queue) == 0 {
		return nil
	}
	if b.maxBatch > 0 && len(b.queue) > b.maxBatch {
		batch := b.queue[:b.maxBatch:b.maxBatch]
		b.queue = b.queue[b.maxBatch:]
		return batch
	}
	batch := b.queue
	b.queue = nil
	return batch
}

// send runs one pipeline of EVALSHA and answers each call; calls whose
// node lost the script (NOSCRIPT: restart, failover, SCRIPT FLUSH) are
// sent again with EVAL in a second pipeline.
func (b *batcher) send(parent context.Context, batch []*scriptCall) {
	live := batch[:0] // in place: the batch is not read again
	for _, c := range batch {
		if c.state.Load() == callGone || c.ctx.Err() != nil {
			c.err = context.Cause(c.ctx)
			if c.err == nil {
				c.err = slidelog.ErrStalled
			}
			c.wake()
			continue
		}
		live = append(live, c)
	}
	if len(live) == 0 {
		return
	}
	// The round trip has no deadline of the callers': one caller giving
	// up must not fail the others, and a caller whose context ends
	// returns that on its own. It ends with its reply, the client's
	// timeouts, or the sender's write-off.
	ctx := parent
	if len(live) == 1 && b.ack == nil {
		c := live[0]
		c.reply, c.err = b.runScript(ctx, c)
		b.answer(c)
		return
	}
	if node := b.nodeClient(ctx, live[0].keys[0]); node != nil {
		b.sendNode(ctx, node, live)
		return
	}
	if b.ack != nil {
		b.sendPlain(ctx, live)
		return
	}
	// Calls whose node is not known yet: the Cluster client's pipeline
	// routes each by its key.
	cmds, _ := b.pipeline(ctx, b.client, live, func(p redis.Pipeliner, c *scriptCall) *redis.Cmd {
		return c.script.EvalSha(ctx, p, c.keys, c.args...)
	}, nil)
	var retry []*scriptCall
	for i, c := range live {
		if err := cmds[i].Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			b.replied()
			retry = append(retry, c)
			continue
		}
		c.reply, c.err = cmds[i].Int64Slice()
		b.answer(c)
	}
	if len(retry) == 0 {
		return
	}
	cmds, _ = b.pipeline(ctx, b.client, retry, func(p redis.Pipeliner, c *scriptCall) *redis.Cmd {
		return c.script.Eval(ctx, p, c.keys, c.args...)
	}, nil)
	for i, c := range retry {
		c.reply, c.err = cmds[i].Int64Slice()
		b.answer(c)
	}
}

// answer records the node's progress when the server answered c, then
// wakes c's caller.
func (b *batcher) answer(c *scriptCall) {
	if serverReplied(c.err) {
		b.answered()
		if b.mapped != nil {
			b.mapped.Store(true)
		}
		b.replied()
	}
	c.wake()
}

// wake wakes c's caller if it waits for the answer (not sent inline).
func (c *scriptCall) wake() {
	if c.done != nil {
		close(c.done)
	}
}

// serverReplied reports whether err is nil or an error reply of the
// Redis server (OOM, BUSY, MOVED...), as opposed to a network failure.
func serverReplied(err error) bool {
	if err == nil {
		return true
	}
	var re redis.Error
	return errors.As(err, &re)
}

// pipeline runs calls in one pipeline of client, each as the command add
// queues, and then the command extra queues, if extra is not nil; it
// returns their commands, each carrying its reply or its error. A panic
// of the client's (see recoverRoundTrip) fails the commands it left
// without a reply.
func (b *batcher) pipeline(ctx context.Context, client pipeliner, calls []*scriptCall, add func(redis.Pipeliner, *scriptCall) *redis.Cmd,
	extra func(redis.Pipeliner) *redis.Cmd) (cmds []*redis.Cmd, last *redis.Cmd) {
	cmds = make([]*redis.Cmd, len(calls))
	defer func() {
		if p := recover(); p != nil {
			err := b.recoverRoundTrip(p)
			for i := range cmds {
				cmds[i] = failUnanswered(ctx, cmds[i], err)
			}
			if extra != nil {
				last = failUnanswered(ctx, last, err)
			}
		}
	}()
	pipe := client.Pipeline()
	for i, c := range calls {
		cmds[i] = add(pipe, c)
	}
	if extra != nil {
		last = extra(pipe)
	}
	_, _ = pipe.Exec(ctx) // each command carries its own error
	return cmds, last
}

// pipeliner is a client that makes pipelines: the store's, or one node's
// of a Cluster.
type pipeliner interface {
	Pipeline() redis.Pipeliner
}

// runScript runs c alone through the client, and returns its reply. A
// panic of the client's is its error (see recoverRoundTrip).
func (b *batcher) runScript(ctx context.Context, c *scriptCall) (reply []int64, err error) {
	defer func() {
		if p := recover(); p != nil {
			reply, err = nil, b.recoverRoundTrip(p)
		}
	}()
	return c.script.Run(ctx, b.client, c.keys, c.args...).Int64Slice()
}

// recoverRoundTrip logs p, a panic of the client's in a round trip (a
// hook of the application's, say), and returns the error of the calls it
// ended. A round trip runs on a sender goroutine of the store's, or in
// the goroutine of one caller, sending the calls of others too: a panic
// never leaves it, wherever it runs, so that the batcher stays whole and
// every call of the round trip is answered; each call's caller then
// panics with p on its own goroutine (panicAgain).
func (b *batcher) recoverRoundTrip(p any) error {
	b.mon.panics.log(panicRoundTrip, p)
	return panicError(panicRoundTrip, p)
}

// failUnanswered returns cmd failed with err if the round trip left it
// without a reply or an error (a new command if there is none yet), or
// else cmd as it is.
func failUnanswered(ctx context.Context, cmd *redis.Cmd, err error) *redis.Cmd {
	if cmd == nil {
		cmd = redis.NewCmd(ctx)
	}
	if cmd.Err() == nil && cmd.Val() == nil {
		cmd.SetErr(err)
	}
	return cmd
}

// maxPipelineCalls bounds the calls in one pipeline. A node's progress is
// seen when a pipeline returns, so a bounded batch keeps the time between
// two replies of a busy but healthy node (the node running the scripts,
// this process reading the replies) well inside the stall timeout, even
// on a saturated machine; more calls than that wait for the next pipeline.
const maxPipelineCalls = 128

// pipelines routes calls to one batcher per Redis node.
type pipelines struct {
	client   redis.UniversalClient
	limit    int
	maxBatch int
	mu       sync.Mutex
	nodes    map[string]*batcher
	single   *batcher
	ack      *acker // WithReplicaAck; nil without
	// mapped is set once a Cluster client is known to hold a slot map
	// (a call was answered, or New read the nodes): until then, finding
	// a key's master could wait for the map's first load.
	mapped atomic.Bool
	// hookKnown is watchDials's walk of a Cluster client's nodes (see
	// hookNodes); nil on a single server.
	hookKnown func(context.Context)
	// conns are the connections dialled to each node, by address; on a
	// single server, one set under the client's address holds every
	// connection, whatever address it was dialled to (a failover client
	// dials whichever server is the master).
	conns map[string]*connSet
	mon   *monitor
	// muting is set while New's check on a Cluster runs: a node silent
	// for the check's node wait is muted (see checkContext).
	muting atomic.Bool
	// master is, on a single server, the address of the server the
	// client reaches: the client's own address, or for a failover client
	// the remote address of its latest connection, which go-redis dials
	// to whichever server the Sentinels name as the master (and it
	// closes the connections to the old master when they name another).
	master   atomic.Pointer[string]
	failover bool
	// closed is set, under mu, when the store closes: a batcher made
	// after that (a call that found its node after Close) is closed too,
	// so nothing sends for a closed store.
	closed bool
}

// singleNode returns the address of the server a single-server client
// reaches, "" on a Cluster or before a failover client's first
// connection.
func (p *pipelines) singleNode() string {
	if a := p.master.Load(); a != nil {
		return *a
	}
	return ""
}

// name names b's node in logs and errors: its address, or on a single
// server the address of the server the client reaches.
func (b *batcher) name() string {
	if a := b.addr(); a != b.node {
		return a // the single server's, as the store found it
	}
	return nodeName(b.node)
}

// addr returns the address of b's node: its own, or on a single server
// the store's (see pipelines.master); "" when neither is known.
func (b *batcher) addr() string {
	if b.node == "" && b.master != nil {
		if a := b.master.Load(); a != nil {
			return *a
		}
	}
	return b.node
}

// connSet returns the connections of the node at addr.
func (p *pipelines) connSet(addr string) *connSet {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.connSetLocked(addr)
}

// untrackedNodes returns the addresses of the nodes whose client had
// connections before the store could track them (see hook), sorted.
func (p *pipelines) untrackedNodes() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var addrs []string
	for addr, cs := range p.conns {
		if cs.untracked.Load() {
			addrs = append(addrs, addr)
		}
	}
	slices.Sort(addrs)
	return addrs
}

func (p *pipelines) connSetLocked(addr string) *connSet {
	if p.single != nil && p.single.conns != nil {
		return p.single.conns
	}
	cs := p.conns[addr]
	if cs == nil {
		if p.conns == nil {
			p.conns = make(map[string]*connSet)
		}
		cs = &connSet{panics: p.mon.panics}
		p.conns[addr] = cs
	}
	return cs
}

// hook adds h to the client of the node at addr. Connections the client
// dialled before cannot be broken off: its node's lone calls keep a
// sender goroutine.
func (p *pipelines) hook(n *redis.Client, h dialWatch) {
	if n.PoolStats().TotalConns > 0 {
		p.connSet(n.Options().Addr).untracked.Store(true)
	}
	n.AddHook(h)
}

// newPipelines returns the batchers of client: pipelinesPerNode senders
// per node that batch up to maxPipelineCalls queued calls each, or, with
// pipelinesPerNode 0, as many senders as the client's pool has
// connections, one call each.
func newPipelines(client redis.UniversalClient, pipelinesPerNode int, ack *acker, stall time.Duration, logger *slog.Logger) *pipelines {
	p := &pipelines{client: client, limit: pipelinesPerNode, maxBatch: maxPipelineCalls, nodes: map[string]*batcher{}, ack: ack}
	p.mon = newMonitor(p, stall, logger)
	if pipelinesPerNode == 0 {
		p.limit, p.maxBatch = poolSize(client), 1
	}
	if _, ok := client.(*redis.ClusterClient); !ok {
		addr := ""
		if c, ok := client.(*redis.Client); ok {
			addr = c.Options().Addr
		}
		if addr == failoverAddr {
			p.failover = true
		} else if addr != "" {
			p.master.Store(&addr)
		}
		p.single = &batcher{client: client, limit: p.limit, maxBatch: p.maxBatch, ack: ack, mon: p.mon, master: &p.master}
		p.single.conns = p.connSet(addr)
	}
	return p
}

// batcher returns the batcher of node (the single one on a single
// server).
func (p *pipelines) batcher(node string) *batcher {
	if p.single != nil {
		return p.single
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	b := p.nodes[node]
	if b == nil {
		b = &batcher{client: p.client, limit: p.limit, maxBatch: p.maxBatch, mapped: &p.mapped, ack: p.ack, mon: p.mon, node: node}
		b.closed.Store(p.closed)
		if node != "" {
			b.conns = p.connSetLocked(node)
		}
		p.nodes[node] = b
	}
	return b
}

// refuse sends the callers waiting on the node at addr to their failure
// mode: a dial to it failed, or it replied that it cannot serve.
func (p *pipelines) refuse(addr string, err error) (b, unrouted *batcher) {
	if p.single != nil {
		p.single.refuse(err)
		return p.single, nil
	}
	p.mu.Lock()
	b, unrouted = p.nodes[addr], p.nodes[""]
	p.mu.Unlock()
	if b != nil {
		b.refuse(err)
	}
	if unrouted != nil {
		// Calls whose node the slot map does not know yet wait on
		// whatever node the client dials for them.
		unrouted.refuse(err)
	}
	return b, unrouted
}

// cannotServeReply is refuse for a reply by which the node at addr said
// it cannot serve (see cannotServe), to a command run in ctx: when ctx is
// a round trip's of a batcher (see sentBy), that batcher's callers go to
// the failure mode too, whatever name it knows the node by. A Cluster
// client may know one server by two addresses (a seed's, and the one the
// slot map gives), and its retry of a command may go to another node than
// the first. (A reply about one slot refuses nothing: see unservedSlot.)
func (p *pipelines) cannotServeReply(ctx context.Context, addr string, err error) {
	b, unrouted := p.refuse(addr, err)
	if sb := sentBy(ctx); sb != nil && sb != b && sb != unrouted {
		sb.refuse(err)
	}
}

// cannotServe reports whether err is a reply by which a server says it
// cannot run any command now: the Cluster is down (CLUSTERDOWN, but for
// an unserved slot: see unservedSlot), the server is loading its data set
// (LOADING), or a replica lost its master (MASTERDOWN). go-redis retries
// those with a back-off of up to half a second, for up to MaxRedirects
// (or MaxRetries) attempts: a decision would wait seconds on a node that
// cannot decide it. TRYAGAIN, MOVED, ASK and READONLY are left to
// go-redis: a healthy Cluster moving a slot or failing a master over
// answers them, and the retry finds the key.
func cannotServe(err error) bool {
	return (redis.HasErrorPrefix(err, "CLUSTERDOWN") && !unservedSlot(err)) ||
		redis.HasErrorPrefix(err, "LOADING") || redis.HasErrorPrefix(err, "MASTERDOWN")
}

// unservedSlot reports whether err is a node's reply to a key whose hash
// slot has no master in the node's view (CLUSTERDOWN Hash slot not
// served): a fault of that slot, not of the node, which serves its own
// slots on. A Cluster failing a master over can leave a slot so for a
// moment, and go-redis sends the keys of a slot its map gives no master
// to any node it knows: refusing that node would send the keys it does
// serve to the failure mode.
func unservedSlot(err error) bool {
	return redis.HasErrorPrefix(err, "CLUSTERDOWN Hash slot not served")
}

// unservedError is the error of a store command answered as unservedSlot
// says: it wraps slidelog.ErrUnservedKey, which a limiter's breaker does
// not count, and carries the reply's text but not the reply, so that
// go-redis does not send the command again (it retries CLUSTERDOWN with
// a back-off of up to half a second, MaxRedirects times): the decision
// goes to the failure mode with this reply.
func unservedError(reply error) error {
	return fmt.Errorf("%w: %s", slidelog.ErrUnservedKey, reply.Error())
}

// dialWatch is the hook a Store adds to its client (and, on a Cluster, to
// each node's client): it tells the store at once when a dial fails
// (connection refused, a name that does not resolve) or the node replies
// that it cannot serve (cannotServe), so that decisions waiting on that
// node go to the failure mode as errors instead of waiting for go-redis's
// retries and being judged stalled, or decided seconds late.
type dialWatch struct {
	p    *pipelines
	addr string // the node's address; "" on a client of one server
	// tls is set when the client's dials end with a TLS handshake (its
	// options have a TLSConfig).
	tls bool
}

func (h dialWatch) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		cs := h.p.connSet(addr)
		if err := cs.mutedErr(); err != nil {
			return silentConn{silentAddr(addr), err}, nil
		}
		d := cs.dialStart(addr, h.tls)
		var conn net.Conn
		var err, merr error
		if h.p.muting.Load() {
			conn, err, merr = dialUnlessMuted(cs, func() (net.Conn, error) { return next(ctx, network, addr) })
		} else {
			conn, err = next(ctx, network, addr)
		}
		cs.dialEnd(d)
		if merr == nil {
			merr = cs.mutedErr()
		}
		if merr != nil {
			// Muted while it dialled: a connection it got would hold the
			// client waiting on the silent node again.
			if err == nil && conn != nil {
				_ = conn.Close()
			}
			return silentConn{silentAddr(addr), merr}, nil
		}
		if err != nil {
			if ctx.Err() == nil {
				h.p.refuse(addr, err)
			}
			return conn, err
		}
		if h.p.failover {
			if ra := conn.RemoteAddr(); ra != nil {
				if a := ra.String(); h.p.singleNode() != a {
					h.p.master.Store(&a)
				}
			}
		}
		return cs.add(conn), nil
	}
}

func (h dialWatch) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		switch {
		case err == nil:
		case unservedSlot(err):
			if sentBy(ctx) != nil { // the store's own: it ends here
				return unservedError(err)
			}
		case cannotServe(err):
			h.p.cannotServeReply(ctx, h.addr, err)
		}
		return err
	}
}

func (h dialWatch) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		refused := false
		for _, c := range cmds {
			e := c.Err()
			switch {
			case e == nil:
			case unservedSlot(e):
				if sentBy(ctx) != nil { // the store's own
					c.SetErr(unservedError(e))
				}
			case !refused && cannotServe(e):
				h.p.cannotServeReply(ctx, h.addr, e)
				refused = true
			}
		}
		return err
	}
}

// dialUnlessMuted runs dial, and returns at once when New's check mutes
// the node cs holds while it waits (see pipelines.checkContext): a dial
// that does not end with its context (go-redis's TLS dial waits for the
// server's hello up to the client's dial timeout, 5 s by default) holds
// the client no longer. It returns the mute's error then, and the dial
// ends on its goroutine, bounded by the client's dial timeout, which
// closes what it got.
func dialUnlessMuted(cs *connSet, dial func() (net.Conn, error)) (conn net.Conn, err, muted error) {
	var mu sync.Mutex
	var left bool
	type dialed struct {
		conn net.Conn
		err  error
	}
	done := make(chan dialed, 1)
	go func() {
		conn, err := dial()
		mu.Lock()
		defer mu.Unlock()
		if left {
			if err == nil {
				_ = conn.Close()
			}
			return
		}
		done <- dialed{conn, err}
	}()
	m := cs.muteDone()
	select {
	case d := <-done:
		return d.conn, d.err, nil
	case <-m.done:
		mu.Lock()
		defer mu.Unlock()
		select {
		case d := <-done:
			return d.conn, d.err, m.err // the caller closes it
		default:
		}
		left = true
		return nil, nil, m.err
	}
}

// watchDials adds a dialWatch to client and, on a Cluster, to the client
// of every node it will have; hookNodes adds one to the nodes it has.
func (p *pipelines) watchDials(client redis.UniversalClient) {
	switch c := client.(type) {
	case *redis.Client:
		p.hook(c, dialWatch{p: p, tls: c.Options().TLSConfig != nil})
	case *redis.ClusterClient:
		var mu sync.Mutex
		hooked := map[*redis.Client]bool{}
		add := func(n *redis.Client) {
			mu.Lock()
			defer mu.Unlock()
			if !hooked[n] {
				hooked[n] = true
				p.hook(n, dialWatch{p: p, addr: n.Options().Addr, tls: n.Options().TLSConfig != nil})
			}
		}
		c.OnNewNode(add)
		p.hookKnown = func(ctx context.Context) {
			if c.ForEachShard(ctx, func(_ context.Context, n *redis.Client) error {
				add(n)
				return nil
			}) == nil {
				p.mapped.Store(true)
			}
		}
	}
}

// hookNodes adds a dialWatch to the nodes a Cluster client had before
// the store, which its OnNewNode hook did not see, reading the slot map
// (within ctx) to find them. New runs it within its check once a master
// answered, not before: on a Cluster that does not answer, reading the
// slot map waits as long as the check would.
func (p *pipelines) hookNodes(ctx context.Context) {
	if p.hookKnown != nil {
		p.hookKnown(ctx)
	}
}

// poolSize is the connections per node of client's pool, go-redis's
// default when the client does not say.
func poolSize(client redis.UniversalClient) int {
	n := 0
	switch c := client.(type) {
	case *redis.Client:
		n = c.Options().PoolSize
	case *redis.ClusterClient:
		n = c.Options().PoolSize
	}
	if n <= 0 {
		n = 10 * runtime.GOMAXPROCS(0)
	}
	return n
}

// run runs sc through the batcher of r's node. Calls
// whose node is not known yet share one batcher; the Cluster client's
// pipeline routes each of them by its key.
func (p *pipelines) run(ctx context.Context, sc *redis.Script, r slidelog.Route, args []any) ([]int64, error) {
	reply, _, err := p.runAcked(ctx, sc, logKeys(r.LogKey), r, args)
	return reply, err
}

// runAcked is run with the script's keys given, and it also returns how
// many replicas acknowledged the call's pipeline (always 0 without
// WithReplicaAck).
func (p *pipelines) runAcked(ctx context.Context, sc *redis.Script, keys []string, r slidelog.Route, args []any) ([]int64, int, error) {
	call := &scriptCall{script: sc, keys: keys, args: args}
	if len(args) > 2 {
		// The arguments of Store.args: the member is the third.
		if m, ok := args[2].(string); ok && len(m) == memberBytes {
			call.member = m
		}
	}
	return p.runCall(ctx, call, r)
}

// newCall returns a call of sc on the one key key, whose arguments the
// caller appends to call.argBuf[:0]: the call, its key and its arguments
// in one allocation, reused once no other goroutine holds it (see
// releaseCall).
func newCall(sc *redis.Script, key string) *scriptCall {
	call := callPool.Get().(*scriptCall)
	call.script = sc
	call.keyBuf[0] = key
	call.keys = call.keyBuf[:]
	return call
}

// callPool holds the calls of newCall that releaseCall gave back.
var callPool = sync.Pool{New: func() any { return new(scriptCall) }}

// releaseCall gives call, from newCall, back for reuse once its caller is
// done with it and its reply, if no other goroutine holds it any more
// (call.mine): it was sent inline, or its caller saw it answered. A call
// whose caller left before that is left to the garbage collector, as a
// sender may still hold it.
func releaseCall(call *scriptCall) {
	if !call.mine {
		return
	}
	*call = scriptCall{} // drops the references to the key, the arguments and the reply
	callPool.Put(call)
	if releasedCalls != nil {
		releasedCalls.Add(1)
	}
}

// releasedCalls counts the calls releaseCall gave back, when a test set
// it; nil otherwise.
var releasedCalls *atomic.Int64

// runCall sends call, whose script, keys and arguments are set, through
// the batcher of r's node.
func (p *pipelines) runCall(ctx context.Context, call *scriptCall, r slidelog.Route) ([]int64, int, error) {
	b := p.batcher(r.Node)
	call.ctx = ctx
	reply, err := b.do(call)
	if err != nil {
		// The batcher is whole again: a panic of the client's in the
		// call's round trip goes on to the caller from here.
		panicAgain(err)
		// The caller may have left while the call is still out: its
		// sender may yet write acked. No reply, no acknowledgement.
		return reply, 0, err
	}
	return reply, call.acked, nil
}
