package slideconnect_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"connectrpc.com/connect"
	slideconnect "github.com/slidelog/slidelog/adapters/connect"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/slidelogtest"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// FuzzMiddleware runs slidelogtest.FuzzRPC on unary Connect calls served
// in process (ServeHTTP) by a handler behind the interceptor, with the
// fuzzed header fields and peer; the handler's procedure is fixed.
func FuzzMiddleware(f *testing.F) {
	slidelogtest.FuzzRPC(f, func(l *slidelog.Limiter, opts ...httplimit.Option) slidelogtest.RPCFuzzCall {
		h := connect.NewUnaryHandler(checkProcedure,
			func(context.Context, *connect.Request[healthpb.HealthCheckRequest]) (*connect.Response[healthpb.HealthCheckResponse], error) {
				return connect.NewResponse(&healthpb.HealthCheckResponse{}), nil
			}, connect.WithInterceptors(slideconnect.NewInterceptor(l, opts...)))
		return func(from, _, forwarded, apiKey string) slidelogtest.RPCReply {
			r := httptest.NewRequest(http.MethodPost, checkProcedure, strings.NewReader("{}"))
			r.Header.Set("Content-Type", "application/json")
			// The values as a client may send them: net/http's server
			// passes any byte but CR, LF and NUL on.
			r.Header["X-Forwarded-For"] = []string{forwarded}
			r.Header["X-Api-Key"] = []string{apiKey}
			r.RemoteAddr = net.JoinHostPort(from, "1234")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code == http.StatusOK {
				return slidelogtest.RPCReply{Outcome: slidelogtest.RPCAdmitted}
			}
			// A Connect protocol error: its code and message in JSON.
			var e struct {
				Code    connect.Code `json:"code"`
				Message string       `json:"message"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil {
				return slidelogtest.RPCReply{Outcome: slidelogtest.RPCFailed, Code: http.StatusText(w.Code), Message: w.Body.String()}
			}
			return codeReply(e.Code, e.Message)
		}
	})
}
