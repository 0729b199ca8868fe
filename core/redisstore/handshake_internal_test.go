//go:build linux

package redisstore

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A call whose context ends before its request is written breaks off the
// node's connections whose hello has gone unanswered for handshakeWait,
// as the kernel records what the node sent (see claim.cancel): not one
// whose answer arrived while this process has not read it yet (a busy
// process), nor, after less than handshakeWait, one still waiting; over
// TCP and over a Unix socket alike.
func TestWatchHandshakesReadsTheKernel(t *testing.T) {
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = tcp.Close() })
	unix, err := net.Listen("unix", filepath.Join(t.TempDir(), "node.sock"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = unix.Close() })

	// The node: it answers the hello on a connection whose first bytes
	// are "answer", and never on the others.
	serve := func(ln net.Listener) {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = c.Close() })
			go func() {
				buf := make([]byte, 64)
				n, err := c.Read(buf)
				if err == nil && string(buf[:n]) == "answer" {
					_, _ = c.Write([]byte("+OK\r\n"))
				}
				_, _ = io.Copy(io.Discard, c)
			}()
		}
	}
	go serve(tcp)
	go serve(unix)

	s := &connSet{panics: &panicLog{}}
	open := func(ln net.Listener, hello string) *trackedConn {
		t.Helper()
		raw, err := net.Dial(ln.Addr().Network(), ln.Addr().String())
		require.NoError(t, err)
		t.Cleanup(func() { _ = raw.Close() })
		var c *trackedConn
		switch conn := s.add(raw).(type) {
		case trackedSysConn:
			c = conn.trackedConn
		case *trackedConn:
			c = conn
		}
		_, err = c.Write([]byte(hello))
		require.NoError(t, err)
		return c
	}
	answered := open(tcp, "answer")
	silent := open(tcp, "hello")
	answeredUnix := open(unix, "answer")
	silentUnix := open(unix, "hello")
	require.Eventually(t, func() bool {
		_, received, ok := tcpRecv(answered.tcp)
		queued, uok := unixQueued(answeredUnix.unixRaw)
		return ok && received > 0 && uok && queued > 0
	}, time.Second, time.Millisecond, "the node's answers reach the kernel")

	cl := s.claim("member")
	start := time.Now()
	cl.cancel()
	for _, c := range []*trackedConn{silent, silentUnix} {
		require.False(t, c.kicked.Load(), "a handshake broken off before it waited %v", handshakeWait)
	}
	require.Eventually(t, func() bool { return silent.kicked.Load() && silentUnix.kicked.Load() },
		2*handshakeWait+time.Second, time.Millisecond, "the unanswered handshakes are broken off")
	waited := time.Since(start)
	t.Logf("the unanswered handshakes broken off %v after the call's end", waited)
	require.GreaterOrEqual(t, waited, handshakeWait-50*time.Millisecond)
	time.Sleep(handshakeWait)
	s.unclaim(cl)
	require.False(t, answered.kicked.Load(), "a handshake the node answered, unread, was broken off")
	require.False(t, answeredUnix.kicked.Load(), "a handshake the node answered over a Unix socket, unread, was broken off")

	buf := make([]byte, 5)
	for _, c := range []*trackedConn{answered, answeredUnix} {
		// The answered connections still work: their answers are read.
		require.NoError(t, c.SetReadDeadline(time.Now().Add(time.Second)))
		_, err = io.ReadFull(c, buf)
		require.NoError(t, err)
		require.Equal(t, "+OK\r\n", string(buf))
	}
	for _, c := range []*trackedConn{silent, silentUnix} {
		// And the silent ones fail at once.
		require.NoError(t, c.SetReadDeadline(time.Now().Add(time.Second)))
		_, err = c.Read(buf)
		require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	}
}
