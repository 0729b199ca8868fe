package slidelogtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/memstore"
)

// AttackerAddr is the loopback address the proxy suite's attacking client
// dials from: never the proxy's own address (127.0.0.1), as a host that
// reaches the proxy, or the application directly, from elsewhere.
const AttackerAddr = "127.0.0.2"

// RunProxySuite runs the adapter under test behind real proxies: nginx
// and HAProxy bound to loopback, started and
// stopped by the test with their own configuration in a temporary
// directory, configured as the framework pages say. The attacking client
// dials from AttackerAddr and spoofs forwarding and identity headers;
// each case counts identities and admissions at a small limit.
//
// The proxies are found on PATH or in /usr/sbin. When one is missing the
// test fails if SLIDELOG_REQUIRE_PROXIES (or SLIDELOG_REQUIRE_REDIS, which
// scripts/test.sh sets) is 1, and is skipped otherwise; scripts/test.sh
// installs nginx-light and haproxy with apt-get when missing.
func RunProxySuite(t *testing.T, factory HTTPFactory) {
	cases := []struct {
		name string
		run  func(t *testing.T, factory HTTPFactory)
	}{
		{"TrustAllXFF", testNginxTrustAllXFF},
		{"TrustedProxyXFF", testNginxTrustedXFF},
		{"RealIP", testNginxRealIP},
		{"Forwarded", testNginxForwarded},
		{"UnixSocket", testNginxUnixSocket},
		{"OuterHopHeader", testNginxOuterHop},
		{"HAProxyAddHeader", testHAProxyAddHeader},
		{"HAProxyForwardFor", testHAProxyForwardFor},
		{"HAProxyForwardForIfNone", testHAProxyForwardForIfNone},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, factory) })
	}
}

// findProxy returns the path of the named proxy program, or ends the test.
func findProxy(t *testing.T, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if p := filepath.Join("/usr/sbin", name); fileExists(p) {
		return p
	}
	if os.Getenv("SLIDELOG_REQUIRE_PROXIES") == "1" || os.Getenv("SLIDELOG_REQUIRE_REDIS") == "1" {
		t.Fatalf("%s not found: this test runs the application behind a real %s; install it (apt-get install %s) or run `make test`, which does", name, name, debianPackage(name))
	}
	t.Skipf("%s not found (apt-get install %s); set SLIDELOG_REQUIRE_PROXIES=1 to fail instead", name, debianPackage(name))
	return ""
}

