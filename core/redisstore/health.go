package redisstore

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/internal/monotime"
)

// DefaultStallTimeout is how long a Redis node may send nothing while
// calls wait on it before those calls end with slidelog.ErrStalled (see
// WithStallTimeout).
const DefaultStallTimeout = 150 * time.Millisecond

// WithStallTimeout sets how long a Redis node may send nothing, while
// calls of this store wait on it, before they end with an error wrapping
// slidelog.ErrStalled, which a limiter hands to its failure mode (default
// DefaultStallTimeout, 150 ms). A node that answers is waited for however
// long calls queue behind each other or this process waits for a CPU:
// only the node's own silence counts (see the package documentation,
// "Node health"). It must be at least a millisecond.
//
// A call ends soon after its caller's context does, whatever the stall
// timeout, with one wait bounded otherwise: that of a call sent from its
// caller's goroutine (a store on a client of its own) for a new
// connection's handshake with a silent node, as when an earlier call's
// context ended and broke its connection off. go-redis reads the answer
// to the connection's hello ignoring the context (with its plain
// options), and which call a handshake is for cannot be told: such a call
// breaks off the node's connections whose hello has gone unanswered for a
// quarter of a second (by the kernel's record of what the node sent, over
// TCP or TLS, or of what waits unread on a Unix socket), and returns
// then, or at the stall timeout when that is sooner. Another call waiting
// on one of those handshakes then fails too, with the node.
func WithStallTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d < time.Millisecond {
			return fmt.Errorf("%w: stall timeout %v, want at least 1ms", slidelog.ErrInvalidOption, d)
		}
		c.stall = d
		return nil
	})
}

// monitor judges the health of a store's nodes: once per store, shared by
// every limiter on it, beside the connections it acts on.
//
// Nothing runs per call but counting it in and out of its node: one timer
// per store is armed when the first call begins to wait, for half the
// stall timeout, so a call answered before it fires (a lone decision on
// a healthy node) costs nothing more. When it fires with calls still
// waiting, a goroutine ticks every tenth of the stall timeout until no
// call waits, and judges each node that has had calls waiting for a
// stall timeout:
//
//   - On a node whose connections are TCP, by the kernel's record of
//     them (TCP_INFO) beside the order of this process's own writes and
//     reads on each: a connection owes a reply when this process wrote a
//     request after the last bytes it read, or waits in a read for the
//     rest of a reply, and the kernel holds no byte on it that this
//     process has not read. The node is stalled when a reply is owed and
//     nothing has arrived from the node on any connection since the
//     oldest owed request went out, for the stall timeout. A reply
//     waiting unread in a socket while this process queues for a CPU is
//     an answer, and a request this process has not yet written is not
//     owed by the node. Each tick adds to the node's silence only the
//     part of its interval in which the monitor's thread could run (its
//     run delay, /proc/thread-self/schedstat) and, once a node has been
//     silent for more than a tick, every thread of the process, so time
//     in which the machine did not run this process does not count
//     either.
//   - On a Unix socket, the same way by the bytes the kernel holds unread
//     on it (SIOCINQ), which it counts whether or not this process runs.
//     It keeps no count of the bytes it delivered, so a read makes its
//     system call itself and counts what the call took before it marks
//     the call over: a read that took the node's answer and then waits
//     for a CPU is an answer too. Nor does it keep their time of arrival:
//     the node's last byte counts from this process's read of it, which
//     can only shorten the silence.
//   - A dial in progress, by the kernel's socket table (asked over
//     netlink's sock_diag, at most every 25 ms): while this process's
//     socket to the node is in SYN_SENT the node owes an answer, from
//     the dial's start; a dial the kernel has completed owes nothing,
//     however long this process takes to run the goroutine waiting on
//     it. A dial to a host name with no socket in SYN_SENT may still be
//     resolving the name, and a TLS dial (the client's options have a
//     TLSConfig) the kernel connected may still wait for the node's
//     answer to its hello: alive time decides those, as below.
//   - Where the kernel keeps no such record (TLS, a client whose
//     connections predate the store, go-redis's retries
//     after a connection failed), by
//     silence counted in alive time: each tick adds at most two ticks of
//     the time its thread could run, less the time the monitor then
//     queued for a CPU after yielding once, so time in which the process
//     could not run does not count against the node. Before a verdict,
//     the kernel is asked when the node's bytes last arrived on any TCP
//     connection of this process's to it (sock_diag, with tcp_info; a
//     node named by its IP address): the silence is the shorter of the
//     two (see aliveSilence).
//
// A stalled node's waiting calls end with ErrStalled, its connections are
// broken off (their reads fail at once, however go-redis's timeouts are
// set), and the node's episode ends: each call after that waits a full
// stall timeout again before the node can be judged stalled.
type monitor struct {
	p      *pipelines
	stall  time.Duration
	tick   time.Duration
	logger *slog.Logger
	panics *panicLog // the panics the store recovers
	// onReply, when set (before the first call, and never again), is
	// told of every reply of a node's, with the time replied read: the
	// store starts a reading of its canaries from it when one is due.
	onReply func(now int64)

	total atomic.Int64 // calls waiting on all nodes
	// aliveNeeded is set while some node is judged in alive time (see
	// stalled): the ticks then measure how long the monitor queued.
	aliveNeeded atomic.Bool
	// Owned by the monitor's goroutine: suspect is set while some node
	// has been silent for more than a tick, and delays are the threads'
	// waits for a CPU read at the last tick then (see check).
	suspect bool
	delays  map[string]time.Duration

	mu      sync.Mutex
	armed   bool
	running bool
	closed  bool
	timer   *time.Timer
	stop    chan struct{}
	stopped sync.WaitGroup
}

