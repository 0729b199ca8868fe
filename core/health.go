package slidelog

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultStallTimeout is how long a store node may go without answering
// anything, while decisions wait on it, before those decisions go to the
// failure mode (see WithStallTimeout).
const DefaultStallTimeout = 150 * time.Millisecond

// health tells a store node that is failing from one that is merely busy.
//
// A decision waits for its node as long as the node makes progress: a
// decision queued behind a pipeline, or whose goroutine was not scheduled
// for a while, is not a failure. A node is stalled when decisions wait on
// it and it has sent no reply for the stall timeout, counted from the
// later of its last reply and the moment it became busy. Then every
// decision waiting on it is handed to the failure mode.
//
// Nothing runs per decision: a decision counts itself in and out of its
// node under the node's lock, and a reply stores the time. One timer per
// limiter is armed when a node becomes busy, for half the stall timeout;
// a decision answered before it fires (a lone decision on a healthy
// node) costs nothing more. When it fires with decisions still waiting,
// a monitor goroutine starts and runs until no decision waits: it counts
// each node's silence in alive time, which a tick advances by at most
// two ticks, less the time the monitor itself then queued for a CPU, and
// at least a quarter tick. So a process that was not scheduled (a
// CPU-starved machine, a long GC pause) does not count the time it could
// not read replies against its nodes. On top of that, a node silent for
// four stall timeouts of wall time is stalled whatever the ticks said (a
// starved ticker drops ticks): the slowest decision on a stopped node is
// bounded by four stall timeouts plus the monitor's scheduling delay.
type health struct {
	stall time.Duration
	tick  time.Duration
	start time.Time

	mu      sync.Mutex
	nodes   map[string]*nodeHealth
	waiting int  // decisions waiting on all nodes
	armed   bool // the timer is set
	running bool // the monitor goroutine runs
	closed  bool
	timer   *time.Timer
	stop    chan struct{}
	stopped sync.WaitGroup
}

// nodeHealth is the progress of one node. Entries are never removed: a
// limiter sees as many nodes as the Cluster has masters.
type nodeHealth struct {
	h         *health
	lastReply atomic.Int64 // health time (ns) of the last reply

	// Under health.mu:
	waiting   int
	busySince int64  // health time when waiting went from 0 to 1
	watch     *Watch // the current epoch, ended when the node is found stalled
	silence   int64  // alive ns without a reply, counted by the monitor
	seenReply int64  // lastReply when the monitor last looked
}

func newHealth(stall time.Duration) *health {
	h := &health{
		stall: stall,
		tick:  max(time.Millisecond, stall/10),
		start: time.Now(),
		nodes: make(map[string]*nodeHealth),
		stop:  make(chan struct{}),
	}
	h.timer = time.AfterFunc(time.Hour, h.fire)
	h.timer.Stop()
	return h
}

// now is the health's monotonic time in nanoseconds.
func (h *health) now() int64 { return int64(time.Since(h.start)) }

// begin registers a decision waiting on node and returns the Watch of
// its call.
func (h *health) begin(node string) *Watch {
	h.mu.Lock()
	n := h.nodes[node]
	if n == nil {
		n = &nodeHealth{h: h}
		n.watch = newWatch(n)
		h.nodes[node] = n
	}
	if n.waiting == 0 {
		n.busySince = h.now()
		n.silence = 0
	}
	n.waiting++
	h.waiting++
	if !h.armed && !h.running && !h.closed {
		h.armed = true
		h.timer.Reset(h.stall / 2)
	}
	w := n.watch
	h.mu.Unlock()
	return w
}

// end unregisters a decision that waited on the node.
func (n *nodeHealth) end() {
	n.h.mu.Lock()
	n.waiting--
	n.h.waiting--
	n.h.mu.Unlock()
}

