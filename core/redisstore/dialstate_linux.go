package redisstore

import (
	"cmp"
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
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

// diagSocket is a socket the kernel reported: its remote address, its
// inode and, when asked for (see tcpSockets), how long ago data last
// arrived on it.
type diagSocket struct {
	dst   netip.AddrPort
	inode uint32
	// recv is how long ago data last arrived (tcp_info's last_data_recv),
	// hasRecv whether the kernel said and the socket has received data.
	recv    time.Duration
	hasRecv bool
}

// errNoFamily is a dump the kernel refused for its address family.
var errNoFamily = os.NewSyscallError("sock_diag", syscall.ENOENT)

// TCP states as sock_diag numbers them.
const (
	tcpEstablished = 1 // TCP_ESTABLISHED
	tcpSynSent     = 2 // TCP_SYN_SENT
)

// synSentSockets dumps the machine's TCP sockets of family in SYN_SENT.
func synSentSockets(family uint8) ([]diagSocket, error) {
	return tcpSockets(family, tcpSynSent, false, 0)
}

// Where tcp_info holds tcpi_last_data_recv and tcpi_bytes_received.
var (
	lastDataRecv  = int(unsafe.Offsetof(unix.TCPInfo{}.Last_data_recv))
	bytesReceived = int(unsafe.Offsetof(unix.TCPInfo{}.Bytes_received))
)

// tcpSockets dumps the machine's TCP sockets of family in state, with
// their tcp_info when info is set, and only those whose remote port is
// port when it is not 0 (the kernel filters them, so that the answer
// stays small however many connections the machine holds).
func tcpSockets(family uint8, state uint8, info bool, port uint16) ([]diagSocket, error) {
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
		inetDiagInfo     = 2  // INET_DIAG_INFO: the socket's tcp_info
		reqBytecode      = 1  // INET_DIAG_REQ_BYTECODE
		bcDGE, bcDLE     = 4, 5
	)
	// nlmsghdr, then inet_diag_req_v2: family, protocol, extensions,
	// padding, the states wanted, and an empty socket id (48 bytes).
	reqLen := 16 + 56
	if port != 0 {
		reqLen += 4 + 16
	}
	req := make([]byte, reqLen)
	ne := binary.NativeEndian
	if port != 0 {
		// A filter (inet_diag_bc_op: code, yes, no; a port comparison's
		// port is the next op's no): the remote port at least port,
		// then at most port. A true test steps to the next; a false one
		// jumps past the end, which refuses the socket.
		bc := req[16+56:]
		ne.PutUint16(bc[0:], 4+16)
		ne.PutUint16(bc[2:], reqBytecode)
		op := bc[4:]
		op[0], op[1] = bcDGE, 8
		ne.PutUint16(op[2:], 16+4)
		ne.PutUint16(op[6:], port)
		op[8], op[9] = bcDLE, 8
		ne.PutUint16(op[10:], 8+4)
		ne.PutUint16(op[14:], port)
	}
	ne.PutUint32(req[0:], uint32(reqLen))
	ne.PutUint16(req[4:], sockDiagByFamily)
	ne.PutUint16(req[6:], syscall.NLM_F_REQUEST|syscall.NLM_F_DUMP)
	ne.PutUint32(req[8:], 1)
	req[16], req[17] = family, syscall.IPPROTO_TCP
	if info {
		req[18] = 1 << (inetDiagInfo - 1)
	}
	ne.PutUint32(req[20:], 1<<state)
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
			// expires, queues (unread, then unsent), uid, inode; then
			// the attributes asked for.
			d := m.Data
			if len(d) < 72 || d[1] != state {
				continue
			}
			port := binary.BigEndian.Uint16(d[6:])
			var ip netip.Addr
			if d[0] == syscall.AF_INET {
				ip = netip.AddrFrom4([4]byte(d[24:28]))
			} else {
				ip = netip.AddrFrom16([16]byte(d[24:40]))
			}
			s := diagSocket{dst: netip.AddrPortFrom(ip, port), inode: ne.Uint32(d[68:])}
			for a := d[72:]; len(a) >= 4; {
				l := int(ne.Uint16(a))
				if l < 4 || l > len(a) {
					break
				}
				// A socket that has received no data dates its
				// handshake as its last data: it is dated only once the
				// node has sent some (bytes_received, Linux 4.1 and
				// later; an older kernel dates none).
				if ne.Uint16(a[2:]) == inetDiagInfo && l-4 >= bytesReceived+8 && ne.Uint64(a[4+bytesReceived:]) > 0 {
					s.recv = time.Duration(ne.Uint32(a[4+lastDataRecv:])) * time.Millisecond
					s.hasRecv = true
				}
				a = a[min(len(a), (l+3)&^3):]
			}
			socks = append(socks, s)
		}
	}
}

// heardFrom reports what the kernel recorded of the node at addr (an IP
// address and port) on this process's established TCP connections to
// it: how long ago data last arrived on any of them, read or not (bytes
// left unread count from their arrival, as read ones do: see
// aliveSilence). heard is false when none has received anything;
// ok is false when the kernel cannot be asked or addr is not an IP
// address and port (a host name, a Unix socket).
//
// It serves where the store does not track the node's connections (a
// client used before New, TLS, go-redis's retries; see monitor): the
// kernel dates the node's bytes whether or not this process has run to
// read them, or has read them and not yet run the goroutine they were
// for. The kernel is asked for the sockets to the node's port alone; it
// still walks its whole TCP table (about a millisecond, BenchmarkSynSent),
// so the monitor asks only when it is about to judge a node stalled. A
// socket counts only when it is this process's (see ownSocket), looked
// up from the most recent: the first of this process's answers.
func heardFrom(addr string) (ago time.Duration, heard, ok bool) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return 0, false, false
	}
	ip := ap.Addr().Unmap()
	family := uint8(syscall.AF_INET6)
	if ip.Is4() {
		family = syscall.AF_INET
	}
	socks, err := tcpSockets(family, tcpEstablished, true, ap.Port())
	if err != nil {
		return 0, false, false
	}
	socks = slices.DeleteFunc(socks, func(s diagSocket) bool {
		// A socket the kernel does not date tells nothing, bytes waiting
		// in it or not (an older kernel dates none: the silence stays in
		// alive time).
		return s.dst.Port() != ap.Port() || s.dst.Addr().Unmap() != ip || !s.hasRecv
	})
	// The most recent arrival first.
	slices.SortFunc(socks, func(a, b diagSocket) int { return cmp.Compare(a.recv, b.recv) })
	for _, s := range socks {
		own, known := ownSocket(s.inode)
		if !known {
			return 0, false, false
		}
		if own {
			return s.recv, true, true
		}
	}
	return 0, false, true
}

// owned caches, by inode, whether a socket is this process's: a dial
// that the node does not answer stays in SYN_SENT for seconds, and a
// connection lasts, and looking through the process's descriptors on
// every tick would cost as much as the process has of them (about 6 µs
// each). A look records every socket of the process it finds.
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
	if owned.m == nil || len(owned.m) >= 2*maxOwnScan {
		owned.m = make(map[uint32]bool) // inodes are reused: keep few
	}
	for _, fd := range fds {
		link, err := os.Readlink("/proc/self/fd/" + fd.Name())
		if err != nil {
			continue // closed since the directory was read
		}
		if n, ok := strings.CutPrefix(link, "socket:["); ok {
			if v, err := strconv.ParseUint(strings.TrimSuffix(n, "]"), 10, 32); err == nil {
				owned.m[uint32(v)] = true
			}
		}
	}
	own = owned.m[inode]
	owned.m[inode] = own
	return own, true
}
