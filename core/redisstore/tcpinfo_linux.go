package redisstore

import (
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// tcpRecv returns how long ago data last arrived on conn, to the
// kernel's millisecond granularity, and how many bytes have arrived on it
// in all, as the kernel recorded them (TCP_INFO).
// The kernel stamps these when segments leave and arrive, whether or not
// this process runs: a reply waiting unread in the socket counts as
// received.
func tcpRecv(conn *net.TCPConn) (recv time.Duration, received uint64, ok bool) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return 0, 0, false
	}
	var info *unix.TCPInfo
	var ierr error
	if err := raw.Control(func(fd uintptr) {
		info, ierr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil || ierr != nil {
		return 0, 0, false
	}
	return time.Duration(info.Last_data_recv) * time.Millisecond, info.Bytes_received, true
}

// unixQueued returns how many bytes wait unread in the Unix socket whose
// descriptor is raw, as the kernel counts them (SIOCINQ): bytes the node
// sent that this process has not read yet, counted whether or not it runs.
// The kernel keeps no time of their arrival on a Unix socket.
func unixQueued(raw syscall.RawConn) (queued int, ok bool) {
	var ierr error
	if err := raw.Control(func(fd uintptr) {
		queued, ierr = unix.IoctlGetInt(int(fd), unix.SIOCINQ)
	}); err != nil || ierr != nil {
		return 0, false
	}
	return queued, true
}

// readUnix is Read on a Unix socket, counting what it reads (counted):
// it waits as the connection's Read does (its deadlines hold) and makes
// the read's system call itself, with taking set from before the call
// until the bytes are counted. On a Unix socket the kernel counts the
// bytes waiting unread but not those it has delivered: a read whose call
// took the node's answer and whose thread then waits for a CPU would
// otherwise leave the node looking silent to the monitor.
func (c *trackedConn) readUnix(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	var n int
	var rerr error
	err := c.unixRaw.Read(func(fd uintptr) bool {
		var err error
		c.taking.Store(true)
		for {
			n, err = unix.Read(int(fd), b)
			if err != unix.EINTR {
				break
			}
		}
		if testHookUnixRead != nil {
			testHookUnixRead(n)
		}
		c.counted(n)
		c.taking.Store(false)
		switch {
		case err == unix.EAGAIN:
			n = 0
			return false // wait until the socket is readable
		case err != nil:
			n, rerr = 0, os.NewSyscallError("read", err)
		case n == 0:
			rerr = io.EOF
		}
		return true
	})
	if err == nil && rerr != io.EOF {
		err = rerr
	}
	if err != nil {
		return n, &net.OpError{Op: "read", Net: "unix", Source: c.unix.LocalAddr(), Addr: c.unix.RemoteAddr(), Err: err}
	}
	return n, rerr
}

// testHookUnixRead, when set (by a test), is called by readUnix between
// its system call, which took n bytes, and their count.
var testHookUnixRead func(n int)
