package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/slidelog/slidelog/core/redisstore"
)

var frameworks = []string{"gin", "echo", "echov5", "chi", "fiber"}

const (
	envRedisAddrs   = "SLIDELOG_REDIS_ADDRS"
	envKeyPrefix    = "SLIDELOG_KEY_PREFIX"
	envClusterAddrs = "SLIDELOG_CLUSTER_ADDRS"
	envRedisAddr    = "SLIDELOG_REDIS_ADDR"
	rigCommand      = `make cluster-up && eval "$(scripts/redis-rig.sh env)"`
)

func TestExamplesMemory(t *testing.T) {
	for _, fw := range frameworks {
		t.Run(fw, func(t *testing.T) {
			t.Parallel()
			srv := start(t, build(t, fw), nil, 5)
			drive(t, srv, 5, "memory")
		})
	}
}

func TestExamplesCluster(t *testing.T) {
	addrs := redisEnv(t, envClusterAddrs)
	client := redis.NewClusterClient(redisstore.ClusterOptions(strings.Split(addrs, ",")...))
	t.Cleanup(func() { _ = client.Close() })
	for _, fw := range frameworks {
		t.Run(fw, func(t *testing.T) {
			t.Parallel()
			runOnRedis(t, fw, client, addrs, "kind=redis-cluster")
		})
	}
}

// TestExampleStandalone runs one example on the standalone Redis: the
// one-address path of SLIDELOG_REDIS_ADDRS is the same code for all four.
func TestExampleStandalone(t *testing.T) {
	addr := redisEnv(t, envRedisAddr)
	client := redis.NewClient(redisstore.ClientOptions(addr))
	t.Cleanup(func() { _ = client.Close() })
	runOnRedis(t, "chi", client, addr, "kind=redis ")
}

// TestExampleClusterSeed runs one example with one Cluster node's
// address: it asks the server and builds a Cluster client, so every
// decision comes from Redis.
func TestExampleClusterSeed(t *testing.T) {
	addrs := strings.Split(redisEnv(t, envClusterAddrs), ",")
	client := redis.NewClusterClient(redisstore.ClusterOptions(addrs...))
	t.Cleanup(func() { _ = client.Close() })
	runOnRedis(t, "chi", client, addrs[0], "kind=redis-cluster")
}

// TestExamplesFailOnBadRedis: an example given a Redis that does not
// answer, or addresses that do not fit the server, exits non-zero at
// start with the error, naming the address.
func TestExamplesFailOnBadRedis(t *testing.T) {
	standalone := redisEnv(t, envRedisAddr)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	_ = ln.Close()
	type failure struct{ fw, addrs, want string }
	cases := []failure{
		{"chi", "nonexistent.invalid:6379", "redis unreachable at nonexistent.invalid:6379"},
		{"chi", "127.0.0.1", "redis unreachable at 127.0.0.1"},
		{"chi", standalone + "," + standalone, "is a standalone Redis, not a Cluster node"},
	}
	for _, fw := range frameworks {
		cases = append(cases, failure{fw, dead, "redis unreachable at " + dead})
	}
	for _, c := range cases {
		t.Run(c.fw+"/"+c.addrs, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), build(t, c.fw), "-addr", "127.0.0.1:0", "-metrics-addr", "")
			cmd.Env = append(os.Environ(), envRedisAddrs+"="+c.addrs)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() == 0 {
				t.Fatalf("got %v, want a non-zero exit; output:\n%s", err, out)
			}
			if !strings.Contains(string(out), c.want) || !strings.Contains(string(out), "level=ERROR") {
				t.Errorf("output does not log the error %q:\n%s", c.want, out)
			}
		})
	}
}