func debianPackage(name string) string {
	if name == "nginx" {
		return "nginx-light"
	}
	return name
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// backend serves the factory's app on a real listener (TCP on loopback,
// or a Unix socket), so that the adapter sees the proxy's connection and
// headers as they arrive. It returns the listener's address.
func backend(t *testing.T, factory HTTPFactory, app HTTPApp, network, addr string) string {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatalf("listen %s %s: %v", network, addr, err)
	}
	if network == "unix" {
		_ = os.Chmod(addr, 0o777) // nginx's worker may run as another user
	}
	serve := factory(t, app)
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			resp := serve(r)
			defer resp.Body.Close()
			for k, vs := range resp.Header {
				w.Header()[k] = vs
			}
			w.WriteHeader(resp.StatusCode)
			_, _ = io.Copy(w, resp.Body)
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return ln.Addr().String()
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startNginx runs nginx with server (the body of one server block) on a
// free loopback port, which it returns.
func startNginx(t *testing.T, server string) int {
	t.Helper()
	return StartNginx(t, "", server)
}

// StartNginx runs nginx in the foreground (-g 'daemon off;') with its own
// prefix and configuration in a temporary directory: one server block
// with body server, listening on a free loopback port with listenParams
// (such as "http2" for gRPC), which it returns. nginx is stopped when the
// test ends. A missing nginx fails or skips the test as RunProxySuite
// says.
func StartNginx(t *testing.T, listenParams, server string) int {
	t.Helper()
	bin := findProxy(t, "nginx")
	dir := t.TempDir()
	_ = os.Chmod(dir, 0o755)
	for attempt := 0; ; attempt++ {
		port := freePort(t)
		conf := fmt.Sprintf(`worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log;
events { worker_connections 64; }
http {
	access_log off;
	client_body_temp_path %[1]s/body;
	proxy_temp_path %[1]s/proxy;
	fastcgi_temp_path %[1]s/fastcgi;
	uwsgi_temp_path %[1]s/uwsgi;
	scgi_temp_path %[1]s/scgi;
	server {
		listen 127.0.0.1:%[2]d %[4]s;
%[3]s
	}
}
`, dir, port, server, listenParams)
		path := filepath.Join(dir, "nginx.conf")
		if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := runProxy(t, exec.Command(bin, "-p", dir, "-e", filepath.Join(dir, "error.log"), "-c", path, "-g", "daemon off;"), port, filepath.Join(dir, "error.log")); err != nil {
			if attempt < 3 {
				continue // the port was taken meanwhile
			}
			t.Fatalf("nginx: %v", err)
		}
		return port
	}
}

// startHAProxy runs haproxy in the foreground with the given frontend and
// backend lines, listening on the returned port.
func startHAProxy(t *testing.T, frontend, backendLines string) int {
	t.Helper()
	return StartHAProxy(t, "", frontend, backendLines)
}

// StartHAProxy runs HAProxy in the foreground (-db) with its own
// configuration in a temporary directory: one HTTP frontend listening on
// a free loopback port with bindParams (such as "proto h2" for gRPC), the
// lines frontend, and one backend of the lines backendLines (such as
// "\tserver app 127.0.0.1:8080 proto h2"). It returns the port; HAProxy
// is stopped when the test ends. A missing HAProxy fails or skips the
// test as RunProxySuite says.
func StartHAProxy(t *testing.T, bindParams, frontend, backendLines string) int {
	t.Helper()
	bin := findProxy(t, "haproxy")
	dir := t.TempDir()
	for attempt := 0; ; attempt++ {
		port := freePort(t)
		conf := fmt.Sprintf(`global
	maxconn 64
defaults
	mode http
	timeout connect 5s
	timeout client 30s
	timeout server 30s
frontend fe
	bind 127.0.0.1:%d %s
%s
	default_backend be
backend be
%s
`, port, bindParams, frontend, backendLines)
		path := filepath.Join(dir, "haproxy.cfg")
		if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := runProxy(t, exec.Command(bin, "-db", "-f", path), port, ""); err != nil {
			if attempt < 3 {
				continue
			}
			t.Fatalf("haproxy: %v", err)
		}
		return port
	}
}

// runProxy starts cmd, waits until it accepts on port, and stops it (and
// waits for it) at cleanup. It fails when cmd exits first.
func runProxy(t *testing.T, cmd *exec.Cmd, port int, errorLog string) error {
	t.Helper()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		var err error
		select {
		case err = <-exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			err = <-exited
		}
		if err != nil {
			// Stopped by a signal: worth a line, not a failure.
			t.Logf("%s stopped: %v", cmd.Path, err)
		}
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case err := <-exited:
			logText := out.String()
			if errorLog != "" {
				if b, rerr := os.ReadFile(errorLog); rerr == nil {
					logText += string(b)
				}
			}
			return fmt.Errorf("exited before accepting on %s: %v: %s", addr, err, logText)
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			_ = c.Close()
			t.Cleanup(stop)
			return nil
		}
		if time.Now().After(deadline) {
			stop()
			return fmt.Errorf("not accepting on %s after 20s: %s", addr, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// attacker is an HTTP client that dials from AttackerAddr, one
// connection per request.
func attacker(t *testing.T) *http.Client {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(AttackerAddr)}, Timeout: 10 * time.Second}
	return &http.Client{
		Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true},
		Timeout:   30 * time.Second,
	}
}

