package httpcost

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/httprate"
	slidechi "github.com/slidelog/slidelog/adapters/chi"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/memstore"
)

// The quota of both limiters: a billion requests per rolling hour per
// client, which no run reaches, so that every request is admitted.
const (
	quota  = 1_000_000_000
	window = time.Hour
)

// policy is slidelog's quota: bucketed by the minute, as a user sets a
// quota this large (an exact log would keep one entry per request).
var policy = slidelog.Policy{Name: "per-hour", Limit: quota, Window: window, Precision: time.Minute}

// clients is how many client addresses the in-process requests come
// from.
const clients = 1024

// pattern and path are the one route every router serves.
const (
	pattern = "/api/items/{id}"
	path    = "/api/items/42"
)

var body = []byte(`{"id":42,"name":"item"}`)

// item is the route's handler: a small JSON answer.
func item(w http.ResponseWriter, r *http.Request) {
	if chi.URLParam(r, "id") == "" {
		http.Error(w, "no id", http.StatusBadRequest)
		return
	}
	w.Header()["Content-Type"] = []string{"application/json"}
	_, _ = w.Write(body)
}

// limiters are the three ways the route is served, in the order the
// benchmarks run them.
var limiters = []string{"none", "httprate", "slidelog"}

// newRouter returns a chi router serving the route through limiter.
func newRouter(limiter string) http.Handler {
	r := chi.NewRouter()
	switch limiter {
	case "none":
	case "httprate":
		r.Use(httprate.LimitByIP(quota, window)) //nolint:staticcheck // the issue's comparison: httprate's key by socket address, as slidelog's default
	case "slidelog":
		r.Use(slidechi.LimitByIP(policy))
	default:
		panic("httpcost: unknown limiter " + limiter)
	}
	r.Get(pattern, item)
	return r
}

// wantHeader is a response header field each limiter sets on an
// admission, checked once per run.
var wantHeader = map[string]string{
	"httprate": "X-Ratelimit-Remaining",
	"slidelog": "Ratelimit",
}

// writer is a response writer that keeps nothing but the status; its
// header map is made anew per request, as net/http makes one per
// response.
type writer struct {
	h      http.Header
	status int
}

func (w *writer) Header() http.Header { return w.h }

func (w *writer) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *writer) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return len(p), nil
}

// newRequests returns one request per client address, as a browser or
// API client sends it.
func newRequests() []*http.Request {
	reqs := make([]*http.Request, clients)
	for i := range reqs {
		r, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://api.example.com"+path, nil)
		if err != nil {
			panic(err)
		}
		r.RemoteAddr = fmt.Sprintf("198.51.%d.%d:%d", i/250, i%250+1, 40000+i)
		r.RequestURI = path
		r.Header["User-Agent"] = []string{"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36"}
		r.Header["Accept"] = []string{"application/json"}
		r.Header["Accept-Encoding"] = []string{"gzip, deflate, br"}
		r.Header["Authorization"] = []string{"Bearer eyJhbGciOiJIUzI1NiJ9.e30.ZRrHA1JJJW8opsbCGfG_HACGpVUMN_a9IV7pAx_Zmeo"}
		reqs[i] = r
	}
	return reqs
}

// serve sends r to h and fails b unless h admitted it.
func serve(b *testing.B, h http.Handler, r *http.Request) *writer {
	w := &writer{h: make(http.Header)}
	h.ServeHTTP(w, r)
	if w.status != http.StatusOK {
		b.Fatalf("status %d, want 200: the quota was reached", w.status)
	}
	return w
}

// BenchmarkServeHTTP is the route's ServeHTTP in process, without and
// with each limiter, on one goroutine (serial), one per core (parallel),
// and 16 and 64 goroutines (see modes); requests come from 1,024 client
// addresses in turn, each seen before the timer starts.
//
// The serial-64conns rows are the serial ones in a process that also
// serves the router on loopback to 64 keep-alive connections, open and
// idle: the state of the server the issue measured with wrk's 64
// connections (each connection's goroutine, its stack and its buffers,
// about 0.8 MB). Without it the process holds little but the 1,024
// requests, and the collector paces itself against its 4 MB minimum goal,
// which what a limiter keeps per client then moves (gc/kop; see reportGC
// and docs/benchmarks.md).
func BenchmarkServeHTTP(b *testing.B) {
	reqs := newRequests()
	for _, mode := range append(modes[:1:1], append([]string{"serial-64conns"}, modes[1:]...)...) {
		for _, limiter := range limiters {
			b.Run(limiter+"/"+mode, func(b *testing.B) {
				h := newRouter(limiter)
				callers := mode
				if mode == "serial-64conns" {
					holdConnections(b, h, connections)
					callers = "serial"
				}
				for _, r := range reqs {
					w := serve(b, h, r)
					if name := wantHeader[limiter]; name != "" && len(w.h[name]) == 0 {
						b.Fatalf("no %s header: %v", name, w.h)
					}
				}
				measure(b, callers, func(i int) { serve(b, h, reqs[i%clients]) })
			})
		}
	}
}

