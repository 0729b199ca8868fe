package redisstore

import (
	"bytes"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/slidelog/slidelog/core/internal/monotime"
)

// connSet is the connections a store's client has dialled to one Redis
// node. The store tracks them for two things:
//
//   - evidence: whether the node has sent anything lately, read from the
//     kernel's own record of each TCP connection (see silence), so that a
//     process that could not run is never taken for a node that did not
//     answer;
//   - breaking off: with go-redis's plain options a read in flight ignores
//     its context and would hold its caller until the client's read
//     timeout, so when the node is judged stalled every connection's
//     deadline is put in the past.
type connSet struct {
	// untracked is set when the node's client had connections before the
	// store could track them: calls on that node never read in their
	// callers' goroutines, and its silence is counted in alive time.
	untracked atomic.Bool
	// gen counts the breaks: a connection dialled before the latest one
	// is broken for good.
	gen atomic.Uint64
	// read is the monotonic time (monotime.Now) a connection of the
	// set other than TCP last read a byte: progress where silence may be
	// judged in alive time (TLS; a Unix socket where the kernel's record
	// of it is not read).
	read atomic.Int64
	// lastRecv is the latest arrival (monotime.Now) of the node's bytes on
	// any connection that the monitor has seen (see silence), kept when
	// the connection is gone.
	lastRecv atomic.Int64
	// failed is when (monotime.Now) a read or write on a connection of the
	// set last failed other than by a deadline: the node reset or closed
	// it. Until the node's next byte, go-redis may be between a retry's
	// back-off and its next dial, with no request written: the set's
	// silence is then judged in alive time.
	failed atomic.Int64
	// dialing counts the dials to the node in progress; dials holds
	// them, under mu.
	dialing atomic.Int32
	dials   []*pendingDial
	// dialAsked is when (monotime.Now) the kernel was last asked about the
	// dials, dialSent and dialUnknown its answer: asked at most once per
	// dialAskEvery (see dialEvidence).
	dialAsked             int64
	dialSent, dialUnknown bool
	mu                    sync.Mutex
	conns                 map[*trackedConn]struct{}
	// claims are the calls read in their callers' goroutines whose
	// context can end (see claim); nclaims counts them, so that a write
	// looks for them only when there are some.
	claims  []*claim
	nclaims atomic.Int32

	panics *panicLog // the store's

	// muted is set while New's check holds the node silent (see
	// pipelines.checkContext): its connections are broken off, and its
	// dials answered with a silentConn, failing at once with *muted.
	// muting, under mu, is the mute to come or in force (see muteDone).
	muted  atomic.Pointer[error]
	muting *muteState
	// closedRead is the bytes read on the set's closed connections (see
	// bytesRead).
	closedRead atomic.Uint64
}

// muteState is one mute of a node: done is closed when it begins,
// err set before.
type muteState struct {
	done chan struct{}
	err  error
}

// mute holds the node silent for the rest of New's check: every
// connection's reads and writes fail at once, a dial in progress is
// abandoned (see dialWatch) and later dials get a silentConn failing
// with err, so that the client waits on the node no more.
func (s *connSet) mute(err error) {
	s.mu.Lock()
	if s.muted.Load() != nil {
		s.mu.Unlock()
		return
	}
	s.muted.Store(&err)
	if s.muting == nil {
		s.muting = &muteState{done: make(chan struct{})}
	}
	s.muting.err = err
	close(s.muting.done)
	s.mu.Unlock()
	s.breakAll()
}

// unmute ends mute: the node's next dials are real ones again.
func (s *connSet) unmute() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.muted.Load() != nil {
		s.muted.Store(nil)
		s.muting = nil
	}
}

// mutedErr is the error of a muted node's connections; nil unless
// muted.
func (s *connSet) mutedErr() error {
	if e := s.muted.Load(); e != nil {
		return *e
	}
	return nil
}

// muteDone returns the node's next mute, or the one in force: its done
// is closed when it begins.
func (s *connSet) muteDone() *muteState {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.muting == nil {
		s.muting = &muteState{done: make(chan struct{})}
	}
	return s.muting
}