// TestExamplesHelp: -h lists the flags and the environment variables.
func TestExamplesHelp(t *testing.T) {
	for _, fw := range frameworks {
		t.Run(fw, func(t *testing.T) {
			out, _ := exec.CommandContext(t.Context(), build(t, fw), "-h").CombinedOutput()
			for _, want := range []string{"-addr", "-metrics-addr", "-limit", "-window", envRedisAddrs, envKeyPrefix, "SLIDELOG_KEY_SECRET"} {
				if !strings.Contains(string(out), want) {
					t.Errorf("-h does not mention %s:\n%s", want, out)
				}
			}
		})
	}
}

// redisEnv returns the rig's address variable name, failing with the
// command that starts the rig when it is not set (skipping with -short).
func redisEnv(t *testing.T, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		if testing.Short() {
			t.Skipf("%s is not set (-short)", name)
		}
		t.Fatalf("%s is not set; start the Redis rig from the repository root: %s", name, rigCommand)
	}
	return v
}

// runOnRedis runs example fw with SLIDELOG_REDIS_ADDRS=addrs and a key
// prefix of its own, checks that its log names the store (logKind), drives
// it, and checks that the client's log is in Redis; it deletes the key at
// cleanup.
func runOnRedis(t *testing.T, fw string, client redis.UniversalClient, addrs, logKind string) {
	const limit = 4
	prefix := fmt.Sprintf("slidelog-e2e:%s:%d:", fw, time.Now().UnixNano())
	store, err := redisstore.New(client, redisstore.WithKeyPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	// The examples key by client IP; every request comes from 127.0.0.1.
	// The examples' limiter is named "hello", the namespace of its logs.
	key := store.LogKey("hello", "ip:127.0.0.1")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := client.Del(ctx, key, key+":c", key+":s").Err(); err != nil {
			t.Errorf("delete %s: %v", key, err)
		}
	})

	srv := start(t, build(t, fw), []string{envRedisAddrs + "=" + addrs, envKeyPrefix + "=" + prefix}, limit)
	if !strings.Contains(srv.log(), logKind) {
		t.Errorf("log does not say %q:\n%s", logKind, srv.log())
	}
	drive(t, srv, limit, "redis")

	n, err := client.ZCard(t.Context(), key).Result()
	if err != nil {
		t.Fatalf("ZCARD %s: %v", key, err)
	}
	if n != limit {
		t.Errorf("got %d entries in %s, want %d", n, key, limit)
	}
}

// build compiles examples/<fw> into a temporary directory.
func build(t *testing.T, fw string) string {
	t.Helper()
	bin, out, err := builds.get(fw)
	if err != nil {
		t.Fatalf("go build ./%s: %v\n%s", fw, err, out)
	}
	return bin
}

// builds holds each example's binary, built once per test process by the
// first test that needs it, in binDir: a test that runs an example several
// times, or several tests that run one, share its build and link.
var builds = binaries{once: map[string]func() builtExample{}}

// binDir holds the built examples; TestMain creates and removes it.
var binDir string

type binaries struct {
	mu   sync.Mutex
	once map[string]func() builtExample
}

type builtExample struct {
	bin string
	out []byte
	err error
}

// get returns the binary of example fw (a directory of the examples
// module), building it on the first call.
func (b *binaries) get(fw string) (string, []byte, error) {
	b.mu.Lock()
	f, ok := b.once[fw]
	if !ok {
		f = sync.OnceValue(func() builtExample {
			bin := filepath.Join(binDir, strings.ReplaceAll(fw, "/", "-"))
			cmd := exec.Command("go", "build", "-o", bin, "./"+fw)
			cmd.Dir = ".." // the examples module
			out, err := cmd.CombinedOutput()
			return builtExample{bin, out, err}
		})
		b.once[fw] = f
	}
	b.mu.Unlock()
	r := f()
	return r.bin, r.out, r.err
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "slidelog-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

type server struct {
	base    string // http://127.0.0.1:port
	metrics string // http://127.0.0.1:port of -metrics-addr, if the example logged it
	mu      sync.Mutex
	stderr  bytes.Buffer
}

func (s *server) log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stderr.String()
}