// BenchmarkAllow is slidelog's decision alone, Limiter.Allow on the
// middleware's policy and identities ("ip:" and the address), on a memory
// store: what of slidelog's cost in BenchmarkServeHTTP is the memory
// store's.
func BenchmarkAllow(b *testing.B) {
	keys := make([]string, clients)
	for i, r := range newRequests() {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		keys[i] = "ip:" + host
	}
	for _, mode := range modes {
		b.Run("slidelog/"+mode, func(b *testing.B) {
			store := memstore.New()
			defer store.Close()
			l := slidelog.MustNew(store, policy)
			defer l.Close()
			ctx := context.Background()
			allow := func(key string) {
				res, err := l.Allow(ctx, key)
				if err != nil || !res.Allowed {
					b.Fatalf("Allow(%q) = %v, %v; want admitted", key, res.Allowed, err)
				}
			}
			for _, k := range keys {
				allow(k)
			}
			measure(b, mode, func(i int) { allow(keys[i%clients]) })
		})
	}
}

// modes are the callers a benchmark runs with: one goroutine ("serial"),
// one per core ("parallel"), and 16 and 64 goroutines, the callers the
// Redis benchmarks report.
var modes = []string{"serial", "parallel", "16-callers", "64-callers"}

// measure runs step(i) for i = 0, 1, ... on the goroutines mode names
// (see modes), each from its own offset, and reports allocations, the
// process's CPU time per step and, unless serial, the goroutines it ran.
func measure(b *testing.B, mode string, step func(i int)) {
	b.ReportAllocs()
	goroutines := 1
	if mode != "serial" {
		procs := runtime.GOMAXPROCS(0)
		goroutines = procs
		if n, ok := strings.CutSuffix(mode, "-callers"); ok {
			callers, err := strconv.Atoi(n)
			if err != nil {
				b.Fatalf("mode %q: %v", mode, err)
			}
			// RunParallel starts parallelism*GOMAXPROCS goroutines.
			b.SetParallelism((callers + procs - 1) / procs)
			goroutines = (callers + procs - 1) / procs * procs
		}
	}
	cpu, gc := cpuTime(), readGC()
	b.ResetTimer()
	if mode == "serial" {
		i := 0
		for b.Loop() {
			step(i)
			i++
		}
	} else {
		// Each goroutine starts at a client of its own.
		stride := int64(clients / max(8, goroutines))
		var next atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			i := int(next.Add(stride))
			for pb.Next() {
				step(i)
				i++
			}
		})
	}
	b.StopTimer()
	reportCPU(b, cpuTime()-cpu)
	reportGC(b, gc)
	if mode != "serial" {
		b.ReportMetric(float64(goroutines), "callers")
	}
}

// gcState is the garbage collector's work so far: its cycles, and the CPU
// time the runtime estimates it spent (marking, assists, pauses).
type gcState struct {
	cycles uint64
	cpu    float64 // seconds
}

var gcSamples = []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/cpu/classes/gc/total:cpu-seconds"}}

func readGC() gcState {
	metrics.Read(gcSamples)
	return gcState{cycles: gcSamples[0].Value.Uint64(), cpu: gcSamples[1].Value.Float64()}
}

// reportGC reports the collector's cycles per 1,000 operations
// (gc/kop) and its CPU time per operation (gc-cpu-ns/op) since from: at
// a live heap of a few megabytes the collector paces itself against its
// 4 MB minimum goal, so that what a limiter keeps per client changes how
// often it runs, a cost cpu-ns/op includes and these two rows name.
func reportGC(b *testing.B, from gcState) {
	now := readGC()
	b.ReportMetric(float64(now.cycles-from.cycles)*1000/float64(b.N), "gc/kop")
	b.ReportMetric((now.cpu-from.cpu)*1e9/float64(b.N), "gc-cpu-ns/op")
}

// listen serves h on a loopback port until b ends and returns its URL.
func listen(b *testing.B, h http.Handler) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String() + path
}

// connections is how many keep-alive connections the loopback client
// keeps open, as the wrk run did.
const connections = 64

// holdConnections serves h on loopback and opens n keep-alive connections
// to it, each after one request answered 200, which stay open and idle
// until b ends: the server keeps a goroutine and its buffers per
// connection, the client side here only the socket.
func holdConnections(b *testing.B, h http.Handler, n int) {
	url := listen(b, h)
	addr := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), path)
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = c.Close() })
		if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: "+addr+"\r\n\r\n"); err != nil {
			b.Fatal(err)
		}
		readOK(b)(http.ReadResponse(bufio.NewReader(c), nil))
	}
}