// waiting reports whether a call may wait on the node where the kernel
// keeps no record of it: a dial in progress, or a connection that is
// neither TCP nor a Unix socket (TLS) owing a reply.
func (s *connSet) waiting() bool {
	if s.dialing.Load() > 0 {
		return true
	}
	gen := s.gen.Load()
	for _, c := range s.list() {
		if c.gen != gen || c.kicked.Load() || c.tcp != nil || c.unix != nil {
			continue
		}
		if c.wseq.Load() > c.rseq.Load() || c.reading.Load() {
			return true
		}
	}
	return false
}

// bytesRead is how many bytes this process has read from the node, on
// connections open and closed: it grows with each of the node's answers.
func (s *connSet) bytesRead() uint64 {
	n := s.closedRead.Load()
	for _, c := range s.list() {
		n += c.nread.Load()
	}
	return n
}

// silentConn stands in for a connection to a node muted by New's check:
// its reads and writes fail at once with err, which go-redis does not
// retry, so that a request to the node fails without a dial (whose
// failure go-redis would retry five times, 100 ms apart).
type silentConn struct {
	addr silentAddr
	err  error
}

type silentAddr string

func (a silentAddr) Network() string { return "tcp" }
func (a silentAddr) String() string  { return string(a) }

func (c silentConn) Read([]byte) (int, error)         { return 0, c.err }
func (c silentConn) Write([]byte) (int, error)        { return 0, c.err }
func (c silentConn) Close() error                     { return nil }
func (c silentConn) LocalAddr() net.Addr              { return c.addr }
func (c silentConn) RemoteAddr() net.Addr             { return c.addr }
func (c silentConn) SetDeadline(time.Time) error      { return nil }
func (c silentConn) SetReadDeadline(time.Time) error  { return nil }
func (c silentConn) SetWriteDeadline(time.Time) error { return nil }

// pendingDial is a dial to a set's node in progress.
type pendingDial struct {
	addr  string // the address dialled
	start int64  // monotime.Now
	// tls is set when the dial ends with a TLS handshake (the client has
	// a TLSConfig): once the kernel has connected, it still waits for the
	// node's answer to this process's hello, of which the kernel keeps no
	// record.
	tls bool
}

// dialStart records a dial to addr, ended with dialEnd; tls says whether
// the dial ends with a TLS handshake.
func (s *connSet) dialStart(addr string, tls bool) *pendingDial {
	d := &pendingDial{addr: addr, start: monotime.Now(), tls: tls}
	s.mu.Lock()
	s.dials = append(s.dials, d)
	s.mu.Unlock()
	s.dialing.Add(1)
	return d
}

// dialEnd forgets d.
func (s *connSet) dialEnd(d *pendingDial) {
	s.dialing.Add(-1)
	s.mu.Lock()
	if i := slices.Index(s.dials, d); i >= 0 {
		s.dials = slices.Delete(s.dials, i, i+1)
	}
	s.mu.Unlock()
}

// dialEvidence is the kernel's evidence on the dials in progress: a dial
// the node has not answered (its socket is in SYN_SENT) is owed since the
// oldest dial's start. A dial the kernel completed, or whose socket does
// not exist yet, waits for this process to run, not for the node, unless
// it ends with a TLS handshake: the node may not have answered the hello
// yet, which the kernel keeps no record of. unknown is set then, and when
// synSent cannot tell (see there).
func (s *connSet) dialEvidence() (owedSince int64, owed, unknown bool) {
	s.mu.Lock()
	addrs := make([]string, 0, len(s.dials))
	handshakes := false
	for _, d := range s.dials {
		if !slices.Contains(addrs, d.addr) {
			addrs = append(addrs, d.addr)
		}
		if !owed || d.start < owedSince {
			owedSince, owed = d.start, true
		}
		handshakes = handshakes || d.tls
	}
	now := monotime.Now()
	if len(addrs) == 0 || now-s.dialAsked < int64(dialAskEvery) {
		sent, known := s.dialSent, !s.dialUnknown
		s.mu.Unlock()
		if len(addrs) == 0 {
			return 0, false, false // ended since dialing was read
		}
		return dialVerdict(owedSince, sent, known, handshakes)
	}
	s.mu.Unlock()
	sent, ok := synSent(addrs)
	s.mu.Lock()
	s.dialAsked, s.dialSent, s.dialUnknown = now, sent, !ok
	s.mu.Unlock()
	return dialVerdict(owedSince, sent, ok, handshakes)
}