// fire sends GET url with the header pairs from the attacker and returns
// the status.
func fire(t *testing.T, c *http.Client, url string, header ...string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// spoofRun sends n requests to url from the attacker, each with a fresh
// spoofed value in every header of spoof, and returns the statuses.
func spoofRun(t *testing.T, url string, n int, spoof ...string) map[int]int {
	t.Helper()
	c := attacker(t)
	got := make(map[int]int)
	for i := range n {
		fake := fmt.Sprintf("198.51.100.%d", i+1)
		var header []string
		for _, h := range spoof {
			v := fake
			if strings.EqualFold(h, "Forwarded") {
				v = "for=" + fake
			}
			header = append(header, h, v)
		}
		got[fire(t, c, url, header...)]++
	}
	return got
}

// proxyApp is one route /hello behind middleware of l with opts.
func proxyApp(l *slidelog.Limiter, opts ...httplimit.Option) HTTPApp {
	return HTTPApp{Global: mw(l, opts...), Routes: []HTTPRoute{{Pattern: "/hello"}}}
}

// proxyLimiter is a limiter of 2 per minute on a counting memory store.
func proxyLimiter(t *testing.T) (*slidelog.Limiter, *CountingStore) {
	t.Helper()
	mem := memstore.New()
	t.Cleanup(func() { _ = mem.Close() })
	store := NewCountingStore(mem)
	return newLimiter(t, store, slidelog.Policy{Name: "ip", Limit: 2, Window: time.Minute}), store
}

// limitedApp serves factory's proxyApp of a fresh proxyLimiter with opts
// over TCP on a free loopback port, and returns the app's address and the
// limiter's store.
func limitedApp(t *testing.T, factory HTTPFactory, opts ...httplimit.Option) (string, *CountingStore) {
	t.Helper()
	l, store := proxyLimiter(t)
	return backend(t, factory, proxyApp(l, opts...), "tcp", "127.0.0.1:0"), store
}

// helloURL is the URL of /hello through a proxy on loopback port port.
func helloURL(port int) string {
	return fmt.Sprintf("http://127.0.0.1:%d/hello", port)
}

// startNginxProxy runs nginx passing every request to upstream (host:port,
// or unix:path: for a Unix socket) with the directive
// "proxy_set_header setHeader;", and returns nginx's port.
func startNginxProxy(t *testing.T, upstream, setHeader string) int {
	t.Helper()
	return startNginx(t, fmt.Sprintf(`		location / {
			proxy_pass http://%s;
			proxy_set_header %s;
		}`, upstream, setHeader))
}

// wantOneKey checks that 5 spoofed requests were 2 admissions and 3
// denials, all under the one identity want.
func wantOneKey(t *testing.T, got map[int]int, store *CountingStore, want string) {
	t.Helper()
	if got[http.StatusOK] != 2 || got[http.StatusTooManyRequests] != 3 {
		t.Errorf("statuses: got %v, want 2x200 and 3x429", got)
	}
	if keys := store.Identities(); len(keys) != 1 || keys[want] != 5 {
		t.Errorf("identities: got %v, want only %s, 5 times", keys, want)
	}
}

// testNginxTrustAllXFF: ClientIP.AllPeersTrusted behind nginx appending with
// $proxy_add_x_forwarded_for: 5 spoofed X-Forwarded-For values are one
// identity, the attacker's address nginx appended.
func testNginxTrustAllXFF(t *testing.T, factory HTTPFactory) {
	app, store := limitedApp(t, factory, httplimit.WithClientIP(httplimit.ClientIP{AllPeersTrusted: true, Header: "X-Forwarded-For"}))
	port := startNginxProxy(t, app, "X-Forwarded-For $proxy_add_x_forwarded_for")
	got := spoofRun(t, helloURL(port), 5, "X-Forwarded-For", "X-Forwarded-For")
	wantOneKey(t, got, store, "ip:"+AttackerAddr)
}

// testNginxTrustedXFF: the nginx row as the pages give it (nginx's
// address trusted, X-Forwarded-For appended): spoofing through nginx is
// one identity, and so is spoofing the app directly from another host.
func testNginxTrustedXFF(t *testing.T, factory HTTPFactory) {
	app, store := limitedApp(t, factory, httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: []string{"127.0.0.1"}, Header: "X-Forwarded-For"}))
	port := startNginxProxy(t, app, "X-Forwarded-For $proxy_add_x_forwarded_for")
	got := spoofRun(t, helloURL(port), 5, "X-Forwarded-For", "X-Real-IP", "Forwarded")
	wantOneKey(t, got, store, "ip:"+AttackerAddr)

	app2, direct := limitedApp(t, factory, httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: []string{"127.0.0.1"}, Header: "X-Forwarded-For"}))
	got = spoofRun(t, "http://"+app2+"/hello", 5, "X-Forwarded-For", "X-Real-IP", "Forwarded")
	wantOneKey(t, got, direct, "ip:"+AttackerAddr)
}

