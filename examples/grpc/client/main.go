// Command client calls the example gRPC server's health check -n times
// and prints, for each call, its status, the ratelimit metadata (response
// header metadata when admitted; trailers on a denial, which is a
// trailers-only response) and, on a denial, the delay the server's
// RetryInfo asks for and its grpc-retry-pushback-ms. With -wait it then
// waits that delay and calls once more. With -retry it instead gives the
// connection gRPC's standard retry policy for RESOURCE_EXHAUSTED, so that
// grpc-go itself waits the server's pushback and retries a denied call.
//
//	go run ./grpc/client -addr 127.0.0.1:50051 -n 4 -wait
//	go run ./grpc/client -addr 127.0.0.1:50051 -n 4 -retry
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// retryPolicy is gRPC's standard retry policy for RESOURCE_EXHAUSTED: a
// denied call is retried after the server's grpc-retry-pushback-ms.
const retryPolicy = `{"methodConfig": [{
  "name": [{"service": "grpc.health.v1.Health"}],
  "retryPolicy": {
    "maxAttempts": 3, "initialBackoff": "0.1s", "maxBackoff": "1s",
    "backoffMultiplier": 2, "retryableStatusCodes": ["RESOURCE_EXHAUSTED"]
  }
}]}`

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "server address")
	n := flag.Int("n", 4, "calls to make")
	wait := flag.Bool("wait", false, "after a denial, wait the retry delay and call once more")
	retry := flag.Bool("retry", false, "give grpc-go a retry policy for RESOURCE_EXHAUSTED (it obeys the server's pushback)")
	timeout := flag.Duration("timeout", 10*time.Second, "deadline of each call, retries included")
	flag.Parse()

	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if *retry {
		opts = append(opts, grpc.WithDefaultServiceConfig(retryPolicy))
	}
	conn, err := grpc.NewClient(*addr, opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		os.Exit(2)
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)

	var delay time.Duration
	for i := range *n {
		if d := check(client, i+1, *timeout); d > 0 {
			delay = d
		}
	}
	if *wait && delay > 0 {
		fmt.Printf("waiting %v\n", delay)
		time.Sleep(delay)
		check(client, *n+1, *timeout)
	}
}

// check makes call number i, prints its outcome, and returns the retry
// delay of a denial (0 otherwise).
func check(client healthpb.HealthClient, i int, timeout time.Duration) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var header, trailer metadata.MD
	start := time.Now()
	_, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&header), grpc.Trailer(&trailer))
	elapsed := time.Since(start)
	st := status.Convert(err)
	md := header
	if err != nil {
		md = trailer // a denial sends its metadata in the trailers only
	}
	line := fmt.Sprintf("call %d: %v ratelimit=%s", i, st.Code(), strings.Join(md.Get("ratelimit"), ", "))
	var delay time.Duration
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			delay = ri.GetRetryDelay().AsDuration()
			line += fmt.Sprintf(" retry-delay=%v retry-after=%s pushback-ms=%s", delay.Round(time.Millisecond),
				strings.Join(md.Get("retry-after"), ""), strings.Join(md.Get("grpc-retry-pushback-ms"), ""))
		}
	}
	if err != nil {
		line += fmt.Sprintf(" message=%q", st.Message())
	}
	if elapsed >= 100*time.Millisecond {
		line += fmt.Sprintf(" (after %v)", elapsed.Round(10*time.Millisecond))
	}
	fmt.Println(line)
	return delay
}