// dialVerdict is dialEvidence's answer from the kernel's: sent when some
// dial's socket is in SYN_SENT, known unless the kernel could not tell,
// handshakes when some dial ends with a TLS handshake.
func dialVerdict(owedSince int64, sent, known, handshakes bool) (int64, bool, bool) {
	switch {
	case !known:
		return 0, false, true
	case sent:
		return owedSince, true, false
	case handshakes:
		// Connected, perhaps waiting for the node's answer to the hello.
		return 0, false, true
	}
	return 0, false, false
}

// dialAskEvery is how often, at most, the kernel is asked about a node's
// dials in progress: one look costs about 1.2 ms of this process's CPU
// (the kernel walks its whole TCP hash table, however few the sockets;
// BenchmarkSynSent), so a dial that lasts (a node that does not answer)
// costs at most about 5% of a core, and its silence is seen at most this
// much late.
const dialAskEvery = 25 * time.Millisecond

// claim finds the connection a call is sent on, so that the call can be
// broken off alone when its caller's context ends: with go-redis's plain
// options a read in flight ignores the context. The call's request
// carries its member (the request ID's bytes, unique per call), and the
// write that carries it marks its connection as the call's.
type claim struct {
	member    string
	set       *connSet
	conn      atomic.Pointer[trackedConn]
	cancelled atomic.Bool
	// watch, under set.mu, looks for the handshakes the call may wait on
	// once it is cancelled before its request was written (see cancel);
	// done stops it when the call returns.
	watch *time.Timer
	done  bool
}

// claim registers a call whose request carries member.
func (s *connSet) claim(member string) *claim {
	cl := &claim{member: member, set: s}
	s.mu.Lock()
	s.claims = append(s.claims, cl)
	s.mu.Unlock()
	s.nclaims.Add(1)
	return cl
}

// unclaim forgets cl: its call returned.
func (s *connSet) unclaim(cl *claim) {
	s.mu.Lock()
	for i, c := range s.claims {
		if c == cl {
			s.claims = append(s.claims[:i], s.claims[i+1:]...)
			break
		}
	}
	cl.done = true
	if cl.watch != nil {
		cl.watch.Stop()
	}
	s.mu.Unlock()
	s.nclaims.Add(-1)
}

// cancel breaks off the connection cl's call is on, if it is still the
// call's: its read ends at once. A call not written yet fails its write.
// Before its request, though, the call may be waiting for a new
// connection's handshake: go-redis dials the connection, then sends its
// hello from the caller's goroutine, and with its plain options ignores
// the context while it reads the answer. Which call a handshake is for
// cannot be told, so the call's wait is bounded instead: until it
// returns, a connection of the node whose hello the node has left
// unanswered for handshakeWait is broken off (watchHandshakes).
func (cl *claim) cancel() {
	cl.cancelled.Store(true)
	if c := cl.conn.Load(); c != nil {
		if c.owner.Load() == cl {
			c.kick()
		}
		return
	}
	cl.set.watchHandshakes(cl)
}

// handshakeWait is how long a new connection may wait for the node's
// answer to its hello (the node sending nothing on it, by the kernel's
// record) before a call whose context ended, and which may be waiting
// on it, breaks it off: far beyond a round trip to a node that answers,
// and well within the second slidelog.Store allows a call after its
// context ends.
const handshakeWait = 250 * time.Millisecond

