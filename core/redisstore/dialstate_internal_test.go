//go:build linux

package redisstore

import (
	"context"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/stretchr/testify/require"
)

// rawConnect starts a non-blocking connect to addr on a socket Go's net
// package does not know of, as a dial in progress has, and returns its
// descriptor.
func rawConnect(t *testing.T, addr string) int {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Close(fd) })
	sa := &syscall.SockaddrInet4{Port: p}
	copy(sa.Addr[:], net.ParseIP(host).To4())
	if err := syscall.Connect(fd, sa); err != nil && err != syscall.EINPROGRESS {
		t.Fatalf("connect %s: %v", addr, err)
	}
	return fd
}

// blackhole returns the address of a loopback listener whose accept
// queue is full: the kernel drops the SYNs of further connects, which
// stay in SYN_SENT, as a dial to a node that does not answer does.
func blackhole(t *testing.T) string {
	t.Helper()
	addr, _ := blackholeFd(t)
	return addr
}

// blackholeFd is blackhole, returning also the socket left in SYN_SENT.
func blackholeFd(t *testing.T) (string, int) {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Close(fd) })
	require.NoError(t, syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	require.NoError(t, syscall.Listen(fd, 0))
	sa, err := syscall.Getsockname(fd)
	require.NoError(t, err)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
	// Fill the queue: connects the kernel completes until one stays in
	// SYN_SENT.
	for range 8 {
		c := rawConnect(t, addr)
		time.Sleep(20 * time.Millisecond)
		if sent, ok := synSent([]string{addr}); ok && sent {
			return addr, c
		}
	}
	t.Fatalf("no connect to %s stayed in SYN_SENT", addr)
	return "", -1
}

// A dial the node has not answered is in SYN_SENT; one whose handshake
// the kernel completed is not, whether or not this process has run the
// goroutine waiting on it; another node's address never matches.
func TestSynSent(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	healthy := ln.Addr().String()
	rawConnect(t, healthy)
	require.Eventually(t, func() bool {
		sent, ok := synSent([]string{healthy})
		return ok && !sent
	}, time.Second, 5*time.Millisecond, "a completed connect to %s read as SYN_SENT", healthy)

	hole := blackhole(t)
	sent, ok := synSent([]string{hole})
	require.True(t, ok)
	require.True(t, sent, "a connect to the full listener %s is in SYN_SENT", hole)
	sent, ok = synSent([]string{healthy})
	require.True(t, ok)
	require.False(t, sent, "the full listener's SYN_SENT sockets matched %s", healthy)
	sent, ok = synSent([]string{healthy, hole})
	require.True(t, ok && sent, "either address")

	// A host name matches on the port alone; with no socket in SYN_SENT
	// its dial is unknown, since it may be resolving the name.
	_, port, _ := net.SplitHostPort(hole)
	sent, ok = synSent([]string{"localhost:" + port})
	require.True(t, ok && sent)
	_, hport, _ := net.SplitHostPort(healthy)
	_, ok = synSent([]string{"localhost:" + hport})
	require.False(t, ok, "a named node with no SYN_SENT socket is unknown")

	_, ok = synSent([]string{"no-port"})
	require.False(t, ok, "an address without a port is unknown")

	// Another process's connect in SYN_SENT to the same node is not this
	// process's dial.
	other, mine := blackholeFd(t)
	require.NoError(t, syscall.Close(mine))
	_, port, _ = net.SplitHostPort(other)
	child := exec.Command("bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/"+port)
	require.NoError(t, child.Start(), "bash opens the connect")
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	require.Eventually(t, func() bool {
		socks, err := synSentSockets(syscall.AF_INET)
		require.NoError(t, err)
		for _, s := range socks {
			if strconv.Itoa(int(s.dst.Port())) == port {
				return true
			}
		}
		return false
	}, 5*time.Second, 10*time.Millisecond, "the child's connect to %s in SYN_SENT", other)
	sent, ok = synSent([]string{other})
	require.True(t, ok)
	require.False(t, sent, "another process's SYN_SENT socket taken for this one's")
}