// fire starts the monitor when decisions still wait half a stall timeout
// after a node became busy.
func (h *health) fire() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.armed = false
	if h.closed || h.running || h.waiting == 0 {
		return
	}
	now := h.now()
	for _, n := range h.nodes {
		// The wall time a node has been silent so far counts, up to
		// the half stall timeout the timer waited.
		n.silence = min(now-max(n.lastReply.Load(), n.busySince), int64(h.stall/2))
		n.seenReply = n.lastReply.Load()
	}
	h.running = true
	h.stopped.Add(1)
	go h.run()
}

// run advances the nodes' alive silence and looks for stalled nodes,
// until no decision waits or the health is closed.
func (h *health) run() {
	defer h.stopped.Done()
	t := time.NewTicker(h.tick)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
			// Yield once: when this goroutine runs again, the goroutines
			// that were runnable before it (a sender with a reply to
			// read, say) have had their turn. Time spent queueing for a
			// CPU is the process's, not the node's: it does not count.
			yield := time.Now()
			runtime.Gosched()
			now := time.Now()
			queued := now.Sub(yield)
			alive := int64(max(h.tick/4, min(now.Sub(last), 2*h.tick)-queued))
			last = now
			if !h.check(alive) {
				return
			}
		}
	}
}

// check adds alive to the silence of every waiting node, ends the epoch
// of every stalled node, and reports whether the monitor should go on.
func (h *health) check(alive int64) bool {
	now := h.now()
	stall := int64(h.stall)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.waiting == 0 || h.closed {
		h.running = false
		return false
	}
	for _, n := range h.nodes {
		if n.waiting == 0 {
			continue
		}
		if r := n.lastReply.Load(); r != n.seenReply {
			n.seenReply, n.silence = r, 0
		} else {
			n.silence += alive
		}
		wall := now - max(n.lastReply.Load(), n.busySince)
		if n.silence >= stall || wall >= 4*stall {
			n.watch.cancel(ErrStalled)
			n.watch = newWatch(n)
			n.silence = 0
		}
	}
	return true
}

// close stops the timer and the monitor. Decisions waiting at that moment
// wait for their reply or their context only.
func (h *health) close() {
	h.mu.Lock()
	if !h.closed {
		h.closed = true
		h.timer.Stop()
		close(h.stop)
	}
	h.mu.Unlock()
	h.stopped.Wait()
}

// Watch follows the store calls of a limiter on one node (Request.Watch):
// a store reports the node's replies to it, which keeps the node from
// being judged stalled while it answers, however long a call queues, and
// learns from it when the node was judged stalled and the call should give
// up. A Watch is shared by the calls on a node until the node stalls; a
// store may keep it for as long as a call lasts.
type Watch struct {
	n      *nodeHealth
	epoch  context.Context
	cancel context.CancelCauseFunc
}

func newWatch(n *nodeHealth) *Watch {
	w := &Watch{n: n}
	w.epoch, w.cancel = context.WithCancelCause(context.Background())
	return w
}

// Replied tells the limiter that the call's node sent a reply: a
// decision, or an error reply of the server's own (as opposed to a
// network failure). Replies to other calls on the same connection count
// too: any reply is progress. A nil Watch ignores it.
func (w *Watch) Replied() {
	if w != nil {
		w.n.lastReply.Store(w.n.h.now())
	}
}

// Stalled returns a channel closed when the limiter judges the call's node
// stalled: the store should give up the call at once, with an error
// wrapping ErrStalled. A nil Watch never stalls.
func (w *Watch) Stalled() <-chan struct{} {
	if w == nil {
		return nil
	}
	return w.epoch.Done()
}

// AfterStall arranges for f to run, in a goroutine of its own, when the
// limiter judges the watched node stalled; stop cancels that, as with
// context.AfterFunc. A store whose calls cannot leave a stalled node on
// their own (a call that reads in its caller's goroutine) uses it to break
// them off. Calls on one node share a Watch until the node stalls, so a
// store needs to arrange it once per Watch, not once per call. A nil Watch
// never stalls: f never runs.
func (w *Watch) AfterStall(f func()) (stop func() bool) {
	if w == nil {
		return func() bool { return false }
	}
	return context.AfterFunc(w.epoch, f)
}

// end unregisters the call from its node.
func (w *Watch) end() { w.n.end() }
