package redisstore

import (
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"syscall"
)

// synSent reports whether this process has a TCP socket in SYN_SENT to
// one of addrs ("host:port"): a dial the node has not answered. ok is
// false when the kernel cannot be asked or an address has no port, and
// the state is then unknown. A dial whose handshake the kernel completed
// is no longer in SYN_SENT, however long this process takes to run the
// goroutine that waits on it: it owes nothing. A dial to a host name
// with no socket in SYN_SENT is unknown: it may still be resolving the
// name, which no socket shows.
//
// The kernel is asked over netlink (sock_diag) for the sockets in
// SYN_SENT alone, so the answer is small however many connections the
// machine holds; a socket found is this process's when one of its file
// descriptors is that socket (see ownSocket).
func synSent(addrs []string) (sent, ok bool) {
	type target struct {
		ip   netip.Addr // invalid for a host name: any IP
		port uint16
	}
	targets := make([]target, 0, len(addrs))
	named := false
	for _, a := range addrs {
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			return false, false
		}
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			return false, false
		}
		ip, err := netip.ParseAddr(host)
		named = named || err != nil
		targets = append(targets, target{ip.Unmap(), uint16(n)})
	}
	// Sockets to an IPv4 address are AF_INET ones, to an IPv6 address
	// AF_INET6; a host name may be either.
	v4, v6 := false, false
	for _, t := range targets {
		v4 = v4 || !t.ip.IsValid() || t.ip.Is4()
		v6 = v6 || !t.ip.IsValid() || !t.ip.Is4()
	}
	for _, family := range []uint8{syscall.AF_INET, syscall.AF_INET6} {
		if family == syscall.AF_INET && !v4 || family == syscall.AF_INET6 && !v6 {
			continue
		}
		socks, err := synSentSockets(family)
		if err != nil {
			if family == syscall.AF_INET6 && len(socks) == 0 && err == errNoFamily {
				continue // no IPv6 in this kernel
			}
			return false, false
		}
		for _, s := range socks {
			for _, t := range targets {
				if s.dst.Port() == t.port && (!t.ip.IsValid() || s.dst.Addr().Unmap() == t.ip) {
					own, known := ownSocket(s.inode)
					if !known {
						return false, false
					}
					if own {
						return true, true
					}
				}
			}
		}
	}
	return false, !named
}

// diagSocket is a socket the kernel reported: its remote address and
// its inode.
type diagSocket struct {
	dst   netip.AddrPort
	inode uint32
}

// errNoFamily is a dump the kernel refused for its address family.
var errNoFamily = os.NewSyscallError("sock_diag", syscall.ENOENT)

// synSentSockets dumps the machine's TCP sockets of family in SYN_SENT.
func synSentSockets(family uint8) ([]diagSocket, error) {
	fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, syscall.NETLINK_INET_DIAG)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	defer syscall.Close(fd)
	// The stall monitor's goroutine asks: it must never wait long on the
	// kernel's answer.
	tv := syscall.Timeval{Sec: 1}
	if err := syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv); err != nil {
		return nil, os.NewSyscallError("setsockopt", err)
	}
	const (
		sockDiagByFamily = 20 // SOCK_DIAG_BY_FAMILY
		tcpSynSent       = 2  // TCP_SYN_SENT
		reqLen           = 16 + 56
	)
	// nlmsghdr, then inet_diag_req_v2: family, protocol, extensions,
	// padding, the states wanted, and an empty socket id (48 bytes).
	req := make([]byte, reqLen)
	ne := binary.NativeEndian
	ne.PutUint32(req[0:], reqLen)
	ne.PutUint16(req[4:], sockDiagByFamily)
	ne.PutUint16(req[6:], syscall.NLM_F_REQUEST|syscall.NLM_F_DUMP)
	ne.PutUint32(req[8:], 1)
	req[16], req[17] = family, syscall.IPPROTO_TCP
	ne.PutUint32(req[20:], 1<<tcpSynSent)
	if err := syscall.Sendto(fd, req, 0, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return nil, os.NewSyscallError("sendto", err)
	}
	var socks []diagSocket
	buf := make([]byte, 32<<10)
	for {
		n, _, err := syscall.Recvfrom(fd, buf, 0)
		if err != nil {
			return nil, os.NewSyscallError("recvfrom", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			switch m.Header.Type {
			case syscall.NLMSG_DONE:
				return socks, nil
			case syscall.NLMSG_ERROR:
				if len(m.Data) >= 4 && int32(ne.Uint32(m.Data)) == -int32(syscall.ENOENT) {
					return nil, errNoFamily
				}
				return nil, os.NewSyscallError("sock_diag", syscall.EINVAL)
			case sockDiagByFamily:
			default:
				continue
			}
			// inet_diag_msg: family, state, timer, retrans; the socket
			// id (source and destination ports, big-endian; source and
			// destination addresses, 16 bytes each; interface; cookie);
			// expires, queues, uid, inode.
			d := m.Data
			if len(d) < 72 || d[1] != tcpSynSent {
				continue
			}
			port := binary.BigEndian.Uint16(d[6:])
			var ip netip.Addr
			if d[0] == syscall.AF_INET {
				ip = netip.AddrFrom4([4]byte(d[24:28]))
			} else {
				ip = netip.AddrFrom16([16]byte(d[24:40]))
			}
			socks = append(socks, diagSocket{netip.AddrPortFrom(ip, port), ne.Uint32(d[68:])})
		}
	}
}

// owned caches, by inode, whether a socket in SYN_SENT is this process's:
// a dial that the node does not answer stays in SYN_SENT for seconds, and
// looking through the process's descriptors on every tick would cost as
// much as the process has of them.
var owned struct {
	sync.Mutex
	m map[uint32]bool
}

// maxOwnScan bounds the descriptors ownSocket reads: one readlink each,
// on the stall monitor's goroutine. A process with more leaves the
// socket's owner unknown (its dial is judged in alive time).
const maxOwnScan = 10000

// ownSocket reports whether one of this process's file descriptors is
// the socket of inode; known is false when they cannot be read, or are
// more than maxOwnScan.
func ownSocket(inode uint32) (own, known bool) {
	owned.Lock()
	defer owned.Unlock()
	if own, ok := owned.m[inode]; ok {
		return own, true
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil || len(fds) > maxOwnScan {
		return false, false
	}
	want := "socket:[" + strconv.FormatUint(uint64(inode), 10) + "]"
	for _, fd := range fds {
		if link, err := os.Readlink("/proc/self/fd/" + fd.Name()); err == nil && link == want {
			own = true
			break
		}
	}
	if owned.m == nil || len(owned.m) >= 256 {
		owned.m = make(map[uint32]bool) // inodes are reused: keep few
	}
	owned.m[inode] = own
	return own, true
}