// A connection set's evidence while a dial is in progress: owed from the
// dial's start while its socket is in SYN_SENT, nothing owed (and nothing
// unknown) once the kernel completed the handshake, however long the
// goroutine waiting on it takes to run, unless the dial ends with a TLS
// handshake (then unknown).
func TestDialEvidence(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	healthy := ln.Addr().String()
	rawConnect(t, healthy)

	var answered connSet
	d := answered.dialStart(healthy, false)
	time.Sleep(30 * time.Millisecond)
	ev := answered.silence()
	require.False(t, ev.owed, "a completed dial owes nothing: %+v", ev)
	require.False(t, ev.unknown, "a completed dial is known: %+v", ev)
	answered.dialEnd(d)
	require.Empty(t, answered.dials)
	require.Zero(t, answered.dialing.Load())

	hole := blackhole(t)
	var silent connSet
	d = silent.dialStart(hole, false)
	time.Sleep(50 * time.Millisecond)
	ev = silent.silence()
	require.True(t, ev.owed, "an unanswered dial is owed: %+v", ev)
	require.False(t, ev.unknown)
	require.GreaterOrEqual(t, ev.silence, 50*time.Millisecond, "owed from the dial's start")
	silent.dialEnd(d)
	ev = silent.silence()
	require.False(t, ev.owed || ev.unknown, "no dial left: %+v", ev)

	// A TLS dial: owed while in SYN_SENT, as any; once connected it may
	// wait for the node's answer to its hello, which the kernel does not
	// show, so it is unknown rather than owing nothing.
	var hello connSet
	d = hello.dialStart(healthy, true)
	time.Sleep(30 * time.Millisecond)
	ev = hello.silence()
	require.False(t, ev.owed, "%+v", ev)
	require.True(t, ev.unknown, "a connected TLS dial may wait for the node: %+v", ev)
	hello.dialEnd(d)
	var helloHole connSet
	d = helloHole.dialStart(hole, true)
	time.Sleep(50 * time.Millisecond)
	ev = helloHole.silence()
	require.True(t, ev.owed, "an unanswered TLS dial is owed: %+v", ev)
	require.False(t, ev.unknown)
	helloHole.dialEnd(d)
}

// A dial whose handshake the kernel completed but whose goroutine this
// process runs late (here: the dialer sleeps after connecting, as a
// starved process's would) is not the node's silence: the call gets its
// decision, not ErrStalled. A dial the node never answers ends with
// ErrStalled within about the stall timeout, not go-redis's dial timeout.
func TestDialWaitsAreTheProcesses(t *testing.T) {
	addr := os.Getenv("SLIDELOG_REDIS_ADDR")
	if addr == "" {
		t.Fatal("SLIDELOG_REDIS_ADDR is not set: start the test servers (scripts/redis-rig.sh up)")
	}
	const stall = 100 * time.Millisecond
	// The servers' version is read through a client of its own, so that
	// the stores' clients dial only when they decide.
	probe := redis.NewClient(&redis.Options{Addr: addr})
	defer probe.Close()
	req := func(key string) slidelog.Request {
		return slidelog.Request{Namespace: "dialwait", Key: key, Cost: 1, Policies: []slidelog.Policy{{Limit: 5, Window: time.Minute}}, ID: uint64(time.Now().UnixNano())}
	}

	late := redis.NewClient(&redis.Options{Addr: addr, Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		time.Sleep(6 * stall) // connected; the goroutine "runs" late
		return c, err
	}})
	defer late.Close()
	s, err := NewUnchecked(late, WithStallTimeout(stall), WithKeyPrefix("dialwait-"+strconv.FormatInt(time.Now().UnixNano(), 36)+":"))
	require.NoError(t, err)
	require.NoError(t, MatchServer(t.Context(), s, probe))
	defer s.Close()
	start := time.Now()
	res, err := s.Take(t.Context(), req("late"))
	require.NoError(t, err, "a dial the kernel completed was judged as the node's silence")
	require.True(t, res.Allowed)
	require.GreaterOrEqual(t, time.Since(start), 6*stall)
	require.NoError(t, s.Reset(t.Context(), req("late")))

	// The dial's own timeout is well past the stall timeout; the test
	// waits it out at the end, so that no dial outlives it.
	hole := redis.NewClient(&redis.Options{Addr: blackhole(t), DialTimeout: 30 * stall, MaxRetries: -1})
	defer hole.Close()
	s2, err := NewUnchecked(hole, WithStallTimeout(stall))
	require.NoError(t, err)
	defer s2.Close()
	start = time.Now()
	_, err = s2.Take(t.Context(), req("hole"))
	took := time.Since(start)
	require.ErrorIs(t, err, slidelog.ErrStalled, "after %v", took)
	require.Less(t, took, 20*stall, "an unanswered dial is judged by the stall timeout")
	cs := s2.pipes.connSet("")
	require.Eventually(t, func() bool { return cs.dialing.Load() == 0 }, 60*stall, stall, "the dial ends with its timeout")
}