var (
	listening      = regexp.MustCompile(`msg=listening .*addr=(\S+)`)
	metricsAddress = regexp.MustCompile(`msg=metrics .*addr=(\S+)`)
)

// start runs bin on a free loopback port, with its metrics on another,
// with -limit limit and the environment without Redis settings plus env,
// waits until it listens,
// and stops it with SIGTERM at cleanup, checking that it exits cleanly.
func start(t *testing.T, bin string, env []string, limit int) *server {
	t.Helper()
	cmd := exec.Command(bin, "-addr", "127.0.0.1:0", "-metrics-addr", "127.0.0.1:0", "-limit", strconv.Itoa(limit), "-window", "1m")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, envRedisAddrs+"=") && !strings.HasPrefix(kv, envKeyPrefix+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	srv := &server{}
	addr := make(chan string, 1)
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			srv.mu.Lock()
			srv.stderr.WriteString(line + "\n")
			if m := metricsAddress.FindStringSubmatch(line); m != nil {
				srv.metrics = "http://" + m[1]
			}
			srv.mu.Unlock()
			if m := listening.FindStringSubmatch(line); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
	}()
	exited := make(chan error, 1)
	go func() {
		<-drained // Wait closes the pipe: read it all first
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("%s after SIGTERM: %v\n%s", filepath.Base(bin), err, srv.log())
			} else if !strings.Contains(srv.log(), "msg=stopped") {
				t.Errorf("%s did not log its graceful stop:\n%s", filepath.Base(bin), srv.log())
			}
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			err := <-exited
			t.Errorf("%s did not stop within 15 s of SIGTERM (killed: %v)\n%s", filepath.Base(bin), err, srv.log())
		}
	})
	select {
	case a := <-addr:
		srv.base = "http://" + a
	case err := <-exited:
		t.Fatalf("%s exited before listening: %v\n%s", filepath.Base(bin), err, srv.log())
	case <-time.After(30 * time.Second):
		t.Fatalf("%s not listening after 30 s:\n%s", filepath.Base(bin), srv.log())
	}
	return srv
}

var client = &http.Client{Timeout: 10 * time.Second}

func get(t *testing.T, url string) (*http.Response, []byte) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: read body: %v", url, err)
	}
	return resp, body
}

var (
	rateLimitState = regexp.MustCompile(`^"per-minute";r=(\d+);t=(\d+)$`)
	wholeSeconds   = regexp.MustCompile(`^\d+$`)
)