func newMonitor(p *pipelines, stall time.Duration, logger *slog.Logger) *monitor {
	m := &monitor{p: p, stall: stall, tick: max(time.Millisecond, stall/10), logger: logger, panics: &panicLog{logger: logger},
		stop: make(chan struct{})}
	m.timer = time.AfterFunc(time.Hour, m.fire)
	m.timer.Stop()
	return m
}

// begin counts a call in; the first of a quiet store arms the timer.
func (m *monitor) begin() {
	if m.total.Add(1) == 1 {
		m.mu.Lock()
		if !m.armed && !m.running && !m.closed {
			m.armed = true
			m.timer.Reset(m.stall / 2)
		}
		m.mu.Unlock()
	}
}

// end counts a call out.
func (m *monitor) end() { m.total.Add(-1) }

// fire starts the ticking goroutine when calls still wait.
func (m *monitor) fire() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.armed = false
	if m.closed || m.running || m.total.Load() == 0 {
		return
	}
	for _, b := range m.p.batchers() {
		b.seen, b.silence = b.progress(), 0
	}
	m.running = true
	m.stopped.Add(1)
	go m.run()
}

// run ticks until no call waits or the store is closed.
func (m *monitor) run() {
	defer m.stopped.Done()
	// The monitor reads how long its own thread waited for a CPU (see
	// runDelay): that time, in which this process could not run, never
	// counts as a node's silence.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t := time.NewTicker(m.tick)
	defer t.Stop()
	last, delay := time.Now(), runDelay()
	first := true
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
		now := time.Now()
		d := runDelay()
		elapsed := now.Sub(last)
		// ran is the part of the interval this process could run.
		ran := max(0, elapsed-(d-delay))
		if first {
			// Before the monitor started, the node had been busy for
			// the timer's half stall timeout: that much of its silence
			// counts at most.
			ran, elapsed, first = ran+m.stall/2, elapsed+m.stall/2, false
		}
		alive := min(ran, 2*m.tick)
		if m.aliveNeeded.Load() {
			// Some node is judged in alive time alone. Yield once: when
			// this goroutine runs again, the goroutines that were
			// runnable before it (one with a reply to read, say) have
			// had their turn. Time spent queueing for a CPU is the
			// process's, not the node's: it does not count.
			runtime.Gosched()
			queued := time.Since(now)
			alive = max(m.tick/4, alive-queued)
			now = now.Add(queued)
		}
		last, delay = now, runDelay()
		if !m.check(alive, elapsed, ran) {
			return
		}
	}
}

