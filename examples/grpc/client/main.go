// Command client calls the example gRPC server's health check -n times
// and prints, for each call, its status, the ratelimit response metadata
// and, on a denial, the delay the server's RetryInfo asks for. With -wait
// it then waits that delay and calls once more.
//
//	go run ./grpc/client -addr 127.0.0.1:50051 -n 4 -wait
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

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "server address")
	n := flag.Int("n", 4, "calls to make")
	wait := flag.Bool("wait", false, "after a denial, wait the retry delay and call once more")
	flag.Parse()

	conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		os.Exit(2)
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)

	var delay time.Duration
	for i := range *n {
		if d := check(client, i+1); d > 0 {
			delay = d
		}
	}
	if *wait && delay > 0 {
		fmt.Printf("waiting %v\n", delay)
		time.Sleep(delay)
		check(client, *n+1)
	}
}

// check makes call number i, prints its outcome, and returns the retry
// delay of a denial (0 otherwise).
func check(client healthpb.HealthClient, i int) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var header metadata.MD
	_, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&header))
	st := status.Convert(err)
	line := fmt.Sprintf("call %d: %v ratelimit=%s", i, st.Code(), strings.Join(header.Get("ratelimit"), ", "))
	var delay time.Duration
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			delay = ri.GetRetryDelay().AsDuration()
			line += fmt.Sprintf(" retry-delay=%v retry-after=%s", delay.Round(time.Millisecond), strings.Join(header.Get("retry-after"), ""))
		}
	}
	if err != nil {
		line += fmt.Sprintf(" message=%q", st.Message())
	}
	fmt.Println(line)
	return delay
}
