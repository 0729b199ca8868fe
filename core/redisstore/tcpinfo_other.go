//go:build !linux

package redisstore

import (
	"net"
	"syscall"
	"time"
)

// tcpRecv reports ok false where the kernel's TCP_INFO is not read: the
// store then counts a node's silence in alive time alone.
func tcpRecv(*net.TCPConn) (recv time.Duration, received uint64, ok bool) { return 0, 0, false }

// unixQueued reports ok false where the kernel's count of a Unix socket's
// unread bytes is not read: the store then counts a node's silence in
// alive time alone.
func unixQueued(syscall.RawConn) (queued int, ok bool) { return 0, false }

// readUnix is the plain Read, counted, where the kernel's count of a Unix
// socket's unread bytes is not read.
func (c *trackedConn) readUnix(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.counted(n)
	return n, err
}