// testNginxRealIP: the X-Real-IP row (proxy_set_header X-Real-IP
// $remote_addr): nginx replaces the client's own X-Real-IP.
func testNginxRealIP(t *testing.T, factory HTTPFactory) {
	app, store := limitedApp(t, factory, httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: []string{"127.0.0.1"}, Header: "X-Real-IP"}))
	port := startNginxProxy(t, app, "X-Real-IP $remote_addr")
	got := spoofRun(t, helloURL(port), 5, "X-Real-IP", "X-Forwarded-For")
	wantOneKey(t, got, store, "ip:"+AttackerAddr)
}

// testNginxForwarded: the RFC 7239 row as written (the proxy's address
// trusted, "Forwarded" named) starts, and a proxy appending for= to the
// client's own Forwarded makes 5 spoofed values one identity.
func testNginxForwarded(t *testing.T, factory HTTPFactory) {
	app, store := limitedApp(t, factory, httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: []string{"127.0.0.1"}, Header: "Forwarded"}))
	port := startNginxProxy(t, app, `Forwarded "$http_forwarded, for=$remote_addr"`)
	got := spoofRun(t, helloURL(port), 5, "Forwarded", "X-Forwarded-For")
	wantOneKey(t, got, store, "ip:"+AttackerAddr)
}

// testNginxUnixSocket: nginx in front of the app over a Unix socket.
// ByClientIP has no address for such a peer (400) unless
// ClientIP.UnixSocketProxy says the socket is the proxy; then nginx's
// X-Real-IP names the client and spoofing is one identity.
func testNginxUnixSocket(t *testing.T, factory HTTPFactory) {
	dir, err := os.MkdirTemp("", "slidelog-sock-") // short: a socket path is at most ~100 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	_ = os.Chmod(dir, 0o755)
	nginx := func(sock string) int {
		return startNginxProxy(t, "unix:"+sock+":", "X-Real-IP $remote_addr")
	}

	l0, _ := proxyLimiter(t)
	plain := backend(t, factory, proxyApp(l0), "unix", filepath.Join(dir, "plain.sock"))
	if got := spoofRun(t, helloURL(nginx(plain)), 1, "X-Real-IP"); got[http.StatusBadRequest] != 1 {
		t.Errorf("without UnixSocketProxy: got %v, want 400 (no client address)", got)
	}

	l, store := proxyLimiter(t)
	sock := backend(t, factory, proxyApp(l, httplimit.WithClientIP(httplimit.ClientIP{UnixSocketProxy: true, Header: "X-Real-IP"})), "unix", filepath.Join(dir, "app.sock"))
	got := spoofRun(t, helloURL(nginx(sock)), 5, "X-Real-IP", "X-Forwarded-For")
	wantOneKey(t, got, store, "ip:"+AttackerAddr)
}

