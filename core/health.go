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
// Time here is the process's alive time: a ticker advances it by at most
// two ticks per tick, less the time the ticker itself then waits in the
// scheduler's queue, so a process that was not scheduled (a CPU-starved
// machine, a long GC pause, a stopped debugger) or whose goroutines queue
// for a CPU does not count the time it could not read replies against its
// nodes. Each tick still advances it by at least a quarter tick, so that
// on a machine saturated for good a stalled node is found within about
// four stall timeouts of wall time rather than never. The ticker runs only while some decision waits, and stops on
// close.
type health struct {
	stall time.Duration
	tick  time.Duration
	alive atomic.Int64 // nanoseconds of alive time

	mu      sync.Mutex
	nodes   map[string]*nodeHealth
	waiting int  // decisions waiting on all nodes
	running bool // the ticker goroutine is running
	closed  bool
	stop    chan struct{}
	stopped sync.WaitGroup
}

// nodeHealth is the progress of one node. Entries are never removed: a
// limiter sees as many nodes as the Cluster has masters.
type nodeHealth struct {
	lastReply atomic.Int64 // alive time of the last reply
	waiting   int          // under health.mu
	busySince int64        // alive time when waiting went from 0 to 1
	// epoch is cancelled, with ErrStalled, when the node is found
	// stalled; a new one follows.
	epoch  context.Context
	cancel context.CancelCauseFunc
}

func (n *nodeHealth) newEpoch() {
	n.epoch, n.cancel = context.WithCancelCause(context.Background())
}

func newHealth(stall time.Duration) *health {
	return &health{
		stall: stall,
		tick:  max(time.Millisecond, stall/10),
		nodes: make(map[string]*nodeHealth),
		stop:  make(chan struct{}),
	}
}

// wait is one decision waiting on a node.
type wait struct {
	h *health
	n *nodeHealth
	// epoch is cancelled when the node is found stalled while the
	// decision waits.
	epoch context.Context
}

// begin registers a decision waiting on node.
func (h *health) begin(node string) wait {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.nodes[node]
	if n == nil {
		n = &nodeHealth{}
		n.newEpoch()
		h.nodes[node] = n
	}
	if n.waiting == 0 {
		n.busySince = h.alive.Load()
	}
	n.waiting++
	h.waiting++
	if !h.running && !h.closed {
		h.running = true
		h.stopped.Add(1)
		go h.run()
	}
	return wait{h: h, n: n, epoch: n.epoch}
}

// replied records that the node answered: any reply, a decision or an
// error of the server's own, is progress.
func (w wait) replied() { w.n.lastReply.Store(w.h.alive.Load()) }

// end unregisters the decision.
func (w wait) end() {
	w.h.mu.Lock()
	w.n.waiting--
	w.h.waiting--
	w.h.mu.Unlock()
}

// run advances the alive clock and looks for stalled nodes, until no
// decision waits or the health is closed.
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
			h.alive.Add(int64(max(h.tick/4, min(now.Sub(last), 2*h.tick)-queued)))
			last = now
			if !h.check() {
				return
			}
		}
	}
}

// check ends the epoch of every stalled node and reports
// whether the ticker should go on.
func (h *health) check() bool {
	now := h.alive.Load()
	h.mu.Lock()
	if h.waiting == 0 {
		h.running = false
		h.mu.Unlock()
		return false
	}
	for _, n := range h.nodes {
		if n.waiting == 0 {
			continue
		}
		if now-max(n.lastReply.Load(), n.busySince) >= int64(h.stall) {
			n.cancel(ErrStalled)
			n.newEpoch()
		}
	}
	h.mu.Unlock()
	return true
}

// close stops the ticker. Decisions waiting at that moment wait for their
// reply or their context only.
func (h *health) close() {
	h.mu.Lock()
	if !h.closed {
		h.closed = true
		close(h.stop)
	}
	h.mu.Unlock()
	h.stopped.Wait()
}

// bound returns ctx, also cancelled with ErrStalled when w's node is
// found stalled, and carrying w as a Watch for the store; stop releases
// it.
func (w wait) bound(ctx context.Context) (bounded context.Context, stop func()) {
	bounded, cancel := context.WithCancelCause(ctx)
	unhook := context.AfterFunc(w.epoch, func() { cancel(ErrStalled) })
	return context.WithValue(bounded, watchKey{}, &Watch{w: w}), func() {
		unhook()
		cancel(nil)
	}
}

// Watch follows one store call on behalf of a limiter: the store reports
// the replies of the call's node to it, and learns from it that the node
// was judged stalled (see NodeStore). A store calls WatchFrom once per
// call and may keep the Watch until the call ends.
type Watch struct{ w wait }

type watchKey struct{}

// WatchFrom returns the Watch a limiter attached to the context of a
// store call, or nil for a call not made by a limiter.
func WatchFrom(ctx context.Context) *Watch {
	w, _ := ctx.Value(watchKey{}).(*Watch)
	return w
}

// Replied tells the limiter that the call's node sent a reply: a
// decision, or an error reply of the server's own (as opposed to a
// network failure). Replies to other calls on the same connection count
// too: any reply is progress.
func (w *Watch) Replied() {
	if w != nil && w.w.h != nil {
		w.w.replied()
	}
}

// Stalled returns a channel closed when the limiter judges the call's node
// stalled: the store should give up the call at once, with an error
// wrapping ErrStalled. A nil Watch never stalls.
func (w *Watch) Stalled() <-chan struct{} {
	if w == nil || w.w.h == nil {
		return nil
	}
	return w.w.epoch.Done()
}