// watchHandshakes breaks off, for good, each of the set's connections
// whose hello the node has left unanswered for handshakeWait, until cl's
// call returns: at once for those that waited that long already, then
// when the next one will have.
func (s *connSet) watchHandshakes(cl *claim) {
	now := monotime.Now()
	next := int64(-1) // when the next connection in its handshake will have waited handshakeWait
	for _, c := range s.list() {
		since, waiting := c.handshake()
		switch {
		case !waiting || c.kicked.Load():
		case now-since >= int64(handshakeWait):
			c.kick()
		case next < 0 || since+int64(handshakeWait) < next:
			next = since + int64(handshakeWait)
		}
	}
	if next < 0 {
		// None yet: the call may still be waiting for its dial, or for a
		// connection of the pool; look again in a while.
		next = now + int64(handshakeWait)/4
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cl.done || cl.conn.Load() != nil {
		return
	}
	cl.watch = time.AfterFunc(time.Duration(next-now), func() { s.watchHandshakes(cl) })
}

// handshake reports whether c waits for the node's first bytes, and since
// when (monotime.Now): a connection that has read nothing, on which the
// kernel has received nothing either (bytes received but unread mean the
// node answered and this process has yet to run); over TLS, nothing since
// its last write (a TLS 1.3 server's session ticket arriving after it
// counts as an answer); over a Unix socket, nothing waiting unread. Where
// the kernel's record cannot be read, none is taken to wait: a busy
// process could not be told from a node that does not answer.
func (c *trackedConn) handshake() (since int64, waiting bool) {
	if c.rseq.Load() != 0 {
		return 0, false
	}
	switch {
	case c.tcp != nil:
		if _, received, ok := tcpRecv(c.tcp); !ok || received > 0 {
			return 0, false
		}
	case c.hsTCP != nil:
		if _, received, ok := tcpRecv(c.hsTCP); !ok || received > c.hsRecv.Load() {
			return 0, false
		}
	case c.unix != nil:
		// An answer taken from the socket since the load of rseq is
		// counted before taking is cleared (see readUnix).
		if queued, ok := unixQueued(c.unixRaw); !ok || queued > 0 || c.taking.Load() || c.rseq.Load() != 0 {
			return 0, false
		}
	default:
		return 0, false
	}
	since = c.born
	if c.wseq.Load() != 0 {
		since = c.wrote.Load()
	}
	return since, true
}

// match returns the claim whose member b carries, or nil.
func (s *connSet) match(b []byte) *claim {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, cl := range s.claims {
		if bytes.Contains(b, []byte(cl.member)) {
			return cl
		}
	}
	return nil
}

// pastDeadline is a deadline in the past: a read or write waiting on a
// connection given it returns at once with a timeout.
var pastDeadline = time.Unix(1, 0)

// add tracks conn and returns the connection the client is to use.
func (s *connSet) add(conn net.Conn) net.Conn {
	c := &trackedConn{Conn: conn, set: s, gen: s.gen.Load(), born: monotime.Now()}
	// The kernel's byte count is compared with the bytes read: only on
	// a plain TCP connection (TLS reads fewer bytes than it receives).
	switch conn := conn.(type) {
	case *net.TCPConn:
		c.tcp = conn
	case *net.UnixConn:
		if raw, err := conn.SyscallConn(); err == nil {
			c.unix, c.unixRaw = conn, raw
		}
	case *tls.Conn:
		c.hsTCP, _ = conn.NetConn().(*net.TCPConn)
	}
	s.mu.Lock()
	if s.conns == nil {
		s.conns = make(map[*trackedConn]struct{})
	}
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	if _, ok := conn.(syscall.Conn); ok {
		// go-redis checks an idle connection's health through its raw
		// descriptor; keep that for the connections that have one (not
		// TLS, which go-redis deliberately leaves unchecked).
		return trackedSysConn{c}
	}
	return c
}

// breakAll breaks every connection the set holds: their reads and writes
// in flight and to come fail at once, and the client drops them.
func (s *connSet) breakAll() {
	s.gen.Add(1)
	for _, c := range s.list() {
		s.breakOff(c)
	}
}

func (s *connSet) list() []*trackedConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	conns := make([]*trackedConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	return conns
}

// evidence is what a node's connections tell of its silence.
type evidence struct {
	// owed is set when some TCP connection or Unix socket wrote a
	// request after the last bytes this process read from it, and the
	// kernel has received no byte on it that this process has not read
	// (on a Unix socket: none waits unread, and no read is taking any):
	// a reply is owed. A connection with bytes waiting unread (this
	// process has not run to read them) owes nothing: the node answered.
	owed bool
	// silence is, when owed, how long the node has sent nothing on any
	// of its connections while a request was owed: the time since the
	// later of the node's last byte on any connection, as the kernel
	// recorded its arrival (TCP_INFO; on a Unix socket, this process's
	// last read of it), and the oldest owed request's write.
	silence time.Duration
	// unknown is set when a call could be waiting on something the
	// kernel keeps no record of: a connection that is neither TCP nor a
	// Unix socket (TLS, but for its handshake), go-redis's
	// retries after a connection failed, or a dial synSent cannot tell
	// about. Alive time decides then.
	unknown bool
	// answered is set when bytes the node sent wait unread on some
	// connection: the node is answering, whatever else waits.
	answered bool
}

// silence reads the set's evidence from the kernel (see evidence).
func (s *connSet) silence() evidence {
	var ev evidence
	// lastRecv is when (monotime.Now) the node's last byte arrived on any
	// connection, oldestOwed when the oldest request still owed was
	// written.
	now := monotime.Now()
	lastRecv := s.lastRecv.Load()
	var oldestOwed int64
	answered := false
	gen := s.gen.Load()
	for _, c := range s.list() {
		if c.gen != gen || c.kicked.Load() {
			continue // broken off: no longer waited on
		}
		if c.tcp == nil && c.unix == nil {
			ev.unknown = true
			continue
		}
		// Read the connection's own counts before the kernel's, so that
		// a read in between can only make the kernel's count larger.
		wseq, rseq, read, reading := c.wseq.Load(), c.rseq.Load(), c.nread.Load(), c.reading.Load()
		if c.unix != nil {
			// A Unix socket: the kernel counts the bytes waiting unread.
			// Bytes a read's system call took are counted before the
			// read clears taking (readUnix), so that a read which took
			// them and waits for a CPU is an answer too. The kernel
			// keeps no time of their arrival, which was at the latest
			// this process's read of them.
			queued, ok := unixQueued(c.unixRaw)
			if !ok {
				ev.unknown = true
				continue
			}
			if queued > 0 || c.taking.Load() {
				answered = true
				continue
			}
			lastRecv = max(lastRecv, c.readAt.Load())
		} else {
			recv, received, ok := tcpRecv(c.tcp)
			if !ok {
				ev.unknown = true
				continue
			}
			lastRecv = max(lastRecv, now-int64(recv))
			if received > read {
				// Bytes wait unread: the node answered.
				answered = true
				continue
			}
		}
		// A reply is owed after a write not yet followed by a read of
		// its bytes, and while a read waits for the rest of a reply (a
		// pipeline's later replies, WAIT's).
		if wseq > rseq || reading {
			w := max(c.wrote.Load(), c.readAt.Load())
			if !ev.owed || w < oldestOwed {
				oldestOwed = w
			}
			ev.owed = true
		}
	}
	s.lastRecv.Store(lastRecv) // only the monitor's goroutine writes it
	if f := s.failed.Load(); f > lastRecv && !ev.owed {
		// A connection failed since the node's last byte: the calls may
		// wait on go-redis's retries, which the kernel keeps no record of.
		ev.unknown = true
	}
	if s.dialing.Load() > 0 {
		// A dial in progress is owed while the kernel still waits for
		// the node's answer to its SYN. One the kernel completed waits
		// for this process to run, however long that takes: it does not
		// count.
		switch since, owed, unknown := s.dialEvidence(); {
		case unknown:
			ev.unknown = true
		case owed:
			if !ev.owed || since < oldestOwed {
				oldestOwed = since
			}
			ev.owed = true
		}
	}
	if answered {
		ev.owed, ev.unknown, ev.answered = false, false, true
	}
	if ev.owed {
		ev.silence = time.Duration(now - max(lastRecv, oldestOwed))
	}
	return ev
}

// trackedConn is a connection of a connSet. Once broken, every deadline
// the client sets on it is in the past.
type trackedConn struct {
	net.Conn
	set  *connSet
	gen  uint64
	tcp  *net.TCPConn // the TCP connection under it; nil if not TCP
	born int64        // when (monotime.Now) it was added
	// unix is the Unix socket under it (nil if not one), and unixRaw its
	// descriptor, which Read reads itself, taking set while its system
	// call may have taken bytes it has not counted yet (see readUnix).
	unix    *net.UnixConn
	unixRaw syscall.RawConn
	taking  atomic.Bool
	// hsTCP is the TCP connection under a TLS one, and hsRecv the bytes
	// its kernel had received at the last write before the first read:
	// whether the node answered the hello (see handshake).
	hsTCP  *net.TCPConn
	hsRecv atomic.Uint64

	// The order of the connection's writes and reads: seq counts both,
	// wseq is the count at the last write, rseq at the last read that
	// returned bytes, and wrote the time (monotime.Now) of the last write. A
	// request is owed while wseq > rseq.
	seq, wseq, rseq atomic.Int64
	wrote           atomic.Int64
	nread           atomic.Uint64 // bytes read
	reading         atomic.Bool   // a read waits for bytes
	readAt          atomic.Int64  // when (monotime.Now) the last read returned bytes

	owner  atomic.Pointer[claim] // the claimed call the last write carried
	kicked atomic.Bool           // broken off for a claim: for good
}

// failedIO records a read or write that failed other than by a deadline
// (a reset, the node closing the connection).
func (c *trackedConn) failedIO(err error) {
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		c.set.failed.Store(monotime.Now())
	}
}