// drive checks the example's contract: /healthz and /readyz never
// limited, /readyz 200, /hello admitted limit times then denied with the
// rate-limit header fields and a problem body, /metrics absent from the
// public port and, on the metrics address, showing the decisions of
// source.
func drive(t *testing.T, srv *server, limit int, source string) {
	t.Helper()
	healthz(t, srv)

	wantPolicy := fmt.Sprintf(`"per-minute";q=%d;w=60`, limit)
	for i := range limit {
		resp, body := get(t, srv.base+"/hello")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: got status %d, want 200; body %s", i+1, resp.StatusCode, body)
		}
		if got := resp.Header.Get("RateLimit-Policy"); got != wantPolicy {
			t.Errorf("request %d: got RateLimit-Policy %q, want %q", i+1, got, wantPolicy)
		}
		m := rateLimitState.FindStringSubmatch(resp.Header.Get("RateLimit"))
		if m == nil {
			t.Errorf("request %d: got RateLimit %q, want \"per-minute\";r=N;t=N", i+1, resp.Header.Get("RateLimit"))
		} else if r, _ := strconv.Atoi(m[1]); r != limit-i-1 {
			t.Errorf("request %d: got remaining %d, want %d", i+1, r, limit-i-1)
		}
		if got := resp.Header.Get("Retry-After"); got != "" {
			t.Errorf("request %d: got Retry-After %q on an admitted request, want none", i+1, got)
		}
	}

	resp, body := get(t, srv.base+"/hello")
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("request %d: got status %d, want 429; body %s", limit+1, resp.StatusCode, body)
	}
	retry := resp.Header.Get("Retry-After")
	if !wholeSeconds.MatchString(retry) {
		t.Errorf("got Retry-After %q, want whole seconds", retry)
	} else if s, _ := strconv.Atoi(retry); s < 1 || s > 60 {
		t.Errorf("got Retry-After %d, want 1..60", s)
	}
	if got := resp.Header.Get("RateLimit-Policy"); got != wantPolicy {
		t.Errorf("429: got RateLimit-Policy %q, want %q", got, wantPolicy)
	}
	if m := rateLimitState.FindStringSubmatch(resp.Header.Get("RateLimit")); m == nil || m[1] != "0" {
		t.Errorf("429: got RateLimit %q, want \"per-minute\";r=0;t=N", resp.Header.Get("RateLimit"))
	}
	if got := resp.Header.Get("Content-Type"); got != "application/problem+json" {
		t.Errorf("429: got Content-Type %q, want application/problem+json", got)
	}
	var problem struct {
		Type     string   `json:"type"`
		Title    string   `json:"title"`
		Status   int      `json:"status"`
		Detail   string   `json:"detail"`
		Violated []string `json:"violated-policies"`
	}
	if err := json.Unmarshal(body, &problem); err != nil {
		t.Fatalf("429 body %s: %v", body, err)
	}
	if problem.Status != 429 || problem.Title != "Too Many Requests" || problem.Detail == "" ||
		!strings.HasSuffix(problem.Type, "#rate-limited") ||
		len(problem.Violated) != 1 || problem.Violated[0] != "per-minute" {
		t.Errorf("429 body: got %s, want status 429, title, detail, type #rate-limited, violated-policies [per-minute]", body)
	}

	healthz(t, srv)
	resp, body = get(t, srv.base+"/readyz")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("RateLimit") != "" {
		t.Errorf("/readyz: got status %d, RateLimit %q, body %q; want 200 and no RateLimit", resp.StatusCode, resp.Header.Get("RateLimit"), body)
	}
	if resp, _ = get(t, srv.base+"/metrics"); resp.StatusCode == http.StatusOK {
		t.Errorf("/metrics on the public port: got 200, want it only on -metrics-addr")
	}
	srv.mu.Lock()
	metrics := srv.metrics
	srv.mu.Unlock()
	if metrics == "" {
		t.Fatalf("the example did not log its metrics address (msg=metrics addr=...):\n%s", srv.log())
	}
	resp, body = get(t, metrics+"/metrics")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("/metrics: got status %d, Content-Type %q, want 200 text/plain", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	for _, want := range []string{
		fmt.Sprintf(`slidelog_decisions_total{limiter="hello",outcome="allowed",source=%q} %d`, source, limit),
		`slidelog_rate_limit_rejections_total{limiter="hello",`,
		`slidelog_command_duration_seconds_bucket{limiter="hello",status="ok"`,
	} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("/metrics does not contain %q:\n%s", want, grep(body, "slidelog_"))
		}
	}
}

// healthz checks that /healthz answers 200 without rate-limit headers.
func healthz(t *testing.T, srv *server) {
	t.Helper()
	for range 2 {
		resp, body := get(t, srv.base+"/healthz")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("/healthz: got status %d, want 200; body %s", resp.StatusCode, body)
		}
		if got := resp.Header.Get("RateLimit"); got != "" {
			t.Errorf("/healthz: got RateLimit %q, want none (skipped)", got)
		}
	}
}

func grep(b []byte, substr string) string {
	var out strings.Builder
	for line := range strings.Lines(string(b)) {
		if strings.Contains(line, substr) && !strings.HasPrefix(line, "#") {
			out.WriteString(line)
		}
	}
	return out.String()
}