// BenchmarkSynSent is one look at the kernel's SYN_SENT sockets, as the
// stall monitor takes on a tick while a dial is in progress, beside 1,000
// established loopback connections that the kernel's filter skips.
func BenchmarkSynSent(b *testing.B) {
	addrs := []string{connectedNode(b, false)}
	for b.Loop() {
		if _, ok := synSent(addrs); !ok {
			b.Fatal("unknown")
		}
	}
}

// connectedNode returns the address of a loopback listener to which this
// process holds 1,000 connections, each having read the listener's
// greeting when greet is set.
func connectedNode(b *testing.B, greet bool) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.Cleanup(func() { _ = c.Close() })
			if greet {
				_, _ = c.Write([]byte("+OK\r\n"))
			}
		}
	}()
	buf := make([]byte, 8)
	for range 1000 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = c.Close() })
		if greet {
			if _, err := c.Read(buf); err != nil {
				b.Fatal(err)
			}
		}
	}
	return ln.Addr().String()
}

// heardFrom dates the node's last bytes on this process's connections as
// the kernel recorded them, read or not, the most recent of them whether
// or not bytes older wait unread elsewhere; another process's connection
// to the same node, and a node this process has no connection to, tell
// nothing.
func TestHeardFrom(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	node := ln.Addr().String()

	_, heard, ok := heardFrom(node)
	require.True(t, ok, "the kernel answers for %s", node)
	require.False(t, heard, "no connection to %s yet, but heard from", node)
	// A Unix socket's node is unknown to the kernel's TCP table.
	b := &batcher{node: "/tmp/redis.sock"}
	b.silence = time.Second
	_, stalled := b.aliveSilence(100 * time.Millisecond)
	require.True(t, stalled)
	require.Equal(t, "unknown", b.kernelSaid)

	// Another process's connection to the node, with bytes from it
	// waiting unread, is not this process's.
	child := exec.Command("bash", "-c", "exec 3<>/dev/tcp/"+strings.ReplaceAll(node, ":", "/")+"; sleep 30")
	require.NoError(t, child.Start(), "bash opens a connection")
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	theirs, err := ln.Accept()
	require.NoError(t, err)
	defer theirs.Close()
	_, err = theirs.Write([]byte("+OK\r\n"))
	require.NoError(t, err)
	time.Sleep(20 * time.Millisecond)
	_, heard, ok = heardFrom(node)
	require.True(t, ok)
	require.False(t, heard, "another process's connection to %s taken for this one's", node)

	c, srv := connPair(t, ln)
	_, err = srv.Write([]byte("+PONG\r\n"))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		ago, heard, ok := heardFrom(node)
		return ok && heard && ago < time.Second
	}, time.Second, 5*time.Millisecond, "the reply waiting unread on this process's connection to %s", node)

	// The kernel's filter: the sockets to the node's port alone, where
	// the whole table holds others (the accepted ends, to this process's
	// ports).
	ap := netip.MustParseAddrPort(node)
	all, err := tcpSockets(syscall.AF_INET, tcpEstablished, true, 0)
	require.NoError(t, err)
	socks, err := tcpSockets(syscall.AF_INET, tcpEstablished, true, ap.Port())
	require.NoError(t, err)
	require.NotEmpty(t, socks, "no socket to %s passed the kernel's filter", node)
	require.Greater(t, len(all), len(socks), "the filter kept every socket")
	for _, s := range socks {
		require.Equal(t, ap.Port(), s.dst.Port(), "the kernel's filter let a socket to another port through")
	}

	// Read: the kernel still dates its arrival, and the date ages.
	buf := make([]byte, 16)
	_, err = c.Read(buf)
	require.NoError(t, err)
	time.Sleep(300 * time.Millisecond)
	ago, heard, ok := heardFrom(node)
	require.True(t, ok && heard, "a read reply still dates the node's last bytes")
	require.GreaterOrEqual(t, ago, 250*time.Millisecond, "the kernel's date of the last bytes")
	require.Less(t, ago, 5*time.Second)

	// Bytes left unread on one connection (a reader stuck) do not hide a
	// more recent answer read on another: the date is the most recent.
	c2, srv2 := connPair(t, ln)
	_, err = srv2.Write([]byte("+PONG\r\n"))
	require.NoError(t, err)
	time.Sleep(300 * time.Millisecond) // c2's reply waits unread, aging
	_, err = srv.Write([]byte("+PONG\r\n"))
	require.NoError(t, err)
	_, err = c.Read(buf)
	require.NoError(t, err)
	ago, heard, ok = heardFrom(node)
	require.True(t, ok && heard)
	require.Less(t, ago, 200*time.Millisecond, "an older reply left unread on %v was taken for the node's last bytes", c2.LocalAddr())

	for _, a := range []string{"localhost:6379", "/tmp/redis.sock", "", "no-port"} {
		_, _, ok := heardFrom(a)
		require.False(t, ok, "%q is not an IP address and port: unknown", a)
	}
}