// kick breaks the connection off for good.
func (c *trackedConn) kick() {
	c.kicked.Store(true)
	c.set.breakOff(c)
}

// breakOff puts the deadline of c's connection in the past: its reads
// and writes in flight and to come fail at once. The connection is the
// client's dialer's, which may be the application's: a panic in its
// SetDeadline is recovered and logged, since breakOff runs on goroutines
// of the store's own (its monitor's, holding the batcher's lock, or the
// one that breaks a call off when its caller's context ends); the
// connection is then not broken off, and a read in flight on it ends at
// the client's read timeout.
func (s *connSet) breakOff(c *trackedConn) {
	defer func() {
		if p := recover(); p != nil {
			s.panics.log(panicConn, p)
		}
	}()
	_ = c.Conn.SetDeadline(pastDeadline)
}

// errCancelled is the write error of a claimed call whose caller left
// before it was written.
var errCancelled = errors.New("redisstore: call cancelled before it was sent")

func (c *trackedConn) Write(b []byte) (int, error) {
	if c.hsTCP != nil && c.rseq.Load() == 0 {
		// A write of the handshake, over TLS.
		if _, received, ok := tcpRecv(c.hsTCP); ok {
			c.hsRecv.Store(received)
		}
	}
	if c.set.nclaims.Load() > 0 {
		cl := c.set.match(b)
		c.owner.Store(cl)
		if cl != nil {
			cl.conn.Store(c)
			if cl.cancelled.Load() {
				c.kick()
				return 0, errCancelled
			}
		}
	} else if c.owner.Load() != nil {
		c.owner.Store(nil)
	}
	n, err := c.Conn.Write(b)
	if err != nil {
		c.failedIO(err)
	}
	c.wrote.Store(monotime.Now())
	c.wseq.Store(c.seq.Add(1))
	return n, err
}

