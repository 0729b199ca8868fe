package redisstore_test

import (
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
)

// linkProxy forwards the TCP connections made to it to a target address,
// on a port of redistest.FreePort. Cut makes it drop every byte, both
// ways, while it keeps the connections open: a partitioned link, which a
// master still counts as a connected replica whose acknowledged offset no
// longer moves. Closing either side of a connection closes the other.
type linkProxy struct {
	ln      net.Listener
	target  atomic.Pointer[string]
	cut     atomic.Bool
	cutBack atomic.Bool // the target's bytes only

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// newLinkProxy starts a proxy to target, closed when the test ends.
func newLinkProxy(t *testing.T, target string) *linkProxy {
	t.Helper()
	var ln net.Listener
	for attempt := 0; ; attempt++ {
		port, err := redistest.FreePort()
		if err == nil {
			ln, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		}
		if err == nil {
			break
		}
		if attempt == 4 {
			t.Fatalf("proxy listener: %v", err)
		}
	}
	p := &linkProxy{ln: ln, conns: make(map[net.Conn]struct{})}
	p.target.Store(&target)
	p.wg.Go(p.serve)
	t.Cleanup(p.close)
	return p
}

// Addr is the address to dial instead of the target's.
func (p *linkProxy) Addr() string { return p.ln.Addr().String() }

// Cut drops every byte from now on, both ways, on every connection.
func (p *linkProxy) Cut() { p.cut.Store(true) }

// CutReplies drops every byte the target sends from now on, until
// MendReplies: requests arrive, their replies never do.
func (p *linkProxy) CutReplies() { p.cutBack.Store(true) }

// MendReplies forwards the target's bytes again.
func (p *linkProxy) MendReplies() { p.cutBack.Store(false) }

// Retarget sends the connections made from now on to target and closes
// those open (an address that moved to another server).
func (p *linkProxy) Retarget(target string) {
	p.target.Store(&target)
	p.Drop()
}

// Drop closes the connections open now (a network blip).
func (p *linkProxy) Drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
}

func (p *linkProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.DialTimeout("tcp", *p.target.Load(), time.Second)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = c.Close()
			_ = up.Close()
			return
		}
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(c, up, &p.cut) })
		p.wg.Go(func() { p.pipe(up, c, &p.cutBack) })
	}
}

// pipe copies from one side to the other, dropping what it reads while
// the proxy is cut (or this direction is, by dir), until either side
// fails.
func (p *linkProxy) pipe(from, to net.Conn, dir *atomic.Bool) {
	defer func() {
		_ = from.Close()
		_ = to.Close()
		p.mu.Lock()
		delete(p.conns, from)
		delete(p.conns, to)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 && !p.cut.Load() && !dir.Load() {
			if _, werr := to.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *linkProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
