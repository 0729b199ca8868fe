//go:build linux

package redisstore

import (
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// On a Unix socket the kernel counts the bytes waiting unread, not those
// it delivered: a read whose system call took the node's answer and whose
// thread then waits for a CPU would leave the node looking silent.
// readUnix keeps taking set from before its call until it has counted
// what the call took, so the node's answer counts as one while it waits
// unread, while a read that took it has not counted it, and once
// counted; only a request with no answer is owed. Seen to fail with
// taking not consulted: "an answer taken by a read that has not counted
// it".
func TestUnixReadCountsAnswerBeforeTakingIt(t *testing.T) {
	ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "node.sock"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	replies := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		t.Cleanup(func() { _ = c.Close() })
		buf := make([]byte, 64)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
			if r := <-replies; r != "" {
				_, _ = c.Write([]byte(r))
			}
		}
	}()

	s := &connSet{panics: &panicLog{}}
	raw, err := net.Dial("unix", ln.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = raw.Close() })
	c := s.add(raw).(trackedSysConn).trackedConn
	require.NotNil(t, c.unix)

	// A request with no answer yet: owed, by the kernel's record.
	replies <- ""
	_, err = c.Write([]byte("PING\r\n"))
	require.NoError(t, err)
	time.Sleep(20 * time.Millisecond)
	ev := s.silence()
	require.True(t, ev.owed, "a request with no answer: %+v", ev)
	require.False(t, ev.unknown, "a Unix socket's record was not read: %+v", ev)
	require.GreaterOrEqual(t, ev.silence, 15*time.Millisecond)
	_, waiting := c.handshake()
	require.True(t, waiting, "nothing read yet and nothing come: the hello waits")

	// The answer comes and waits unread.
	replies <- "+PONG\r\n"
	_, err = c.Write([]byte("PING\r\n"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { q, ok := unixQueued(c.unixRaw); return ok && q > 0 }, time.Second, time.Millisecond)
	ev = s.silence()
	require.True(t, ev.answered && !ev.owed, "an answer waiting unread: %+v", ev)

	// A read takes it and, before it counts it, the monitor looks: as
	// when the reading thread waits for a CPU between the two.
	var during evidence
	var waitingDuring bool
	testHookUnixRead = func(n int) {
		if n > 0 {
			during = s.silence()
			_, waitingDuring = c.handshake()
		}
	}
	t.Cleanup(func() { testHookUnixRead = nil })
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	require.NoError(t, err)
	require.Equal(t, "+PONG\r\n", string(buf[:n]))
	require.True(t, during.answered && !during.owed, "an answer taken by a read that has not counted it: %+v", during)
	require.False(t, waitingDuring, "an answer taken by a read that has not counted it: the hello waits")
	testHookUnixRead = nil
	ev = s.silence()
	require.False(t, ev.owed || ev.answered || ev.unknown, "every answer read: %+v", ev)
}
