package slideconnect_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	slideconnect "github.com/slidelog/slidelog/adapters/connect"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/memstore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// TestDenyBeforeRead: behind Interceptor.Handler, five unary calls with
// 50 MiB bodies to a spent budget are denied (429, resource_exhausted)
// before their bodies are read: the process, client and server together,
// allocates less than one body for all five (connect-go reads the whole
// body before an interceptor runs). connect-go's own client gets the
// denial with its metadata, and an admitted call the rate-limit headers
// the interceptor adds to Handler's decision, without a second decision.
func TestDenyBeforeRead(t *testing.T) {
	store := memstore.New()
	t.Cleanup(func() { _ = store.Close() })
	l, err := slidelog.New(store, slidelog.Policy{Name: "peer", Limit: 1, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	limit := slideconnect.NewInterceptor(l)
	var reached atomic.Int64
	h := connect.NewUnaryHandler(checkProcedure,
		func(context.Context, *connect.Request[healthpb.HealthCheckRequest]) (*connect.Response[healthpb.HealthCheckResponse], error) {
			reached.Add(1)
			return connect.NewResponse(&healthpb.HealthCheckResponse{}), nil
		}, connect.WithInterceptors(limit))
	mux := http.NewServeMux()
	mux.Handle(checkProcedure, limit.Handler(h))
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	transport := &http.Transport{Protocols: new(http.Protocols)}
	transport.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(transport.CloseIdleConnections)
	hc := &http.Client{Transport: transport, Timeout: 30 * time.Second}

	client := connect.NewClient[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse](hc, srv.URL+checkProcedure)
	resp, err := client.CallUnary(t.Context(), connect.NewRequest(&healthpb.HealthCheckRequest{}))
	if err != nil {
		t.Fatalf("first call: %v", err)
	}
	if got := resp.Header().Get("RateLimit-Policy"); got != `"peer";q=1;w=60` {
		t.Errorf("admitted: RateLimit-Policy: got %q, want %q", got, `"peer";q=1;w=60`)
	}

	big, err := proto.Marshal(&healthpb.HealthCheckRequest{Service: string(make([]byte, 50<<20))})
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range 5 {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+checkProcedure, bytes.NewReader(big))
		req.Header.Set("Content-Type", "application/proto")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("50 MiB call %d: %v", i+1, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get(slideconnect.PushbackKey) == "" {
			t.Errorf("50 MiB call %d: got %d, header %v, want 429 with %s", i+1, resp.StatusCode, resp.Header, slideconnect.PushbackKey)
		}
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got >= 50<<20 {
		t.Errorf("allocated for five denied 50 MiB calls: got %d MiB, want less than one body (50 MiB)", got>>20)
	} else {
		t.Logf("allocated for five denied 50 MiB calls: %d KiB", got>>10)
	}

	_, err = client.CallUnary(t.Context(), connect.NewRequest(&healthpb.HealthCheckRequest{}))
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeResourceExhausted || ce.Meta().Get("Retry-After") == "" {
		t.Errorf("denied through connect's client: got %v, want resource_exhausted with Retry-After", err)
	}
	conn, err := grpc.NewClient(strings.TrimPrefix(srv.URL, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	var trailer metadata.MD
	_, err = healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{}, grpc.Trailer(&trailer))
	if status.Code(err) != codes.ResourceExhausted || len(trailer.Get(slideconnect.PushbackKey)) == 0 {
		t.Errorf("denied through grpc-go's client: got %v, trailer %v, want ResourceExhausted with %s", err, trailer, slideconnect.PushbackKey)
	}
	if got := reached.Load(); got != 1 {
		t.Errorf("handler calls: got %d, want 1", got)
	}
}