// A node judged in alive time is not judged stalled while the kernel
// dates its bytes on this process's connections more recently than the
// stall timeout: a process too busy to run the goroutine a reply is for
// does not make a healthy node silent. Bytes left unread count from their
// arrival. Once the kernel's
// record is as old as the silence, or the node has no connection of
// this process's, alive time judges alone.
func TestAliveSilenceAsksTheKernel(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	node := ln.Addr().String()
	const stall = 150 * time.Millisecond

	b := &batcher{node: node}
	b.silence = 165 * time.Millisecond
	silence, stalled := b.aliveSilence(stall)
	require.True(t, stalled, "no connection to %s: alive time judges alone", node)
	require.Equal(t, 165*time.Millisecond, silence)
	require.Equal(t, "nothing", b.kernelSaid, "what the verdict's line says the kernel recorded")

	c, srv := connPair(t, ln)
	// A connection the node's kernel accepted, with no byte from the
	// node yet, is no answer: a stopped Redis's kernel completes
	// handshakes too.
	time.Sleep(20 * time.Millisecond)
	b.silence = 165 * time.Millisecond
	silence, stalled = b.aliveSilence(stall)
	require.True(t, stalled, "a connection that has received nothing from %s was taken for its answer (%v)", node, silence)
	require.Equal(t, "nothing", b.kernelSaid)

	_, err = srv.Write([]byte("+PONG\r\n"))
	require.NoError(t, err)
	time.Sleep(20 * time.Millisecond)
	b.silence = 165 * time.Millisecond
	silence, stalled = b.aliveSilence(stall)
	require.False(t, stalled, "the node's reply waits unread on this process's connection, yet %s was judged stalled after %v", node, silence)
	require.Less(t, silence, stall, "unread bytes count from their arrival")

	// Read but not yet acted on: the kernel's date still counts.
	buf := make([]byte, 16)
	_, err = c.Read(buf)
	require.NoError(t, err)
	b.silence = 165 * time.Millisecond
	silence, stalled = b.aliveSilence(stall)
	require.False(t, stalled, "the node's reply arrived %v ago, yet %s was judged stalled", silence, node)
	require.Less(t, silence, stall)

	// The kernel's record ages past the stall timeout: alive time's
	// silence, the shorter, judges.
	time.Sleep(2 * stall)
	b.silence = 165 * time.Millisecond
	silence, stalled = b.aliveSilence(stall)
	require.True(t, stalled, "%s silent for %v by both measures, not judged", node, silence)
	require.Equal(t, 165*time.Millisecond, silence)

	// A single server's address is the store's, not the batcher's.
	addr := node
	single := &batcher{master: &atomic.Pointer[string]{}}
	single.master.Store(&addr)
	_, err = srv.Write([]byte("+PONG\r\n"))
	require.NoError(t, err)
	time.Sleep(20 * time.Millisecond)
	single.silence = 165 * time.Millisecond
	_, stalled = single.aliveSilence(stall)
	require.False(t, stalled, "a single server's node %s answered, yet judged stalled", node)
}

// BenchmarkHeardFrom is one look at the kernel's record of a node before
// a verdict in alive time, with 1,000 connections of this process's to
// the node, each having received a byte, beside their 1,000 accepted
// ends.
func BenchmarkHeardFrom(b *testing.B) {
	node := connectedNode(b, true)
	for b.Loop() {
		if _, heard, ok := heardFrom(node); !ok || !heard {
			b.Fatal("the node's bytes not found")
		}
	}
}

// connPair returns a connection to ln and its accepted end, closed when
// the test ends.
func connPair(t *testing.T, ln net.Listener) (c, srv net.Conn) {
	t.Helper()
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	srv, err = ln.Accept()
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	return c, srv
}
