package slideconnect_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"connectrpc.com/connect"
	slideconnect "github.com/slidelog/slidelog/adapters/connect"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/slidelogtest"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/test/bufconn"
)

// TestRPCSuite runs slidelogtest's attack classes against the
// interceptor alone and behind Interceptor.Handler (which decides before
// the body is read).
func TestRPCSuite(t *testing.T) {
	for name, handler := range map[string]bool{"interceptor": false, "Handler": true} {
		t.Run(name, func(t *testing.T) { slidelogtest.RunRPCSuite(t, rpcFactory(handler)) })
	}
}

// rpcFactory serves the Check handler, limited by an Interceptor (and
// its Handler when withHandler), with net/http on three listeners: TCP on
// 127.0.0.1 behind a PeerListener (a peer address per client), a Unix
// socket, and bufconn (no peer address). Calls are connect-go's, over
// the Connect protocol and HTTP/1.1, with header names as written.
func rpcFactory(withHandler bool) slidelogtest.RPCFactory {
	return func(t *testing.T, l *slidelog.Limiter, opts ...httplimit.Option) slidelogtest.RPCCall {
		t.Helper()
		limit := slideconnect.NewInterceptor(l, opts...)
		var h http.Handler = connect.NewUnaryHandler(checkProcedure,
			func(context.Context, *connect.Request[healthpb.HealthCheckRequest]) (*connect.Response[healthpb.HealthCheckResponse], error) {
				return connect.NewResponse(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}), nil
			}, connect.WithInterceptors(limit))
		if withHandler {
			h = limit.Handler(h)
		}
		mux := http.NewServeMux()
		mux.Handle(checkProcedure, h)
		srv := &http.Server{Handler: mux}

		tcp, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		peers := slidelogtest.NewPeerListener(tcp, func(ctx context.Context) (net.Conn, error) {
			return new(net.Dialer).DialContext(ctx, "tcp", tcp.Addr().String())
		})
		dir, err := os.MkdirTemp("", "slidelog-connect-") // short: a socket path is at most ~100 bytes
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
			_ = srv.Close()
			served.Wait()
		})

		var mu sync.Mutex
		clients := map[string]*connect.Client[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse]{}
		client := func(peer string) *connect.Client[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse] {
			mu.Lock()
			defer mu.Unlock()
			if c, ok := clients[peer]; ok {
				return c
			}
			var hc *http.Client
			switch peer {
			case slidelogtest.UnixPeer, slidelogtest.NoAddrPeer:
				tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
					if peer == slidelogtest.UnixPeer {
						return new(net.Dialer).DialContext(ctx, "unix", sock)
					}
					return buf.DialContext(ctx)
				}}
				t.Cleanup(tr.CloseIdleConnections)
				hc = &http.Client{Transport: tr}
			default:
				hc = peers.ClientFrom(t, peer)
			}
			clients[peer] = connect.NewClient[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse](hc, "http://app"+checkProcedure)
			return clients[peer]
		}
		return func(t *testing.T, peer string, header ...string) slidelogtest.RPCReply {
			t.Helper()
			req := connect.NewRequest(&healthpb.HealthCheckRequest{})
			for i := 0; i+1 < len(header); i += 2 {
				req.Header()[header[i]] = append(req.Header()[header[i]], header[i+1]) // the name as written
			}
			_, err := client(peer).CallUnary(t.Context(), req)
			if err == nil {
				return slidelogtest.RPCReply{Outcome: slidelogtest.RPCAdmitted}
			}
			var ce *connect.Error
			if !errors.As(err, &ce) {
				t.Fatalf("call from %s: %v, want a *connect.Error", peer, err)
			}
			return codeReply(ce.Code(), ce.Message())
		}
	}
}

// codeReply is the reply of a call that failed with code and message.
func codeReply(code connect.Code, message string) slidelogtest.RPCReply {
	r := slidelogtest.RPCReply{Code: code.String(), Message: message}
	switch code {
	case connect.CodeResourceExhausted:
		r.Outcome = slidelogtest.RPCDenied
	case connect.CodeInvalidArgument:
		r.Outcome = slidelogtest.RPCInvalid
	default:
		r.Outcome = slidelogtest.RPCFailed
	}
	return r
}
