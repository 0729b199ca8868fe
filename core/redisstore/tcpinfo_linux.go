package redisstore

import (
	"net"
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