// testNginxOuterHop: a single-value header written by an outer hop
// (CF-Connecting-IP from a CDN) through nginx is safe only when nginx
// accepts connections from the outer hop alone: the attacker reaching
// nginx directly is refused (403) and never reaches the limiter, while
// the outer hop's value is the identity.
func testNginxOuterHop(t *testing.T, factory HTTPFactory) {
	const cdn = "127.0.0.3" // the outer hop's address
	app, store := limitedApp(t, factory, httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: []string{"127.0.0.1"}, Header: "CF-Connecting-IP"}))
	port := startNginx(t, fmt.Sprintf(`		allow %s;
		deny all;
		location / {
			proxy_pass http://%s;
		}`, cdn, app))
	url := helloURL(port)
	if got := spoofRun(t, url, 5, "CF-Connecting-IP"); got[http.StatusForbidden] != 5 {
		t.Errorf("attacker reaching nginx directly: got %v, want 5x403", got)
	}
	if n := store.Takes(); n != 0 {
		t.Errorf("store calls from the refused attacker: got %d, want 0", n)
	}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(cdn)}, Timeout: 10 * time.Second}
	c := &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}, Timeout: 30 * time.Second}
	got := make(map[int]int)
	for range 5 {
		got[fire(t, c, url, "CF-Connecting-IP", "203.0.113.50")]++
	}
	wantOneKey(t, got, store, "ip:203.0.113.50")
}

// testHAProxyAddHeader: HAProxy's http-request add-header X-User-Id puts
// its value after the client's own X-User-Id. ByHeader refuses the
// duplicate (400), so the client's value never becomes the key; without
// a client value, HAProxy's is.
func testHAProxyAddHeader(t *testing.T, factory HTTPFactory) {
	app, store := limitedApp(t, factory, httplimit.WithKeyFunc(httplimit.ByHeader("X-User-Id")))
	port := startHAProxy(t, "\thttp-request add-header X-User-Id gateway-user", "\tserver app "+app)
	url := helloURL(port)
	c := attacker(t)
	got := make(map[int]int)
	for i := range 4 {
		got[fire(t, c, url, "X-User-Id", fmt.Sprintf("victim-%d", i))]++
	}
	if got[http.StatusBadRequest] != 4 {
		t.Errorf("client's own X-User-Id: got %v, want 4x400", got)
	}
	if n := store.Takes(); n != 0 {
		t.Errorf("store calls for refused requests: got %d, want 0", n)
	}
	got = make(map[int]int)
	for range 5 {
		got[fire(t, c, url)]++
	}
	wantOneKey(t, got, store, "h:x-user-id:gateway-user")
}

// testHAProxyForwardFor: the HAProxy row as written, `option forwardfor`
// with HAProxy's address trusted and X-Forwarded-For named, and with
// every peer trusted: HAProxy appends the address it saw after the
// client's own X-Forwarded-For, so 5 spoofed values of every forwarding
// header are one identity, the attacker's.
func testHAProxyForwardFor(t *testing.T, factory HTTPFactory) {
	for _, tt := range []struct {
		name string
		opts []httplimit.Option
	}{
		{"trusted", []httplimit.Option{httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: []string{"127.0.0.1"}, Header: "X-Forwarded-For"})}},
		{"trust-all", []httplimit.Option{httplimit.WithClientIP(httplimit.ClientIP{AllPeersTrusted: true, Header: "X-Forwarded-For"})}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			app, store := limitedApp(t, factory, tt.opts...)
			port := startHAProxy(t, "\toption forwardfor", "\tserver app "+app)
			got := spoofRun(t, helloURL(port), 5, "X-Forwarded-For", "X-Real-IP", "Forwarded")
			wantOneKey(t, got, store, "ip:"+AttackerAddr)
		})
	}
}

// testHAProxyForwardForIfNone: why the pages say `option forwardfor`
// and never `option forwardfor if-none`: with if-none, HAProxy passes a
// client's own X-Forwarded-For on untouched, and behind it each spoofed
// value is an identity of its own (5 values, 5 identities, none denied).
func testHAProxyForwardForIfNone(t *testing.T, factory HTTPFactory) {
	app, store := limitedApp(t, factory, httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: []string{"127.0.0.1"}, Header: "X-Forwarded-For"}))
	port := startHAProxy(t, "\toption forwardfor if-none", "\tserver app "+app)
	got := spoofRun(t, helloURL(port), 5, "X-Forwarded-For")
	if got[http.StatusOK] != 5 || len(store.Identities()) != 5 {
		t.Errorf("if-none: got %v and identities %v, want 5x200 under 5 spoofed identities (the hazard the pages warn of)", got, store.Identities())
	}
}
