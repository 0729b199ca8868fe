// Command client calls the example connect server's health check -n times
// with connect-go's client, over the Connect protocol (the default), gRPC
// or gRPC-Web, and prints, for each call, its code, the RateLimit field
// (a response header when admitted, the error's metadata on a denial) and,
// on a denial, the delay of the server's RetryInfo, Retry-After and
// grpc-retry-pushback-ms.
//
//	go run ./connect/client -url http://127.0.0.1:8080 -n 4 -protocol grpc
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

const checkProcedure = "/grpc.health.v1.Health/Check"

func main() {
	url := flag.String("url", "http://127.0.0.1:8080", "server base URL")
	n := flag.Int("n", 4, "calls to make")
	protocol := flag.String("protocol", "connect", "connect, grpc or grpcweb")
	flag.Parse()

	var opts []connect.ClientOption
	switch *protocol {
	case "connect":
	case "grpc":
		opts = append(opts, connect.WithGRPC())
	case "grpcweb":
		opts = append(opts, connect.WithGRPCWeb())
	default:
		fmt.Fprintf(os.Stderr, "client: -protocol %q, want connect, grpc or grpcweb\n", *protocol)
		os.Exit(2)
	}
	// Cleartext HTTP/2 (h2c), which gRPC needs; Connect and gRPC-Web work
	// over it too.
	transport := &http.Transport{Protocols: new(http.Protocols)}
	transport.Protocols.SetUnencryptedHTTP2(true)
	client := connect.NewClient[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse](
		&http.Client{Transport: transport}, *url+checkProcedure, opts...)
	for i := range *n {
		check(client, i+1)
	}
}

// check makes call number i and prints its outcome.
func check(client *connect.Client[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse], i int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := client.CallUnary(ctx, connect.NewRequest(&healthpb.HealthCheckRequest{}))
	if err == nil {
		fmt.Printf("call %d: ok %v ratelimit=%s\n", i, resp.Msg.GetStatus(), resp.Header().Get("RateLimit"))
		return
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		fmt.Printf("call %d: %v\n", i, err)
		return
	}
	line := fmt.Sprintf("call %d: %v ratelimit=%s", i, ce.Code(), ce.Meta().Get("RateLimit"))
	for _, d := range ce.Details() {
		v, err := d.Value()
		if ri, ok := v.(*errdetails.RetryInfo); ok && err == nil {
			line += fmt.Sprintf(" retry-delay=%v retry-after=%s pushback-ms=%s",
				ri.GetRetryDelay().AsDuration().Round(time.Millisecond),
				ce.Meta().Get("Retry-After"), ce.Meta().Get("Grpc-Retry-Pushback-Ms"))
		}
	}
	fmt.Printf("%s message=%q\n", line, ce.Message())
}
