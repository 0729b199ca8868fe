package redisstore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
)

// synSent reports whether this process has a TCP socket in SYN_SENT to
// one of addrs ("host:port"): a dial the node has not answered. ok is
// false when the kernel's socket table cannot be read or an address has
// no port, and the state is then unknown. A dial whose handshake the
// kernel completed is no longer in SYN_SENT, however long this process
// takes to run the goroutine that waits on it: it owes nothing.
func synSent(addrs []string) (sent, ok bool) {
	// The kernel's form of each address: the IP as the native-endian
	// hex of its 32-bit words, a colon, the port in hex. A host name
	// matches on its port alone.
	var want [][]byte
	for _, a := range addrs {
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			return false, false
		}
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			return false, false
		}
		p := fmt.Sprintf(":%04X", n)
		ip, err := netip.ParseAddr(host)
		if err != nil {
			want = append(want, []byte(p)) // a host name: any IP
			continue
		}
		want = append(want, []byte(kernelIP(ip)+p))
		if ip.Is4() {
			want = append(want, []byte(kernelIP(netip.AddrFrom16(ip.As16()))+p))
		}
	}
	var inodes []string
	for _, table := range []string{"/proc/self/net/tcp", "/proc/self/net/tcp6"} {
		data, err := os.ReadFile(table)
		if err != nil {
			if table == "/proc/self/net/tcp6" && os.IsNotExist(err) {
				continue // no IPv6 in this kernel
			}
			return false, false
		}
		lines := bytes.Split(data, []byte{'\n'})
		for _, line := range lines[min(1, len(lines)):] { // the first is a header
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			f := bytes.Fields(line)
			if len(f) < 10 || string(f[3]) != "02" { // 02 is TCP_SYN_SENT
				continue
			}
			for _, w := range want {
				if bytes.HasSuffix(f[2], w) && (w[0] == ':' || len(f[2]) == len(w)) {
					inodes = append(inodes, string(f[9]))
					break
				}
			}
		}
	}
	if len(inodes) == 0 {
		return false, true
	}
	// The table is the network namespace's: keep this process's sockets.
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return false, false
	}
	for _, fd := range fds {
		link, err := os.Readlink("/proc/self/fd/" + fd.Name())
		if err != nil {
			continue // closed since the directory was read
		}
		for _, ino := range inodes {
			if link == "socket:["+ino+"]" {
				return true, true
			}
		}
	}
	return false, true
}

// kernelIP formats ip as /proc/net/tcp{,6} do: each 32-bit word of the
// address in network order, printed as a native-endian hex number.
func kernelIP(ip netip.Addr) string {
	var b []byte
	if ip.Is4() {
		a := ip.As4()
		b = a[:]
	} else {
		a := ip.As16()
		b = a[:]
	}
	s := make([]byte, 0, 2*len(b))
	for i := 0; i < len(b); i += 4 {
		s = fmt.Appendf(s, "%08X", binary.NativeEndian.Uint32(b[i:i+4]))
	}
	return string(s)
}
