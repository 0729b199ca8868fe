package slidegrpc_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	slidegrpc "github.com/slidelog/slidelog/adapters/grpc"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/slidelogtest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
)

// TestRPCSuite runs slidelogtest's attack classes against the
// interceptors and against ServerOption (which decides in its tap once a
// method's first call has reached its handler).
func TestRPCSuite(t *testing.T) {
	for name, limit := range map[string]func(*slidelog.Limiter, ...httplimit.Option) []grpc.ServerOption{
		"interceptors": interceptors,
		"ServerOption": func(l *slidelog.Limiter, opts ...httplimit.Option) []grpc.ServerOption {
			return []grpc.ServerOption{slidegrpc.ServerOption(l, opts...)}
		},
	} {
		t.Run(name, func(t *testing.T) { slidelogtest.RunRPCSuite(t, rpcFactory(limit)) })
	}
}

// rpcFactory serves the test service limited by limit on three
// listeners: TCP on 127.0.0.1 behind a PeerListener (a peer address per
// client), a Unix socket, and bufconn (no peer address). A call goes
// through grpc-go's client, or, when a metadata value holds a byte
// grpc-go's client refuses to send (a tab), as a gRPC request of
// net/http's HTTP/2 client, which sends it.
func rpcFactory(limit func(*slidelog.Limiter, ...httplimit.Option) []grpc.ServerOption) slidelogtest.RPCFactory {
	return func(t *testing.T, l *slidelog.Limiter, opts ...httplimit.Option) slidelogtest.RPCCall {
		t.Helper()
		srv := grpc.NewServer(limit(l, opts...)...)
		testgrpc.RegisterTestServiceServer(srv, &testService{calls: make(chan string, 1<<14)})

		tcp, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		peers := slidelogtest.NewPeerListener(tcp, func(ctx context.Context) (net.Conn, error) {
			return new(net.Dialer).DialContext(ctx, "tcp", tcp.Addr().String())
		})
		dir, err := os.MkdirTemp("", "slidelog-grpc-") // short: a socket path is at most ~100 bytes
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
		sock := filepath.Join(dir, "app.sock")
		unix, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		buf := bufconn.Listen(1 << 20)
		var served sync.WaitGroup
		for _, lis := range []net.Listener{peers, unix, buf} {
			served.Go(func() { _ = srv.Serve(lis) })
		}
		t.Cleanup(func() {
			srv.Stop()
			served.Wait()
		})

		dialer := func(peer string) func(context.Context, string) (net.Conn, error) {
			switch peer {
			case slidelogtest.UnixPeer:
				return func(ctx context.Context, _ string) (net.Conn, error) {
					return new(net.Dialer).DialContext(ctx, "unix", sock)
				}
			case slidelogtest.NoAddrPeer:
				return func(ctx context.Context, _ string) (net.Conn, error) { return buf.DialContext(ctx) }
			}
			return peers.DialFrom(peer)
		}
		var mu sync.Mutex
		clients := map[string]testgrpc.TestServiceClient{}
		client := func(peer string) testgrpc.TestServiceClient {
			mu.Lock()
			defer mu.Unlock()
			if c, ok := clients[peer]; ok {
				return c
			}
			conn, err := grpc.NewClient("passthrough:///app", grpc.WithContextDialer(dialer(peer)),
				grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = conn.Close() })
			clients[peer] = testgrpc.NewTestServiceClient(conn)
			return clients[peer]
		}
		return func(t *testing.T, peer string, header ...string) slidelogtest.RPCReply {
			t.Helper()
			for i := 1; i < len(header); i += 2 {
				if strings.ContainsFunc(header[i], func(r rune) bool { return r < 0x20 || r > 0x7e }) {
					return rawCall(t, dialer(peer), header...)
				}
			}
			ctx := t.Context()
			if len(header) > 0 {
				ctx = metadata.AppendToOutgoingContext(ctx, header...)
			}
			_, err := client(peer).EmptyCall(ctx, &testgrpc.Empty{})
			return rpcReply(status.Convert(err))
		}
	}
}

// rpcReply is the reply of a call that ended with st.
func rpcReply(st *status.Status) slidelogtest.RPCReply {
	r := slidelogtest.RPCReply{Code: st.Code().String(), Message: st.Message()}
	switch st.Code() {
	case codes.OK:
		r.Outcome = slidelogtest.RPCAdmitted
	case codes.ResourceExhausted:
		r.Outcome = slidelogtest.RPCDenied
	case codes.InvalidArgument:
		r.Outcome = slidelogtest.RPCInvalid
	default:
		r.Outcome = slidelogtest.RPCFailed
	}
	return r
}

// rawCall makes an EmptyCall with header as metadata, values as they
// are, as a gRPC request of net/http's cleartext HTTP/2 client over a
// connection of dial.
func rawCall(t *testing.T, dial func(context.Context, string) (net.Conn, error), header ...string) slidelogtest.RPCReply {
	t.Helper()
	tr := &http.Transport{Protocols: new(http.Protocols), DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) { return dial(ctx, addr) }}
	tr.Protocols.SetUnencryptedHTTP2(true)
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://app"+emptyCall, bytes.NewReader(make([]byte, 5))) // an empty message
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("TE", "trailers")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatalf("raw gRPC call: %v", err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatalf("raw gRPC call: reading the response: %v", err)
	}
	code, msg := resp.Header.Get("Grpc-Status"), resp.Header.Get("Grpc-Message") // trailers-only
	if code == "" {
		code, msg = resp.Trailer.Get("Grpc-Status"), resp.Trailer.Get("Grpc-Message")
	}
	var c codes.Code
	if err := c.UnmarshalJSON([]byte(code)); err != nil {
		t.Fatalf("raw gRPC call: grpc-status %q (HTTP %d): %v", code, resp.StatusCode, err)
	}
	return rpcReply(status.New(c, msg))
}