// check judges every node with calls waiting, and reports whether the
// goroutine should go on. alive is the tick's alive time, elapsed its wall
// time and ran the part of elapsed this process could run.
func (m *monitor) check(alive, elapsed, ran time.Duration) bool {
	now := monotime.Now()
	needed := false
	defer func() { m.aliveNeeded.Store(needed) }()
	// While some node has been silent for more than a tick, the waits of
	// every thread of the process count too: a thread the machine did not
	// run while it held a socket cannot take in the node's bytes. The
	// longest wait of any thread in this tick is time the process could
	// not run.
	if m.suspect {
		delays := threadDelays()
		if m.delays != nil {
			var most time.Duration
			for tid, d := range delays {
				if prev, ok := m.delays[tid]; ok {
					most = max(most, d-prev)
				}
			}
			ran = max(0, min(ran, elapsed-most))
		}
		m.delays = delays
	} else {
		m.delays = nil
	}
	m.suspect = false
	for _, b := range m.p.batchers() {
		b.mu.Lock()
		waiting, busy := b.waiting.Load(), b.busySince
		b.mu.Unlock()
		p := b.progress()
		if waiting == 0 || p != b.seen {
			b.seen, b.silence = p, 0
		} else {
			b.silence += alive
		}
		if waiting == 0 {
			b.quiet, b.quietSince = 0, 0
			continue
		}
		silence, ok := m.stalled(b, now, elapsed, ran, &needed)
		if !ok || time.Duration(now-busy) < m.stall {
			continue
		}
		b.verdict(silence, b.evidenceAttrs(now))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || m.total.Load() == 0 {
		m.running = false
		return false
	}
	return true
}

// stalled reports whether b's node is stalled, and for how long it has
// been silent, by the evidence its connections give (see monitor). A
// node whose kernel record shows it silent while a request is owed
// accumulates that silence over the ticks, each counting only the part of
// its interval in which this process could run.
func (m *monitor) stalled(b *batcher, now int64, elapsed, ran time.Duration, needed *bool) (time.Duration, bool) {
	b.byAlive = false
	if b.conns == nil || b.conns.untracked.Load() {
		*needed, b.byAlive = true, true
		return b.aliveSilence(m.stall)
	}
	ev := b.conns.silence()
	if ev.answered {
		// Bytes wait unread: the node answers, however slowly this
		// process reads.
		b.silence = 0
	}
	if !ev.owed {
		b.quiet, b.quietSince = 0, 0
		if ev.unknown {
			*needed, b.byAlive = true, true
			return b.aliveSilence(m.stall)
		}
		// No request is owed on any connection: the calls wait for this
		// process to send them, which is not the node's silence.
		return 0, false
	}
	since := now - int64(ev.silence)
	if b.quietSince == 0 || since > b.quietSince+int64(kernelGrain) {
		// A byte arrived, or the owed request is newer: a new silence.
		// (The kernel's times move in steps of its tick, up to 4 ms.)
		b.quietSince, b.quiet = since, 0
	}
	// The silent part of this tick's interval, less the time the process
	// could not run.
	silent := min(elapsed, time.Duration(now-b.quietSince))
	b.quiet += max(0, silent-(elapsed-ran))
	if time.Duration(now-b.quietSince) > m.tick {
		m.suspect = true
	}
	return b.quiet, b.quiet >= m.stall
}

// aliveSilence reports b's silence counted in alive time, and whether it
// reaches stall. Before it says so, it asks the kernel what it recorded
// of the node on this process's TCP connections to it (heardFrom): a
// node whose bytes arrived more recently than the silence answered,
// however long this process then took to read them or to act on them,
// and the silence is then the shorter of the two. Alive time can only
// discount the time this process queued for a CPU that the monitor's own
// thread records; the kernel dates the node's bytes whatever the
// scheduler did to the reader. Bytes left unread count from their
// arrival, no longer: a reader stuck while the monitor runs (a
// connection wrapper that no longer reads) is judged as before.
func (b *batcher) aliveSilence(stall time.Duration) (time.Duration, bool) {
	if b.silence < stall {
		return b.silence, false
	}
	switch ago, heard, ok := heardFrom(b.addr()); {
	case !ok:
		b.kernelSaid = "unknown"
	case !heard:
		b.kernelSaid = "nothing"
	default:
		b.kernelSaid = ago.String()
		b.silence = min(b.silence, ago)
	}
	return b.silence, b.silence >= stall
}

// close stops the monitor and ends every call still waiting with
// slidelog.ErrClosed.
func (m *monitor) close() {
	m.mu.Lock()
	if !m.closed {
		m.closed = true
		m.timer.Stop()
		close(m.stop)
	}
	m.mu.Unlock()
	m.stopped.Wait()
	m.p.mu.Lock()
	m.p.closed = true
	m.p.mu.Unlock()
	for _, b := range m.p.batchers() {
		b.close()
	}
}

// beginLocked counts call in as waiting on b's node, in b's current
// episode. b.mu is held.
func (b *batcher) beginLocked(call *scriptCall) {
	if b.epoch == nil {
		b.epoch = make(chan struct{})
	}
	call.stalled = b.epoch
	if b.waiting.Add(1) == 1 {
		b.busySince = monotime.Now()
	}
	b.mon.begin()
}

// end counts a call out, without b's lock: the callers a verdict ends
// leave at once.
func (b *batcher) end() {
	b.waiting.Add(-1)
	b.mon.end()
}

// replied records that the node answered: a reply, or an error reply of
// the server's own.
func (b *batcher) replied() {
	now := monotime.Now()
	b.lastReply.Store(now)
	if f := b.mon.onReply; f != nil {
		f(now)
	}
}

// progress is the latest sign of life of b's node that this process has
// seen: a reply, or a byte read on a connection the kernel keeps no
// record of.
func (b *batcher) progress() int64 {
	p := b.lastReply.Load()
	if b.conns != nil {
		p = max(p, b.conns.read.Load())
	}
	return p
}

// verdict ends the episode of b's stalled node: its waiting calls end
// with ErrStalled, its senders are written off and its connections broken
// off.
func (b *batcher) verdict(silence time.Duration, evidence []any) {
	b.mu.Lock()
	if b.waiting.Load() == 0 || b.closed.Load() {
		b.mu.Unlock()
		return
	}
	waiting := b.waiting.Load()
	close(b.epoch)
	b.epoch = make(chan struct{})
	b.busySince = monotime.Now()
	b.silence = 0
	// The episode's senders and connections are written off before a
	// call of the next episode can start one: done after unlocking, it
	// would also cut off a call that began in between, which would fail
	// at once with its sender's cancellation, not judged on its own.
	b.writeOffLocked()
	if b.conns != nil {
		b.conns.breakAll()
	}
	b.mu.Unlock()
	// On the monitor's goroutine, where no caller would receive a panic
	// of the application's logger: it is recovered, and the monitor
	// goes on.
	defer func() {
		if p := recover(); p != nil {
			b.mon.panics.log(panicMonitor, p)
		}
	}()
	b.mon.logger.Warn("redisstore: node stalled: its waiting calls go to the failure mode",
		append([]any{"node", b.name(), "silent", silence.Round(time.Millisecond), "stall_timeout", b.mon.stall, "waiting", waiting}, evidence...)...)
}

// evidenceAttrs describes, for the log, what b's connections showed when
// the node was judged: the oldest request owed, the last byte received,
// and how many connections owed a reply.
func (b *batcher) evidenceAttrs(now int64) []any {
	if b.conns == nil || b.conns.untracked.Load() {
		return []any{"evidence", "alive time", "kernel_last_byte", b.kernelSaid}
	}
	owed, conns := 0, 0
	var oldest int64
	for _, c := range b.conns.list() {
		conns++
		if c.wseq.Load() > c.rseq.Load() {
			owed++
			if w := c.wrote.Load(); oldest == 0 || w < oldest {
				oldest = w
			}
		}
	}
	evidence := "kernel"
	if b.byAlive {
		evidence = "alive time" // the kernel could not tell (see monitor.stalled)
	}
	attrs := []any{"evidence", evidence, "connections", conns, "owing", owed}
	if b.byAlive {
		attrs = append(attrs, "kernel_last_byte", b.kernelSaid)
	}
	if oldest > 0 {
		attrs = append(attrs, "oldest_request", time.Duration(now-oldest).Round(time.Millisecond))
	}
	if r := b.conns.lastRecv.Load(); r > 0 {
		attrs = append(attrs, "last_byte", time.Duration(now-r).Round(time.Millisecond))
	}
	if n := b.conns.dialing.Load(); n > 0 {
		attrs = append(attrs, "dialing", n)
	}
	return attrs
}

// close ends the calls waiting on b with slidelog.ErrClosed; later calls
// fail with it at once.
func (b *batcher) close() {
	b.mu.Lock()
	if b.closed.Load() {
		b.mu.Unlock()
		return
	}
	b.closed.Store(true)
	waiting := b.waiting.Load()
	if b.epoch != nil {
		close(b.epoch)
	}
	// Every sender is written off, also one whose callers have all gone
	// and that still waits out go-redis's retries: nothing wants its reply.
	b.writeOffLocked()
	b.mu.Unlock()
	if waiting > 0 && b.conns != nil {
		b.conns.breakAll()
	}
}

// stallError is the error of a call whose node was judged stalled, or
// whose store was closed, while it waited.
func (b *batcher) stallError() error {
	if b.closed.Load() {
		return slidelog.ErrClosed
	}
	return fmt.Errorf("%w: %s sent nothing for %v while calls waited on it", slidelog.ErrStalled, b.name(), b.mon.stall)
}

// kernelGrain bounds the jitter of the kernel's receipt times (jiffies).
const kernelGrain = 10 * time.Millisecond

// nodeName names a node in logs and errors.
func nodeName(addr string) string {
	switch addr {
	case "":
		return "redis"
	case failoverAddr:
		return "the Sentinels' master"
	}
	return addr
}

// checkContext returns a context for New's checks of the servers, ended
// when they have gone unanswered for timeout by the same evidence as a
// stalled node's (see monitor): never because this process could not run.
// stop releases it.
//
// With nodeWait (a Cluster's), a node that leaves a request unanswered
// for nodeWait by that evidence (or, where the kernel keeps no record,
// a dial or a TLS connection waiting for it that long in alive time) is
// muted for the rest of the check (see connSet.mute): the client's
// requests to it fail at once, so that one silent node among answering
// ones is waited on once, not in each check, and does not end the
// others' checks; it no longer counts towards timeout. stop unmutes it.
func (p *pipelines) checkContext(timeout, nodeWait time.Duration, probes *atomic.Int32) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	quit, done := make(chan struct{}), make(chan struct{})
	if nodeWait > 0 {
		p.muting.Store(true)
	}
	go func() {
		defer close(done)
		tick := max(time.Millisecond, timeout/10)
		if nodeWait > 0 {
			tick = max(time.Millisecond, min(tick, nodeWait/10))
		}
		t := time.NewTicker(tick)
		defer t.Stop()
		var silence time.Duration
		seen := p.progress()
		last := time.Now()
		// Per node, with nodeWait: the bytes read from it, whether a call
		// has waited on it since they last grew, and for how long in
		// alive time.
		signs := map[*connSet]uint64{}
		pending := map[*connSet]bool{}
		waited := map[*connSet]time.Duration{}
		for {
			select {
			case <-quit:
				return
			case <-t.C:
			}
			yield := time.Now()
			runtime.Gosched()
			now := time.Now()
			alive := max(tick/4, min(now.Sub(last), 2*tick)-now.Sub(yield))
			last = now
			var ev evidence
			muted := false
			for _, cs := range p.connSets() {
				if cs.mutedErr() != nil {
					continue
				}
				nev := cs.silence()
				if nodeWait > 0 {
					// A node is waited on from a request it owes (or a dial
					// to it) until it sends a byte, across the client's own
					// timeouts and retries, which end a connection's wait
					// and start another's.
					if sign := cs.bytesRead(); sign != signs[cs] || nev.answered {
						signs[cs], pending[cs], waited[cs] = sign, false, 0
					}
					if nev.owed || cs.waiting() {
						pending[cs] = true
					}
					if pending[cs] {
						waited[cs] += alive
					}
					// The kernel's record of one request's wait counts in
					// wall time, which it keeps whether this process runs
					// or not; the wait across the client's retries, in alive
					// time.
					if (nev.owed && nev.silence >= nodeWait) || waited[cs] >= nodeWait {
						cs.mute(&silentNodeError{wait: nodeWait})
						muted = true
						continue
					}
				}
				ev.merge(nev, cs.untracked.Load())
			}
			ev.unknown = ev.unknown || probes.Load() > 0
			if pr := p.progress(); pr != seen || !ev.unknown || muted {
				// A node muted is a verdict: the client's calls to it end,
				// and the others get their time anew.
				seen, silence = pr, 0
			} else {
				silence += alive
			}
			if (ev.owed && ev.silence >= timeout) || (!ev.owed && silence >= timeout) {
				cancel(errNoAnswer)
				p.breakAll()
				return
			}
		}
	}()
	return ctx, func() {
		close(quit)
		<-done
		if nodeWait > 0 {
			p.muting.Store(false)
			for _, cs := range p.connSets() {
				cs.unmute()
			}
		}
		cancel(nil)
	}
}

