//go:build !linux

package redisstore

import (
	"net"
	"time"
)

// tcpRecv reports ok false where the kernel's TCP_INFO is not read: the
// store then counts a node's silence in alive time alone.
func tcpRecv(*net.TCPConn) (recv time.Duration, received uint64, ok bool) { return 0, 0, false }