func (c *trackedConn) Read(b []byte) (int, error) {
	c.reading.Store(true)
	read := c.Conn.Read
	if c.unix != nil {
		read = c.readUnix // counts what it reads itself, before taking is cleared
	}
	n, err := read(b)
	c.reading.Store(false)
	if err != nil {
		c.failedIO(err)
	}
	if c.unix == nil {
		c.counted(n)
	}
	return n, err
}

// counted records a read of n bytes (none when n is 0).
func (c *trackedConn) counted(n int) {
	if n <= 0 {
		return
	}
	// readAt before nread: a monitor that sees the bytes counted read
	// sees when (see connSet.silence).
	c.readAt.Store(monotime.Now())
	c.nread.Add(uint64(n))
	c.rseq.Store(c.seq.Add(1))
	if c.tcp == nil {
		c.set.read.Store(monotime.Now())
	}
}

func (c *trackedConn) deadline(t time.Time) time.Time {
	if c.gen != c.set.gen.Load() || c.kicked.Load() || c.set.muted.Load() != nil {
		return pastDeadline
	}
	return t
}

func (c *trackedConn) SetDeadline(t time.Time) error { return c.Conn.SetDeadline(c.deadline(t)) }

func (c *trackedConn) SetReadDeadline(t time.Time) error {
	return c.Conn.SetReadDeadline(c.deadline(t))
}

func (c *trackedConn) SetWriteDeadline(t time.Time) error {
	return c.Conn.SetWriteDeadline(c.deadline(t))
}

func (c *trackedConn) Close() error {
	c.set.mu.Lock()
	if _, ok := c.set.conns[c]; ok {
		delete(c.set.conns, c)
		c.set.closedRead.Add(c.nread.Load())
	}
	c.set.mu.Unlock()
	return c.Conn.Close()
}

// trackedSysConn is a trackedConn over a connection with a raw
// descriptor.
type trackedSysConn struct{ *trackedConn }

func (c trackedSysConn) SyscallConn() (syscall.RawConn, error) {
	return c.Conn.(syscall.Conn).SyscallConn()
}