// silentNodeError is the error of the calls to a node New's check muted
// (see checkContext).
type silentNodeError struct {
	wait time.Duration
}

func (e *silentNodeError) Error() string {
	return fmt.Sprintf("no answer within %v while New checked the servers (not waited on again in its checks)", e.wait)
}

// errNoAnswer is the cause of a check context ended by silence.
var errNoAnswer = fmt.Errorf("no answer within %v", checkTimeout)

// merge adds ev, one node's evidence (see connSet.silence), to all, the
// evidence of several nodes together; untracked says that the node's
// client had connections the store does not track.
func (all *evidence) merge(ev evidence, untracked bool) {
	all.unknown = all.unknown || ev.unknown || untracked
	if ev.owed {
		if !all.owed || ev.silence > all.silence {
			all.silence = ev.silence
		}
		all.owed = true
	}
}

// progress is the latest sign of life of any node.
func (p *pipelines) progress() int64 {
	var last int64
	for _, b := range p.batchers() {
		last = max(last, b.progress())
	}
	for _, cs := range p.connSets() {
		last = max(last, cs.read.Load())
	}
	return last
}

// breakAll breaks off every connection of the store's client.
func (p *pipelines) breakAll() {
	for _, cs := range p.connSets() {
		cs.breakAll()
	}
}

// batchers returns the store's batchers.
func (p *pipelines) batchers() []*batcher {
	if p.single != nil {
		return []*batcher{p.single}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	bs := make([]*batcher, 0, len(p.nodes))
	for _, b := range p.nodes {
		bs = append(bs, b)
	}
	return bs
}

// connSets returns the connection sets of the store's nodes.
func (p *pipelines) connSets() []*connSet {
	p.mu.Lock()
	defer p.mu.Unlock()
	sets := make([]*connSet, 0, len(p.conns))
	for _, cs := range p.conns {
		sets = append(sets, cs)
	}
	return sets
}