// readOK returns a function that reads a response to its end and fails b
// unless it came, with status 200.
func readOK(b *testing.B) func(*http.Response, error) {
	return func(resp *http.Response, err error) {
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d, want 200", resp.StatusCode)
		}
	}
}

// BenchmarkLoopback serves each router on 127.0.0.1 and sends it requests
// over 64 keep-alive connections: ns/op is wall time per request with
// client and server sharing the machine. With wrk installed (the wrk
// rows) wrk is the client for 3 s per run and the server's CPU per
// request is reported too (server-cpu-ns/req: getrusage of this process,
// user + system), and its allocations (server-allocs/req; run these rows
// without -benchmem, whose figures are per run); the go rows use a Go client in this process, and their
// cpu-ns/op is client and server together. Every
// request is from 127.0.0.1, one client, as with wrk in the issue.
func BenchmarkLoopback(b *testing.B) {
	for _, limiter := range limiters {
		b.Run("go/"+limiter, func(b *testing.B) {
			url := listen(b, newRouter(limiter))
			tr := &http.Transport{MaxIdleConnsPerHost: connections, MaxConnsPerHost: connections}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr}
			ok := readOK(b)
			get := func() { ok(client.Get(url)) }
			for range connections {
				get()
			}
			b.ReportAllocs()
			b.SetParallelism((connections + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			cpu := cpuTime()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					get()
				}
			})
			b.StopTimer()
			reportCPU(b, cpuTime()-cpu)
		})
	}
	wrk, err := exec.LookPath("wrk")
	if err != nil {
		b.Logf("wrk is not installed (apt-get install wrk): no wrk rows")
		return
	}
	for _, limiter := range limiters {
		b.Run("wrk/"+limiter, func(b *testing.B) {
			url := listen(b, newRouter(limiter))
			// wrk measures for a fixed time, whatever b.N: the metrics
			// are per request of its run.
			warm := exec.Command(wrk, "-t2", "-c"+strconv.Itoa(connections), "-d1s", url)
			if out, err := warm.CombinedOutput(); err != nil {
				b.Fatalf("wrk: %v\n%s", err, out)
			}
			var mem runtime.MemStats
			runtime.ReadMemStats(&mem)
			before, mallocs := cpuTime(), mem.Mallocs
			out, err := exec.Command(wrk, "-t2", "-c"+strconv.Itoa(connections), "-d3s", url).CombinedOutput()
			cpu := cpuTime() - before
			runtime.ReadMemStats(&mem)
			mallocs = mem.Mallocs - mallocs
			if err != nil {
				b.Fatalf("wrk: %v\n%s", err, out)
			}
			n, secs, non2xx := parseWrk(b, out)
			if non2xx != 0 {
				b.Fatalf("wrk: %d responses not 2xx\n%s", non2xx, out)
			}
			b.ReportMetric(secs*1e9/float64(n), "ns/op")
			b.ReportMetric(float64(n)/secs, "req/s")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(n), "server-cpu-ns/req")
			b.ReportMetric(float64(mallocs)/float64(n), "server-allocs/req")
		})
	}
}

// reportCPU reports cpu, the process's CPU time over b's run, per
// operation: on a machine shared with other work, wall time per operation
// grows with their load, CPU time much less.
func reportCPU(b *testing.B, cpu time.Duration) {
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// cpuTime is this process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

var (
	wrkTotal  = regexp.MustCompile(`(\d+) requests in ([0-9.]+)(us|ms|s|m)\b`)
	wrkNon2xx = regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)`)
)

// parseWrk returns the requests, seconds and non-2xx responses of wrk's
// report out.
func parseWrk(b *testing.B, out []byte) (requests int, seconds float64, non2xx int) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	found := false
	for sc.Scan() {
		line := sc.Text()
		if m := wrkTotal.FindStringSubmatch(line); m != nil {
			requests, _ = strconv.Atoi(m[1])
			seconds, _ = strconv.ParseFloat(m[2], 64)
			seconds *= map[string]float64{"us": 1e-6, "ms": 1e-3, "s": 1, "m": 60}[m[3]]
			found = true
		}
		if m := wrkNon2xx.FindStringSubmatch(line); m != nil {
			non2xx, _ = strconv.Atoi(m[1])
		}
	}
	if !found || requests == 0 || seconds == 0 {
		b.Fatalf("wrk: no request count in its report:\n%s", out)
	}
	return requests, seconds, non2xx
}
