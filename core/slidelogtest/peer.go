package slidelogtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"
)

// PeerListener wraps a listener so that a test chooses the client address
// of each connection: the address its Accept reports as the connection's
// RemoteAddr, which the gRPC and Connect adapters key calls by by default
// (httplimit.ByClientIP). Over grpc-go's in-memory listener (bufconn)
// there is no client address at all, so every call under the default key
// fails with InvalidArgument; over httptest every client is 127.0.0.1 and
// shares one budget. With a PeerListener each test client is the address
// it says:
//
//	lis := bufconn.Listen(1 << 20)
//	pl := slidelogtest.NewPeerListener(lis, func(ctx context.Context) (net.Conn, error) { return lis.DialContext(ctx) })
//	go srv.Serve(pl)
//	conn, err := grpc.NewClient("passthrough:///bufnet",
//		grpc.WithContextDialer(pl.DialFrom("203.0.113.7")),
//		grpc.WithTransportCredentials(insecure.NewCredentials()))
//
// Every connection must be dialed with DialFrom or ClientFrom: they send
// the address first, in a preamble Accept reads and removes before the
// server sees the connection. A connection without one is closed. It is
// for tests only: a real listener's addresses come from the network.
type PeerListener struct {
	net.Listener
	dial func(context.Context) (net.Conn, error)
	port atomic.Uint32
}

// NewPeerListener returns lis, whose connections report the client address
// their dialer gave; dial opens a connection to lis (bufconn's
// Listener.DialContext, or a net.Dialer to lis.Addr()).
func NewPeerListener(lis net.Listener, dial func(ctx context.Context) (net.Conn, error)) *PeerListener {
	return &PeerListener{Listener: lis, dial: dial}
}

// preambleTimeout bounds how long Accept waits for a connection's
// preamble.
const preambleTimeout = 5 * time.Second

// Accept returns the next connection whose preamble names a client
// address, with that address (and a port of its own) as its RemoteAddr.
func (l *PeerListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip, err := readPreamble(c)
		if err != nil {
			_ = c.Close()
			continue
		}
		port := uint16(1024 + l.port.Add(1)%60000)
		return &peerConn{Conn: c, remote: net.TCPAddrFromAddrPort(netip.AddrPortFrom(ip, port))}, nil
	}
}

func readPreamble(c net.Conn) (netip.Addr, error) {
	_ = c.SetReadDeadline(time.Now().Add(preambleTimeout))
	defer func() { _ = c.SetReadDeadline(time.Time{}) }()
	var n [1]byte
	if _, err := io.ReadFull(c, n[:]); err != nil {
		return netip.Addr{}, err
	}
	b := make([]byte, n[0])
	if _, err := io.ReadFull(c, b); err != nil {
		return netip.Addr{}, err
	}
	return netip.ParseAddr(string(b))
}

// DialFrom returns a dial function, for grpc.WithContextDialer, whose
// connections l reports as coming from ip (IPv4 or IPv6, without a port).
// It panics when ip does not parse, so that a test's typo shows at once.
func (l *PeerListener) DialFrom(ip string) func(ctx context.Context, addr string) (net.Conn, error) {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		panic(fmt.Sprintf("slidelogtest: PeerListener.DialFrom(%q): %v", ip, err))
	}
	preamble := append([]byte{byte(len(a.String()))}, a.String()...)
	return func(ctx context.Context, _ string) (net.Conn, error) {
		c, err := l.dial(ctx)
		if err != nil {
			return nil, err
		}
		if _, err := c.Write(preamble); err != nil {
			_ = c.Close()
			return nil, errors.Join(errors.New("slidelogtest: writing the peer preamble"), err)
		}
		return c, nil
	}
}

// ClientFrom returns an HTTP client, for a Connect client or any request
// to a server on l (such as an httptest.Server whose Listener is l), whose
// connections l reports as coming from ip. Its idle connections are closed
// when the test ends.
func (l *PeerListener) ClientFrom(t testing.TB, ip string) *http.Client {
	dial := l.DialFrom(ip)
	tr := &http.Transport{DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) { return dial(ctx, addr) }}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// peerConn is an accepted connection with the client address of its
// preamble.
type peerConn struct {
	net.Conn
	remote net.Addr
}

func (c *peerConn) RemoteAddr() net.Addr { return c.remote }
