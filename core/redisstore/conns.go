package redisstore

import (
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// connSet is the connections a store's client has dialled to one Redis
// node, tracked so that calls reading in their callers' goroutines can be
// broken off when the limiter judges the node stalled: with go-redis's
// plain options a read in flight ignores its context, and would hold its
// caller until the client's read timeout.
type connSet struct {
	// untracked is set when the node's client had connections before the
	// store could track them: calls on that node never read in their
	// callers' goroutines.
	untracked atomic.Bool
	// gen counts the breaks: a connection dialled before the latest one
	// is broken for good.
	gen   atomic.Uint64
	mu    sync.Mutex
	conns map[*trackedConn]struct{}
}

// pastDeadline is a deadline in the past: a read or write waiting on a
// connection given it returns at once with a timeout.
var pastDeadline = time.Unix(1, 0)

// add tracks conn and returns the connection the client is to use.
func (s *connSet) add(conn net.Conn) net.Conn {
	c := &trackedConn{Conn: conn, set: s, gen: s.gen.Load()}
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
	s.mu.Lock()
	conns := make([]*trackedConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		_ = c.Conn.SetDeadline(pastDeadline)
	}
}

// trackedConn is a connection of a connSet. Once broken, every deadline
// the client sets on it is in the past.
type trackedConn struct {
	net.Conn
	set *connSet
	gen uint64
}

func (c *trackedConn) deadline(t time.Time) time.Time {
	if c.gen != c.set.gen.Load() {
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
	delete(c.set.conns, c)
	c.set.mu.Unlock()
	return c.Conn.Close()
}

// trackedSysConn is a trackedConn over a connection with a raw
// descriptor.
type trackedSysConn struct{ *trackedConn }

func (c trackedSysConn) SyscallConn() (syscall.RawConn, error) {
	return c.Conn.(syscall.Conn).SyscallConn()
}
