package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestGRPCExample runs the gRPC example server on the memory store and
// its client against it: limit calls admitted with their ratelimit
// metadata, then one denied with ResourceExhausted, a RetryInfo delay
// within the window and retry-after as that delay rounded up.
func TestGRPCExample(t *testing.T) {
	const limit = 3
	server, client := build(t, "grpc/server"), build(t, "grpc/client")
	srv := start(t, server, nil, limit)
	addr := strings.TrimPrefix(srv.base, "http://")
	out, err := exec.CommandContext(t.Context(), client, "-addr", addr, "-n", strconv.Itoa(limit+1)).CombinedOutput()
	if err != nil {
		t.Fatalf("client: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != limit+1 {
		t.Fatalf("client printed %d lines, want %d:\n%s", len(lines), limit+1, out)
	}
	for i := range limit {
		want := fmt.Sprintf(`call %d: OK ratelimit="per-minute";r=%d;t=60`, i+1, limit-i-1)
		if lines[i] != want {
			t.Errorf("line %d: got %q, want %q", i+1, lines[i], want)
		}
	}
	denied := regexp.MustCompile(`^call 4: ResourceExhausted ratelimit="per-minute";r=0;t=60 retry-delay=(\S+) retry-after=(\d+) pushback-ms=(\d+) message="rate limit exceeded; retry after (\d+) seconds?"$`)
	m := denied.FindStringSubmatch(lines[limit])
	if m == nil {
		t.Fatalf("line %d: got %q, want a ResourceExhausted with a retry delay", limit+1, lines[limit])
	}
	delay, err := time.ParseDuration(m[1])
	if err != nil || delay <= 0 || delay > time.Minute {
		t.Errorf("retry delay: got %q, want in (0, 1m]", m[1])
	}
	// The client prints the delay rounded to milliseconds, so its
	// ceiling in seconds may differ from the server's by one.
	after, _ := strconv.Atoi(m[2])
	if ms, _ := strconv.Atoi(m[3]); time.Duration(ms)*time.Millisecond < delay-time.Millisecond || time.Duration(ms)*time.Millisecond > delay+2*time.Millisecond {
		t.Errorf("grpc-retry-pushback-ms %s: want the delay %v in ms", m[3], delay)
	}
	m[3] = m[4]
	if m[2] != m[3] || after < 1 || after > 60 || time.Duration(after)*time.Second-delay >= time.Second+time.Millisecond || delay > time.Duration(after)*time.Second+time.Millisecond {
		t.Errorf("retry-after %s, message %s: want both the delay %v in whole seconds, rounded up", m[2], m[3], delay)
	}
}

// TestConnectExample runs the connect example server and its client over
// the Connect protocol, then over gRPC: limit calls admitted with their
// RateLimit header, then denials with resource_exhausted, a RetryInfo
// delay and the pushback, whichever protocol asks.
func TestConnectExample(t *testing.T) {
	const limit = 2
	server, client := build(t, "connect/server"), build(t, "connect/client")
	srv := start(t, server, nil, limit)
	run := func(protocol string, n int) []string {
		out, err := exec.CommandContext(t.Context(), client, "-url", srv.base, "-n", strconv.Itoa(n), "-protocol", protocol).CombinedOutput()
		if err != nil {
			t.Fatalf("client -protocol %s: %v\n%s", protocol, err, out)
		}
		return strings.Split(strings.TrimSpace(string(out)), "\n")
	}
	lines := run("connect", limit+1)
	for i := range limit {
		if want := fmt.Sprintf(`call %d: ok SERVING ratelimit="per-minute";r=%d;t=60`, i+1, limit-i-1); lines[i] != want {
			t.Errorf("line %d: got %q, want %q", i+1, lines[i], want)
		}
	}
	denied := regexp.MustCompile(`^call \d: resource_exhausted ratelimit="per-minute";r=0;t=60 retry-delay=\S+ retry-after=\d+ pushback-ms=\d+ message="rate limit exceeded; retry after \d+ seconds?"$`)
	if len(lines) != limit+1 || !denied.MatchString(lines[limit]) {
		t.Errorf("connect: got %q, want %d admissions and a denial", lines, limit)
	}
	if lines := run("grpc", 1); !denied.MatchString(lines[0]) {
		t.Errorf("grpc: got %q, want a denial from the same budget", lines[0])
	}
}

// TestRPCExamplesHelp: the gRPC and connect servers' -h lists their flags
// and environment variables.
func TestRPCExamplesHelp(t *testing.T) {
	for _, ex := range []string{"grpc/server", "connect/server"} {
		t.Run(ex, func(t *testing.T) {
			out, _ := exec.CommandContext(t.Context(), build(t, ex), "-h").CombinedOutput()
			for _, want := range []string{"-addr", "-metrics-addr", "-limit", "-window", envRedisAddrs, envKeyPrefix, "SLIDELOG_KEY_SECRET"} {
				if !strings.Contains(string(out), want) {
					t.Errorf("-h does not mention %s:\n%s", want, out)
				}
			}
		})
	}
}

// TestExamplesFailOnBusyMetricsAddr: every example server given a
// -metrics-addr that cannot be bound (another listener holds it) exits
// non-zero at start with the error, instead of serving without metrics.
func TestExamplesFailOnBusyMetricsAddr(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = busy.Close() })
	for _, ex := range append([]string{"grpc/server", "connect/server"}, frameworks...) {
		t.Run(ex, func(t *testing.T) {
			bin := build(t, ex)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // an example that keeps running is killed: exit code -1
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "-addr", "127.0.0.1:0", "-metrics-addr", busy.Addr().String())
			cmd.Env = append(os.Environ(), envRedisAddrs+"=")
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Fatalf("got %v, want exit status 1 at start; output:\n%s", err, out)
			}
			if !strings.Contains(string(out), "address already in use") || !strings.Contains(string(out), "level=ERROR") {
				t.Errorf("output does not log the bind error:\n%s", out)
			}
		})
	}
}
