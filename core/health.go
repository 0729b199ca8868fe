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
// decision queued behind a pipeline is not a failure. A node is stalled
// when decisions wait on it and it has sent no reply for the stall
// timeout, counted from the later of its last reply and the moment it
// became busy. Then every decision waiting on it is handed to the failure
// mode.
//
// Nothing runs per decision: a decision counts itself in and out of its
// node under the node's lock, and each node has one timer, armed when the
// node becomes busy for the moment its silence would reach the stall
// timeout. A lone decision that is answered in time never sees the timer
// fire. When it fires, it first yields (a goroutine with a reply to read
// gets its turn), and when it finds that it ran late, or queued for a CPU,
// by more than a quarter of the stall timeout, the process rather than the
// node was slow: it looks again a quarter stall timeout later instead of
// judging, for at most three stall timeouts. So a stopped node is found
// within the stall timeout on a machine with CPU to spare and within four
// stall timeouts (plus the timer's own delay) on a saturated one, and a
// node that answers is never judged stalled because this process could
// not read its replies. The time is the monotonic clock; no tick is
// counted, so a timer that fires late loses nothing.
type health struct {
	stall time.Duration
	start time.Time

	mu     sync.Mutex
	nodes  map[string]*nodeHealth
	closed bool
}

// nodeHealth is the progress of one node. Entries are never removed: a
// limiter sees as many nodes as the Cluster has masters.
type nodeHealth struct {
	h         *health
	lastReply atomic.Int64 // health time (ns) of the last reply

	mu        sync.Mutex
	waiting   int
	busySince int64  // health time when waiting went from 0 to 1
	watch     *Watch // the current epoch, ended when the node is found stalled
	timer     *time.Timer
	armed     bool  // the timer is set
	due       int64 // health time the timer is set for
	grace     int64 // health time the check first deferred its judgement; 0: none
	closed    bool
}

func newHealth(stall time.Duration) *health {
	return &health{stall: stall, start: time.Now(), nodes: make(map[string]*nodeHealth)}
}

// now is the health's monotonic time in nanoseconds.
func (h *health) now() int64 { return int64(time.Since(h.start)) }

// node returns the health of node, creating it on first use.
func (h *health) node(node string) *nodeHealth {
	h.mu.Lock()
	n := h.nodes[node]
	if n == nil {
		n = &nodeHealth{h: h, closed: h.closed}
		n.watch = newWatch(n)
		n.timer = time.AfterFunc(time.Hour, n.check)
		n.timer.Stop()
		h.nodes[node] = n
	}
	h.mu.Unlock()
	return n
}

// begin registers a decision waiting on node and returns the Watch of
// its call.
func (h *health) begin(node string) *Watch {
	n := h.node(node)
	n.mu.Lock()
	if n.waiting == 0 {
		n.busySince = h.now()
	}
	n.waiting++
	if !n.armed && !n.closed {
		n.arm(max(n.lastReply.Load(), n.busySince) + int64(h.stall))
	}
	w := n.watch
	n.mu.Unlock()
	return w
}

// arm sets the timer for health time at; n.mu is held.
func (n *nodeHealth) arm(at int64) {
	n.armed, n.due = true, at
	n.timer.Reset(time.Duration(max(at-n.h.now(), 0)))
}

// end unregisters a decision that waited on the node.
func (n *nodeHealth) end() {
	n.mu.Lock()
	n.waiting--
	n.mu.Unlock()
}

// check runs when the node's silence may have reached the stall timeout.
func (n *nodeHealth) check() {
	h := n.h
	fired := h.now()
	// Yield once: goroutines that were runnable before this one (a
	// sender with a reply to read, say) have had their turn when it runs
	// again.
	runtime.Gosched()
	now := h.now()
	n.mu.Lock()
	defer n.mu.Unlock()
	n.armed = false
	if n.closed || n.waiting == 0 {
		n.grace = 0
		return
	}
	stall := int64(h.stall)
	since := max(n.lastReply.Load(), n.busySince)
	if now-since < stall {
		n.grace = 0
		n.arm(since + stall)
		return
	}
	if slow := (fired - n.due) + (now - fired); slow > stall/4 {
		// This process was slow to look: a reply may be waiting to be
		// read. Look again soon, within a bound.
		if n.grace == 0 {
			n.grace = now
		}
		if now-n.grace < 3*stall {
			n.arm(now + stall/4)
			return
		}
	}
	n.grace = 0
	n.watch.cancel(ErrStalled)
	n.watch = newWatch(n)
	// Decisions that arrive now wait on the new epoch, measured from the
	// same last reply: they are judged at the next check.
	n.arm(now + stall/4)
}

// close stops the timers. Decisions waiting at that moment wait for their
// reply or their context only.
func (h *health) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for _, n := range h.nodes {
		n.mu.Lock()
		n.closed = true
		n.timer.Stop()
		n.mu.Unlock()
	}
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

// end unregisters the call from its node.
func (w *Watch) end() { w.n.end() }
