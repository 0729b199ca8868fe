package slidelogtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/internal/logbuf"
)

// RunHTTPSuite runs the HTTP conformance suite: every adapter must pass
// it, on the memory store and on the Redis Cluster, with the same
// results. newStore builds the store of each test (see MemoryStores and
// ClusterStores); factory builds a server with the adapter under test.
func RunHTTPSuite(t *testing.T, newStore NewStoreFunc, factory HTTPFactory) {
	for _, tc := range httpCases {
		t.Run(tc.name, func(t *testing.T) {
			clock := NewClock(suiteStart)
			inner := newStore(t, clock.Now)
			t.Cleanup(func() { _ = inner.Close() })
			tc.run(t, &httpEnv{newStore: newStore, inner: inner, store: NewCountingStore(inner), clock: clock, factory: factory})
		})
	}
}

type httpEnv struct {
	newStore NewStoreFunc
	inner    slidelog.Store
	store    *CountingStore
	clock    *Clock
	factory  HTTPFactory
}

// limiter returns a limiter on the test's counting store. Limiters are
// not closed: they share the store, which the suite closes.
func (e *httpEnv) limiter(t *testing.T, p slidelog.Policy, opts ...slidelog.Option) *slidelog.Limiter {
	t.Helper()
	return newLimiter(t, e.store, p, opts...)
}

// newLimiter returns a limiter on s with the limiter's default options
// (its failure mode, fallback and stall timeout) and opts. Limiters on
// a CountingStore always get the store's own decision (see CountingStore):
// they keep no deny cache unless opts ask for one, so that every request
// the suite sends reaches the store and is counted; a test about a
// failure mode passes that mode in opts.
func newLimiter(t *testing.T, s slidelog.Store, p slidelog.Policy, opts ...slidelog.Option) *slidelog.Limiter {
	t.Helper()
	if _, counting := s.(*CountingStore); counting {
		opts = append([]slidelog.Option{slidelog.WithDenyCache(0)}, opts...)
	}
	l, err := slidelog.New(s, p, opts...)
	if err != nil {
		t.Fatalf("New(%+v): %v", p, err)
	}
	return l
}

func (e *httpEnv) serve(t *testing.T, app HTTPApp) HTTPServe {
	t.Helper()
	return e.factory(t, app)
}

// serveSkippingHealthz serves routes behind a global middleware with
// SkipPaths("/healthz") on a limiter "hello" of 1 a minute.
func (e *httpEnv) serveSkippingHealthz(t *testing.T, routes ...HTTPRoute) HTTPServe {
	t.Helper()
	l := e.limiter(t, slidelog.Policy{Name: "hello", Limit: 1, Window: time.Minute})
	return e.serve(t, HTTPApp{
		Global: mw(l, httplimit.WithSkipFunc(httplimit.SkipPaths("/healthz"))),
		Routes: routes,
	})
}

// serveNested serves /hello behind a global middleware of outer and a
// route middleware of inner.
func (e *httpEnv) serveNested(t *testing.T, outer, inner *slidelog.Limiter) HTTPServe {
	t.Helper()
	return e.serve(t, HTTPApp{
		Global: mw(outer),
		Routes: []HTTPRoute{{Pattern: "/hello", Middleware: mw(inner)}},
	})
}

// reply is a response read whole.
type reply struct {
	status int
	header http.Header
	body   string
}

// do sends method path from the socket address remote with header
// name/value pairs.
func do(t *testing.T, serve HTTPServe, method, path, remote string, header ...string) reply {
	t.Helper()
	req := httptest.NewRequestWithContext(t.Context(), method, path, nil)
	req.RemoteAddr = remote
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	return send(t, serve, req)
}

// send serves req and reads the response whole.
func send(t *testing.T, serve HTTPServe, req *http.Request) reply {
	t.Helper()
	resp := serve(req)
	if resp == nil {
		t.Fatalf("%s %s: no response", req.Method, req.URL)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", req.Method, req.URL, err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

func get(t *testing.T, serve HTTPServe, path, remote string, header ...string) reply {
	t.Helper()
	return do(t, serve, http.MethodGet, path, remote, header...)
}

func (r reply) wantStatus(t *testing.T, want int) reply {
	t.Helper()
	if r.status != want {
		t.Fatalf("status: got %d, want %d (body %q)", r.status, want, r.body)
	}
	return r
}

// wantBody checks that r's body is want, what the handler named whose
// (such as "denied handler's") writes.
func (r reply) wantBody(t *testing.T, want, whose string) reply {
	t.Helper()
	if r.body != want {
		t.Errorf("body: got %q, want the %s %q", r.body, whose, want)
	}
	return r
}

func (r reply) wantHeader(t *testing.T, name, want string) reply {
	t.Helper()
	vs := r.header.Values(name)
	got := strings.Join(vs, ", ")
	if want == "" && len(vs) > 0 {
		t.Errorf("header %s: got %q, want none", name, got)
	} else if got != want {
		t.Errorf("header %s: got %q, want %q", name, got, want)
	}
	return r
}

var rateLimitHeaders = []string{"RateLimit-Policy", "RateLimit", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "Retry-After"}

func (r reply) wantNoRateLimitHeaders(t *testing.T) reply {
	t.Helper()
	for _, h := range rateLimitHeaders {
		r.wantHeader(t, h, "")
	}
	return r
}

// wantProblem checks an RFC 9457 body and returns its members.
func (r reply) wantProblem(t *testing.T, status int) map[string]any {
	t.Helper()
	r.wantStatus(t, status)
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, httplimit.ProblemContentType) {
		t.Errorf("Content-Type: got %q, want %q", ct, httplimit.ProblemContentType)
	}
	var p map[string]any
	if err := json.Unmarshal([]byte(r.body), &p); err != nil {
		t.Fatalf("problem body %q: %v", r.body, err)
	}
	for _, k := range []string{"type", "title", "detail"} {
		if s, _ := p[k].(string); s == "" {
			t.Errorf("problem %s: got %v, want a non-empty string (body %s)", k, p[k], r.body)
		}
	}
	if got, _ := p["status"].(float64); int(got) != status {
		t.Errorf("problem status: got %v, want %d", p["status"], status)
	}
	return p
}

// wantNoInternalText checks that a response says nothing of the failure's
// cause.
func (r reply) wantNoInternalText(t *testing.T, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(r.body, s) {
			t.Errorf("body %q carries internal text %q", r.body, s)
		}
		for name, vs := range r.header {
			for _, v := range vs {
				if strings.Contains(v, s) {
					t.Errorf("header %s: %q carries internal text %q", name, v, s)
				}
			}
		}
	}
}

const clientA = "192.0.2.1:41000"

type httpCase struct {
	name string
	run  func(t *testing.T, e *httpEnv)
}

var httpCases = []httpCase{
	{"AllowedThenDenied", testAllowedThenDenied},
	{"RetryAfterRoundsUp", testRetryAfterRoundsUp},
	{"LegacyHeaders", testLegacyHeaders},
	{"NoHeaders", testNoHeaders},
	{"MultiplePolicies", testMultiplePolicies},
	{"DeniedHandler", testDeniedHandler},
	{"Skip", testSkip},
	{"SkipBypass", testSkipBypass},
	{"HeaderNameCase", testHeaderNameCase},
	{"ContextValues", testContextValues},
	{"FailOpenStateUnknown", testFailOpenStateUnknown},
	{"Cost", testCost},
	{"PerRoutePolicies", testPerRoutePolicies},
	{"NestedMiddlewares", testNestedMiddlewares},
	{"NestedSamePolicyNames", testNestedSamePolicyNames},
	{"KeyByRoute", testKeyByRoute},
	{"LimiterFunc", testLimiterFunc},
	{"NoLimiter", testNoLimiter},
	{"SpoofedForwardedHeaders", testSpoofedForwardedHeaders},
	{"TrustedProxies", testTrustedProxies},
	{"OnlyTheProxysHeader", testOnlyTheProxysHeader},
	{"IPv6Prefix", testIPv6Prefix},
	{"IPv6TwoLevels", testIPv6TwoLevels},
	{"TrustAllTakesAppended", testTrustAllTakesAppended},
	{"HeaderSentTwice", testHeaderSentTwice},
	{"MintedIPv6Prefixes", testMintedIPv6Prefixes},
	{"UnixSocketProxy", testUnixSocketProxy},
	{"IPNormalisation", testIPNormalisation},
	{"BadIdentityBeforeStore", testBadIdentityBeforeStore},
	{"ShadowMode", testShadowMode},
	{"RefundOnServerError", testRefundOnServerError},
	{"LimiterError", testLimiterError},
}

func testAllowedThenDenied(t *testing.T, e *httpEnv) {
	l := e.limiter(t, slidelog.Policy{Name: "hello", Limit: 3, Window: time.Minute})
	serve := e.serve(t, HTTPApp{Global: mw(l), Routes: []HTTPRoute{{Pattern: "/hello"}}})

	const policy = `"hello";q=3;w=60`
	for i, remaining := range []int{2, 1, 0} {
		if i > 0 {
			e.clock.Advance(10 * time.Second)
		}
		r := get(t, serve, "/hello", clientA).wantStatus(t, http.StatusOK)
		r.wantBody(t, "ok", "handler's")
		r.wantHeader(t, "RateLimit-Policy", policy).
			wantHeader(t, "RateLimit", fmt.Sprintf(`"hello";r=%d;t=60`, remaining)).
			wantHeader(t, "Retry-After", "")
	}

	// At 25 s the first entry (0 s) leaves the window at 60 s: 35 s to go;
	// the last (20 s) at 80 s: the window is empty in 55 s.
	e.clock.Advance(5 * time.Second)
	r := get(t, serve, "/hello", clientA)
	p := r.wantProblem(t, http.StatusTooManyRequests)
	r.wantHeader(t, "Retry-After", "35").
		wantHeader(t, "RateLimit-Policy", policy).
		wantHeader(t, "RateLimit", `"hello";r=0;t=55`)
	if p["title"] != "Too Many Requests" {
		t.Errorf("problem title: got %v, want %q", p["title"], "Too Many Requests")
	}
	if p["type"] != httplimit.ProblemTypeRateLimited {
		t.Errorf("problem type: got %v, want %q", p["type"], httplimit.ProblemTypeRateLimited)
	}
	if d, _ := p["detail"].(string); !strings.Contains(d, "35") {
		t.Errorf("problem detail: got %q, want it to say 35 seconds", d)
	}
	if got := fmt.Sprint(p["violated-policies"]); got != "[hello]" {
		t.Errorf("problem violated-policies: got %s, want [hello]", got)
	}
	if takes := e.store.Takes(); takes != 4 {
		t.Errorf("store takes: got %d, want 4", takes)
	}

	// Another client has its own window.
	get(t, serve, "/hello", "192.0.2.2:41000").wantStatus(t, http.StatusOK).
		wantHeader(t, "RateLimit", `"hello";r=2;t=60`)

	// Exactly when Retry-After says, the client is admitted again.
	e.clock.Advance(35 * time.Second)
	get(t, serve, "/hello", clientA).wantStatus(t, http.StatusOK).
		wantHeader(t, "RateLimit", `"hello";r=0;t=60`)
}

func testRetryAfterRoundsUp(t *testing.T, e *httpEnv) {
	l := e.limiter(t, slidelog.Policy{Name: "one", Limit: 1, Window: time.Minute})
	serve := e.serve(t, HTTPApp{Global: mw(l), Routes: []HTTPRoute{{Pattern: "/hello"}}})
	get(t, serve, "/hello", clientA).wantStatus(t, http.StatusOK)
	e.clock.Advance(500 * time.Millisecond)
	get(t, serve, "/hello", clientA).wantStatus(t, http.StatusTooManyRequests).
		wantHeader(t, "Retry-After", "60").
		wantHeader(t, "RateLimit", `"one";r=0;t=60`)
	e.clock.Advance(59 * time.Second)
	get(t, serve, "/hello", clientA).wantStatus(t, http.StatusTooManyRequests).
		wantHeader(t, "Retry-After", "1").
		wantHeader(t, "RateLimit", `"one";r=0;t=1`)
	e.clock.Advance(500 * time.Millisecond)
	get(t, serve, "/hello", clientA).wantStatus(t, http.StatusOK)
}

func testLegacyHeaders(t *testing.T, e *httpEnv) {
	l := e.limiter(t, slidelog.Policy{Name: "hello", Limit: 2, Window: time.Minute})
	serve := e.serve(t, HTTPApp{
		Global: mw(l, httplimit.WithHeaders(httplimit.HeadersLegacy)),
		Routes: []HTTPRoute{{Pattern: "/hello"}},
	})
	get(t, serve, "/hello", clientA).wantStatus(t, http.StatusOK).
		wantHeader(t, "X-RateLimit-Limit", "2").
		wantHeader(t, "X-RateLimit-Remaining", "1").
		wantHeader(t, "X-RateLimit-Reset", "60").
		wantHeader(t, "RateLimit", "").
		wantHeader(t, "RateLimit-Policy", "")
	e.clock.Advance(15 * time.Second)
	get(t, serve, "/hello", clientA).wantStatus(t, http.StatusOK).
		wantHeader(t, "X-RateLimit-Remaining", "0").
		wantHeader(t, "X-RateLimit-Reset", "60")
	e.clock.Advance(1500 * time.Millisecond)
	get(t, serve, "/hello", clientA).wantStatus(t, http.StatusTooManyRequests).
		wantHeader(t, "X-RateLimit-Limit", "2").
		wantHeader(t, "X-RateLimit-Remaining", "0").
		wantHeader(t, "X-RateLimit-Reset", "59"). // 58.5 s until the 15 s entry leaves
		wantHeader(t, "Retry-After", "44")        // 43.5 s until the 0 s entry leaves
}

func testNoHeaders(t *testing.T, e *httpEnv) {
	l := e.limiter(t, slidelog.Policy{Name: "hello", Limit: 1, Window: time.Minute})
	serve := e.serve(t, HTTPApp{
		Global: mw(l, httplimit.WithHeaders(httplimit.HeadersNone)),
		Routes: []HTTPRoute{{Pattern: "/hello"}},
	})
	get(t, serve, "/hello", clientA).wantStatus(t, http.StatusOK).wantNoRateLimitHeaders(t)
	r := get(t, serve, "/hello", clientA)
	r.wantProblem(t, http.StatusTooManyRequests)
	r.wantHeader(t, "Retry-After", "60")
	for _, h := range rateLimitHeaders[:5] {
		r.wantHeader(t, h, "")
	}
}

func testMultiplePolicies(t *testing.T, e *httpEnv) {
	l := e.limiter(t, slidelog.Policy{Name: "burst", Limit: 2, Window: time.Second},
		slidelog.WithPolicy(slidelog.Policy{Name: "hourly", Limit: 100, Window: time.Hour}))
	serve := e.serve(t, HTTPApp{Global: mw(l), Routes: []HTTPRoute{{Pattern: "/hello"}}})
	const policy = `"burst";q=2;w=1, "hourly";q=100;w=3600`
	get(t, serve, "/hello", clientA).wantStatus(t, http.StatusOK).
		wantHeader(t, "RateLimit-Policy", policy).
		wantHeader(t, "RateLimit", `"burst";r=1;t=1, "hourly";r=99;t=3600`)
	get(t, serve, "/hello", clientA).wantStatus(t, http.StatusOK).
		wantHeader(t, "RateLimit", `"burst";r=0;t=1, "hourly";r=98;t=3600`)
	e.clock.Advance(200 * time.Millisecond)
	r := get(t, serve, "/hello", clientA)
	p := r.wantProblem(t, http.StatusTooManyRequests)
	r.wantHeader(t, "Retry-After", "1").
		wantHeader(t, "RateLimit", `"burst";r=0;t=1, "hourly";r=98;t=3600`)
	if got := fmt.Sprint(p["violated-policies"]); got != "[burst]" {
		t.Errorf("violated-policies: got %s, want [burst]", got)
	}
}

func testDeniedHandler(t *testing.T, e *httpEnv) {
	l := e.limiter(t, slidelog.Policy{Name: "hello", Limit: 1, Window: time.Minute})
	serve := e.serve(t, HTTPApp{
		Global: &HTTPMiddleware{Limiter: l, DeniedBody: "slow down"},
		Routes: []HTTPRoute{{Pattern: "/hello"}},
	})
	get(t, serve, "/hello", clientA).wantStatus(t, http.StatusOK)
	get(t, serve, "/hello", clientA).wantStatus(t, http.StatusTooManyRequests).
		wantHeader(t, "Retry-After", "60").
		wantHeader(t, "RateLimit", `"hello";r=0;t=60`).
		wantBody(t, "slow down", "denied handler's")
}

func testSkip(t *testing.T, e *httpEnv) {
	serve := e.serveSkippingHealthz(t, HTTPRoute{Pattern: "/hello"}, HTTPRoute{Pattern: "/healthz"})
	for range 5 {
		get(t, serve, "/healthz", clientA).wantStatus(t, http.StatusOK).wantNoRateLimitHeaders(t)
	}
	if n := e.store.Takes(); n != 0 {
		t.Fatalf("store takes after skipped requests: got %d, want 0", n)
	}
	get(t, serve, "/hello", clientA).wantStatus(t, http.StatusOK)
	get(t, serve, "/hello", clientA).wantStatus(t, http.StatusTooManyRequests)
	get(t, serve, "/healthz", clientA).wantStatus(t, http.StatusOK).wantNoRateLimitHeaders(t)
}

func testCost(t *testing.T, e *httpEnv) {
	l := e.limiter(t, slidelog.Policy{Name: "units", Limit: 10, Window: time.Minute})
	serve := e.serve(t, HTTPApp{Routes: []HTTPRoute{
		{Pattern: "/heavy", Middleware: mw(l, httplimit.WithCost(5))},
		{Pattern: "/light", Middleware: mw(l)},
		{Pattern: "/priced", Middleware: mw(l, httplimit.WithCostFunc(func(r *httplimit.Request) int {
			n, _ := strconv.Atoi(r.HeaderValue("X-Units"))
			return n
		}))},
	}})
	get(t, serve, "/heavy", clientA).wantStatus(t, http.StatusOK).wantHeader(t, "RateLimit", `"units";r=5;t=60`)
	get(t, serve, "/priced", clientA, "X-Units", "3").wantStatus(t, http.StatusOK).wantHeader(t, "RateLimit", `"units";r=2;t=60`)
	get(t, serve, "/heavy", clientA).wantStatus(t, http.StatusTooManyRequests).wantHeader(t, "RateLimit", `"units";r=2;t=60`)
	get(t, serve, "/light", clientA).wantStatus(t, http.StatusOK).wantHeader(t, "RateLimit", `"units";r=1;t=60`)
	get(t, serve, "/priced", clientA, "X-Units", "2").wantStatus(t, http.StatusTooManyRequests)
	get(t, serve, "/light", clientA).wantStatus(t, http.StatusOK).wantHeader(t, "RateLimit", `"units";r=0;t=60`)
	// A cost the limiter cannot take is a server error, never an admission.
	r := get(t, serve, "/priced", clientA, "X-Units", "0")
	r.wantProblem(t, http.StatusInternalServerError)
	r.wantNoInternalText(t, "cost", "slidelog")
}

func testPerRoutePolicies(t *testing.T, e *httpEnv) {
	strict := e.limiter(t, slidelog.Policy{Name: "strict", Limit: 1, Window: time.Minute})
	loose := e.limiter(t, slidelog.Policy{Name: "loose", Limit: 3, Window: time.Minute})
	global := e.limiter(t, slidelog.Policy{Name: "global", Limit: 100, Window: time.Hour})
	serve := e.serve(t, HTTPApp{
		Global: mw(global, httplimit.WithHeaders(httplimit.HeadersNone)),
		Routes: []HTTPRoute{
			{Pattern: "/strict", Middleware: mw(strict, httplimit.WithHeaders(httplimit.HeadersLegacy))},
			{Pattern: "/loose", Middleware: mw(loose, httplimit.WithHeaders(httplimit.HeadersLegacy))},
			{Pattern: "/open"},
		},
	})
	get(t, serve, "/strict", clientA).wantStatus(t, http.StatusOK).wantHeader(t, "X-RateLimit-Limit", "1")
	get(t, serve, "/strict", clientA).wantStatus(t, http.StatusTooManyRequests)
	for i := range 3 {
		get(t, serve, "/loose", clientA).wantStatus(t, http.StatusOK).
			wantHeader(t, "X-RateLimit-Limit", "3").
			wantHeader(t, "X-RateLimit-Remaining", strconv.Itoa(2-i))
	}
	get(t, serve, "/loose", clientA).wantStatus(t, http.StatusTooManyRequests)
	for range 5 {
		get(t, serve, "/open", clientA).wantStatus(t, http.StatusOK)
	}
}

// testNestedMiddlewares: a global and a route middleware both limit a
// request; the IETF fields list both, and the inner one can deny.
func testNestedMiddlewares(t *testing.T, e *httpEnv) {
	outer := e.limiter(t, slidelog.Policy{Name: "outer", Limit: 10, Window: time.Minute})
	inner := e.limiter(t, slidelog.Policy{Name: "inner", Limit: 1, Window: time.Second})
	serve := e.serveNested(t, outer, inner)
	get(t, serve, "/hello", clientA).wantStatus(t, http.StatusOK).
		wantHeader(t, "RateLimit-Policy", `"outer";q=10;w=60, "inner";q=1;w=1`).
		wantHeader(t, "RateLimit", `"outer";r=9;t=60, "inner";r=0;t=1`)
	r := get(t, serve, "/hello", clientA)
	p := r.wantProblem(t, http.StatusTooManyRequests)
	r.wantHeader(t, "RateLimit", `"outer";r=8;t=60, "inner";r=0;t=1`).wantHeader(t, "Retry-After", "1")
	if got := fmt.Sprint(p["violated-policies"]); got != "[inner]" {
		t.Errorf("violated-policies: got %s, want [inner]", got)
	}
}

// testNestedSamePolicyNames: two middlewares whose policies share a name
// (two PerMinute policies) list them under distinct names.
func testNestedSamePolicyNames(t *testing.T, e *httpEnv) {
	outer := e.limiter(t, slidelog.PerMinute(10), slidelog.WithName("outer"))
	inner := e.limiter(t, slidelog.PerMinute(2), slidelog.WithName("inner"))
	serve := e.serveNested(t, outer, inner)
	get(t, serve, "/hello", clientA).wantStatus(t, http.StatusOK).
		wantHeader(t, "RateLimit-Policy", `"per-minute";q=10;w=60, "per-minute-2";q=2;w=60`).
		wantHeader(t, "RateLimit", `"per-minute";r=9;t=60, "per-minute-2";r=1;t=60`)
}

func testKeyByRoute(t *testing.T, e *httpEnv) {
	l := e.limiter(t, slidelog.Policy{Name: "route", Limit: 2, Window: time.Minute})
	key := httplimit.Composite(httplimit.ByRoute(), httplimit.ByClientIP())
	serve := e.serve(t, HTTPApp{Routes: []HTTPRoute{
		{Pattern: "/items/:id", Middleware: mw(l, httplimit.WithKeyFunc(key))},
		{Pattern: "/things/:id", Middleware: mw(l, httplimit.WithKeyFunc(key))},
	}})
	get(t, serve, "/items/1", clientA).wantStatus(t, http.StatusOK)
	get(t, serve, "/items/2", clientA).wantStatus(t, http.StatusOK)
	get(t, serve, "/items/3", clientA).wantStatus(t, http.StatusTooManyRequests)
	get(t, serve, "/things/1", clientA).wantStatus(t, http.StatusOK)
	get(t, serve, "/items/4", "192.0.2.2:41000").wantStatus(t, http.StatusOK)
	if keys := e.store.Identities(); len(keys) != 3 {
		t.Errorf("identities: got %v, want 3 (one per route and client)", keys)
	}
}

func testLimiterFunc(t *testing.T, e *httpEnv) {
	free := e.limiter(t, slidelog.Policy{Name: "free", Limit: 1, Window: time.Minute})
	pro := e.limiter(t, slidelog.Policy{Name: "pro", Limit: 3, Window: time.Minute})
	// The plan would come from a verified claim; a header stands in for it
	// here because the suite cannot set a framework's context values.
	byPlan := func(r *httplimit.Request) *slidelog.Limiter {
		if r.HeaderValue("X-Test-Plan") == "pro" {
			return pro
		}
		return nil
	}
	serve := e.serve(t, HTTPApp{
		Global: mw(free, httplimit.WithLimiterFunc(byPlan)),
		Routes: []HTTPRoute{{Pattern: "/hello"}},
	})
	get(t, serve, "/hello", clientA).wantStatus(t, http.StatusOK).wantHeader(t, "RateLimit-Policy", `"free";q=1;w=60`)
	get(t, serve, "/hello", clientA).wantStatus(t, http.StatusTooManyRequests)
	const clientB = "192.0.2.2:41000"
	for range 3 {
		get(t, serve, "/hello", clientB, "X-Test-Plan", "pro").wantStatus(t, http.StatusOK).
			wantHeader(t, "RateLimit-Policy", `"pro";q=3;w=60`)
	}
	get(t, serve, "/hello", clientB, "X-Test-Plan", "pro").wantStatus(t, http.StatusTooManyRequests)
}

// testNoLimiter: a limiter function that chooses no limiter, on a
// middleware with none of its own, is the server's misconfiguration: the
// request is answered 500 with a problem body that names nothing
// internal and no rate-limit header field, and logged at ERROR (kind
// no_limiter) once for all such requests, to slog.Default(), as no
// limiter's logger applies. A request the function gives a limiter is
// decided as usual.
func testNoLimiter(t *testing.T, e *httpEnv) {
	logs := logbuf.CaptureDefault(t)
	pro := e.limiter(t, slidelog.Policy{Name: "pro", Limit: 3, Window: time.Minute})
	byPlan := func(r *httplimit.Request) *slidelog.Limiter {
		if r.HeaderValue("X-Test-Plan") == "pro" {
			return pro
		}
		return nil
	}
	// On the route, whose pattern every framework knows there (fiber's
	// global middleware runs before routing).
	serve := e.serve(t, HTTPApp{Routes: []HTTPRoute{
		{Pattern: "/hello", Middleware: mw(nil, httplimit.WithLimiterFunc(byPlan))},
	}})
	for range 3 {
		r := get(t, serve, "/hello", clientA)
		r.wantProblem(t, http.StatusInternalServerError)
		r.wantNoInternalText(t, "no limiter", "slidelog:", "httplimit")
		r.wantNoRateLimitHeaders(t)
	}
	get(t, serve, "/hello", clientA, "X-Test-Plan", "pro").wantStatus(t, http.StatusOK).
		wantHeader(t, "RateLimit-Policy", `"pro";q=3;w=60`)
	lines := logs.Lines("kind=no_limiter")
	if len(lines) != 1 {
		t.Fatalf("got %d records of kind no_limiter for 3 requests, want 1:\n%s", len(lines), logs.String())
	}
	for _, want := range []string{"level=ERROR", "route=/hello", "method=GET", "requests=1"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("record lacks %q:\n%s", want, lines[0])
		}
	}
}

// testSpoofedForwardedHeaders: without a trusted proxy, 1,000 rotating
// forwarded addresses from one socket land in one bucket.
func testSpoofedForwardedHeaders(t *testing.T, e *httpEnv) {
	l := e.limiter(t, slidelog.Policy{Name: "ip", Limit: 10, Window: time.Minute})
	serve := e.serve(t, HTTPApp{Global: mw(l), Routes: []HTTPRoute{{Pattern: "/hello"}}})
	allowed := 0
	for i := range 1000 {
		fake := fmt.Sprintf("203.0.%d.%d", i/256, i%256)
		r := get(t, serve, "/hello", fmt.Sprintf("198.51.100.7:%d", 20000+i),
			"X-Forwarded-For", fake+", 10.0.0.1",
			"X-Real-IP", fake,
			"True-Client-IP", fake,
			"Forwarded", "for="+fake)
		switch r.status {
		case http.StatusOK:
			allowed++
		case http.StatusTooManyRequests:
		default:
			t.Fatalf("request %d: status %d, want 200 or 429", i, r.status)
		}
	}
	if allowed != 10 {
		t.Errorf("allowed: got %d, want 10", allowed)
	}
	if keys := e.store.Identities(); len(keys) != 1 || keys["ip:198.51.100.7"] != 1000 {
		t.Errorf("identities: got %v, want only ip:198.51.100.7, 1000 times", keys)
	}
}

func testTrustedProxies(t *testing.T, e *httpEnv) {
	trusted := []string{"10.0.0.0/8", "2001:db8:ffff::/48", "192.0.2.200"}
	const xff, fwd, real = "X-Forwarded-For", "Forwarded", "X-Real-IP"
	tests := []struct {
		name   string
		via    string // the header the proxy writes
		remote string
		header []string
		want   string
	}{
		{"untrusted peer's headers ignored", xff, "192.0.2.50:1000", []string{xff, "203.0.113.9"}, "ip:192.0.2.50"},
		{"single trusted address", xff, "192.0.2.200:1000", []string{xff, "203.0.113.9"}, "ip:203.0.113.9"},
		{"one proxy", xff, "10.0.0.1:1000", []string{xff, "203.0.113.9"}, "ip:203.0.113.9"},
		{"rightmost untrusted", xff, "10.0.0.1:1000", []string{xff, "198.51.100.1, 203.0.113.9, 10.1.2.3"}, "ip:203.0.113.9"},
		{"several fields", xff, "10.0.0.1:1000", []string{xff, "198.51.100.1", xff, "203.0.113.9, 10.1.2.3"}, "ip:203.0.113.9"},
		{"ports in chain", xff, "10.0.0.1:1000", []string{xff, "203.0.113.9:5555, [2001:db8:ffff::1]:443"}, "ip:203.0.113.9"},
		{"all trusted", xff, "10.0.0.1:1000", []string{xff, "10.0.0.3, 10.0.0.2"}, "ip:10.0.0.3"},
		{"garbage stops the walk", xff, "10.0.0.1:1000", []string{xff, "203.0.113.9, garbage, 10.0.0.2"}, "ip:10.0.0.2"},
		{"empty entries stop the walk", xff, "10.0.0.1:1000", []string{xff, strings.Repeat(",", 64<<10)}, "ip:10.0.0.1"},
		{"ipv6 client grouped", xff, "[2001:db8:ffff::5]:1000", []string{xff, "2001:db8:1:2:3:4:5:6"}, "ip:2001:db8:1:2::/64"},
		{"forwarded", fwd, "10.0.0.1:1000", []string{fwd, `for=198.51.100.1, for="[2001:db8:1:2::7]:4711";proto=https, for=10.0.0.2`}, "ip:2001:db8:1:2::/64"},
		{"x-real-ip", real, "10.0.0.1:1000", []string{real, "203.0.113.10"}, "ip:203.0.113.10"},
		{"cf-connecting-ip", "CF-Connecting-IP", "10.0.0.1:1000", []string{"Cf-Connecting-Ip", "203.0.113.11", xff, "198.51.100.1"}, "ip:203.0.113.11"},
		{"no header", xff, "10.0.0.1:1000", nil, "ip:10.0.0.1"},
		{"only another header", real, "10.0.0.1:1000", []string{xff, "203.0.113.9", fwd, "for=203.0.113.9"}, "ip:10.0.0.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := NewCountingStore(e.inner)
			l := newLimiter(t, store, slidelog.Policy{Name: "ip", Limit: 100, Window: time.Minute})
			serve := e.serve(t, HTTPApp{
				Global: mw(l, httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: trusted, Header: tt.via})),
				Routes: []HTTPRoute{{Pattern: "/hello"}},
			})
			get(t, serve, "/hello", tt.remote, tt.header...).wantStatus(t, http.StatusOK)
			if keys := store.Identities(); len(keys) != 1 || keys[tt.want] != 1 {
				t.Errorf("identities: got %v, want %s", keys, tt.want)
			}
		})
	}
}

// testOnlyTheProxysHeader: behind a proxy that writes one forwarding
// header, a client rotating the others (its own X-Forwarded-For,
// Forwarded, X-Real-IP, True-Client-IP) stays one identity: 3 of 50
// admitted at limit 3, for each header a proxy may write.
func testOnlyTheProxysHeader(t *testing.T, e *httpEnv) {
	forwarding := []string{"X-Forwarded-For", "Forwarded", "X-Real-IP", "True-Client-IP", "CF-Connecting-IP"}
	for n, via := range forwarding {
		t.Run(via, func(t *testing.T) {
			real := fmt.Sprintf("203.0.113.%d", n+1) // what the proxy saw
			store := NewCountingStore(e.inner)
			l := newLimiter(t, store, slidelog.Policy{Name: "ip", Limit: 3, Window: time.Minute})
			serve := e.serve(t, HTTPApp{
				Global: mw(l, httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: []string{"10.0.0.0/8"}, Header: via})),
				Routes: []HTTPRoute{{Pattern: "/hello"}},
			})
			allowed := countStatuses(t, serve, 50, "10.0.0.1:1000", func(i int) []string {
				fake := fmt.Sprintf("198.51.100.%d", i+1)
				var header []string
				for _, h := range forwarding {
					v := fake
					if h == "Forwarded" {
						v = "for=" + fake
					}
					header = append(header, h, v) // the client's own
				}
				proxy := real
				if via == "Forwarded" {
					proxy = "for=" + real
				}
				return append(header, via, proxy) // the proxy's, appended last
			})
			if allowed != 3 {
				t.Errorf("allowed: got %d of 50, want 3", allowed)
			}
			if keys := store.Identities(); len(keys) != 1 || keys["ip:"+real] != 50 {
				t.Errorf("identities: got %v, want only ip:%s", keys, real)
			}
		})
	}
}

// testIPv6Prefix: 4,096 addresses of one /64, each of its four lower
// groups varying, land in one bucket. (The grouping is a mask: more
// addresses test nothing more, and each is a decision, on a Cluster too.)
func testIPv6Prefix(t *testing.T, e *httpEnv) {
	l := e.limiter(t, slidelog.Policy{Name: "ip", Limit: 10, Window: time.Minute})
	serve := e.serve(t, HTTPApp{Global: mw(l), Routes: []HTTPRoute{{Pattern: "/hello"}}})
	const n = 1 << 12
	var allowed, other atomic.Int64
	var wg sync.WaitGroup
	const workers = 8
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				remote := fmt.Sprintf("[2001:db8:aa:bb:%x:%x:%x:%x]:%d", i*40503&0xffff, i, i*7&0xffff, i*13&0xffff, 1024+i)
				req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/hello", nil)
				req.RemoteAddr = remote
				resp := serve(req)
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusOK:
					allowed.Add(1)
				case http.StatusTooManyRequests:
				default:
					other.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if allowed.Load() != 10 || other.Load() != 0 {
		t.Errorf("allowed: got %d (and %d other statuses), want 10", allowed.Load(), other.Load())
	}
	if keys := e.store.Identities(); len(keys) != 1 || keys["ip:2001:db8:aa:bb::/64"] != n {
		t.Errorf("identities: got %v, want only ip:2001:db8:aa:bb::/64", keys)
	}
	// The next /64 is someone else.
	get(t, serve, "/hello", "[2001:db8:aa:bc::1]:1000").wantStatus(t, http.StatusOK)

	// A configured prefix groups more widely.
	wide := e.limiter(t, slidelog.Policy{Name: "wide", Limit: 2, Window: time.Minute})
	serve = e.serve(t, HTTPApp{Global: mw(wide, httplimit.WithClientIP(httplimit.ClientIP{IPv6Prefix: 48})), Routes: []HTTPRoute{{Pattern: "/hello"}}})
	get(t, serve, "/hello", "[2001:db8:cc:1::1]:1000").wantStatus(t, http.StatusOK)
	get(t, serve, "/hello", "[2001:db8:cc:ffff::2]:1000").wantStatus(t, http.StatusOK)
	get(t, serve, "/hello", "[2001:db8:cc:1234:5678::3]:1000").wantStatus(t, http.StatusTooManyRequests)
}

func testIPNormalisation(t *testing.T, e *httpEnv) {
	l := e.limiter(t, slidelog.Policy{Name: "ip", Limit: 100, Window: time.Minute})
	serve := e.serve(t, HTTPApp{Global: mw(l), Routes: []HTTPRoute{{Pattern: "/hello"}}})
	for _, remote := range []string{"192.0.2.77:80", "192.0.2.77:81", "[::ffff:192.0.2.77]:82", "[::ffff:c000:24d]:83"} {
		get(t, serve, "/hello", remote).wantStatus(t, http.StatusOK)
	}
	if keys := e.store.Identities(); len(keys) != 1 || keys["ip:192.0.2.77"] != 4 {
		t.Errorf("identities: got %v, want only ip:192.0.2.77, 4 times", keys)
	}
}

// testBadIdentityBeforeStore: oversized and missing identities are 4xx
// with no store call.
func testBadIdentityBeforeStore(t *testing.T, e *httpEnv) {
	l := e.limiter(t, slidelog.Policy{Name: "key", Limit: 10, Window: time.Minute})
	serve := e.serve(t, HTTPApp{
		Global: mw(l, httplimit.WithKeyFunc(httplimit.ByHeader("X-Api-Key"))),
		Routes: []HTTPRoute{{Pattern: "/hello"}},
	})
	huge := strings.Repeat("k", 10<<10)
	r := get(t, serve, "/hello", clientA, "X-Api-Key", huge)
	r.wantProblem(t, http.StatusRequestHeaderFieldsTooLarge)
	r.wantNoInternalText(t, huge[:300])
	r.wantNoRateLimitHeaders(t)
	get(t, serve, "/hello", clientA, "X-Api-Key", strings.Repeat("k", defaultMaxKeyLength)).
		wantProblem(t, http.StatusRequestHeaderFieldsTooLarge)
	get(t, serve, "/hello", clientA).wantProblem(t, http.StatusBadRequest)
	get(t, serve, "/hello", clientA, "X-Api-Key", "   ").wantProblem(t, http.StatusBadRequest)
	if n := e.store.Takes(); n != 0 {
		t.Fatalf("store takes after bad identities: got %d, want 0", n)
	}
	get(t, serve, "/hello", clientA, "X-Api-Key", "key-1").wantStatus(t, http.StatusOK)
	if n := e.store.Takes(); n != 1 {
		t.Errorf("store takes: got %d, want 1", n)
	}
}

func testShadowMode(t *testing.T, e *httpEnv) {
	l := e.limiter(t, slidelog.Policy{Name: "shadow", Limit: 2, Window: time.Minute})
	var mu sync.Mutex
	var reported []slidelog.Result
	report := func(_ *httplimit.Request, res slidelog.Result, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			t.Errorf("shadow report: unexpected error %v", err)
		}
		reported = append(reported, res)
	}
	serve := e.serve(t, HTTPApp{
		Global: mw(l, httplimit.WithShadowMode(report)),
		Routes: []HTTPRoute{{Pattern: "/hello"}},
	})
	for i := range 5 {
		r := get(t, serve, "/hello", clientA).wantStatus(t, http.StatusOK).
			wantHeader(t, "RateLimit", fmt.Sprintf(`"shadow";r=%d;t=60`, max(1-i, 0))).
			wantHeader(t, "Retry-After", "")
		if r.body != "ok" {
			t.Errorf("request %d: body %q, want the handler's", i, r.body)
		}
	}
	mu.Lock()
	got := append([]slidelog.Result(nil), reported...)
	mu.Unlock()
	if len(got) != 3 {
		t.Fatalf("shadow reports: got %d, want 3", len(got))
	}
	for _, res := range got {
		if res.Allowed || res.RetryAfter != time.Minute {
			t.Errorf("shadow report: got allowed=%v retry=%v, want a denial retrying in 1m", res.Allowed, res.RetryAfter)
		}
	}
	// Only admissions were recorded: after the window, full capacity.
	e.clock.Advance(time.Minute)
	get(t, serve, "/hello", clientA).wantHeader(t, "RateLimit", `"shadow";r=1;t=60`)

	// Shadow mode lets requests through when the limiter cannot decide.
	failing := newLimiter(t, failingStore{}, slidelog.Policy{Name: "down", Limit: 1, Window: time.Minute}, slidelog.WithFailureMode(slidelog.FailError))
	serve = e.serve(t, HTTPApp{Global: mw(failing, httplimit.WithShadowMode(nil)), Routes: []HTTPRoute{{Pattern: "/hello"}}})
	get(t, serve, "/hello", clientA).wantStatus(t, http.StatusOK).wantNoRateLimitHeaders(t)
}

func testRefundOnServerError(t *testing.T, e *httpEnv) {
	refunded := e.limiter(t, slidelog.Policy{Name: "refunded", Limit: 2, Window: time.Minute})
	counted := e.limiter(t, slidelog.Policy{Name: "counted", Limit: 2, Window: time.Minute})
	serve := e.serve(t, HTTPApp{Routes: []HTTPRoute{
		{Pattern: "/fail", Status: http.StatusInternalServerError, Middleware: mw(refunded, httplimit.WithRefundOnServerError())},
		{Pattern: "/unavailable", Status: http.StatusServiceUnavailable, Middleware: mw(refunded, httplimit.WithRefundOnServerError())},
		{Pattern: "/teapot", Status: http.StatusTeapot, Middleware: mw(refunded, httplimit.WithRefundOnServerError())},
		{Pattern: "/ok", Middleware: mw(refunded, httplimit.WithRefundOnServerError())},
		{Pattern: "/fail-counted", Status: http.StatusInternalServerError, Middleware: mw(counted)},
	}})
	for range 4 {
		get(t, serve, "/fail", clientA).wantStatus(t, http.StatusInternalServerError)
		get(t, serve, "/unavailable", clientA).wantStatus(t, http.StatusServiceUnavailable)
	}
	if n := e.store.Refunds(); n != 8 {
		t.Errorf("refunds: got %d, want 8", n)
	}
	get(t, serve, "/ok", clientA).wantStatus(t, http.StatusOK).wantHeader(t, "RateLimit", `"refunded";r=1;t=60`)
	get(t, serve, "/teapot", clientA).wantStatus(t, http.StatusTeapot) // a 4xx is the client's: it counts
	get(t, serve, "/ok", clientA).wantStatus(t, http.StatusTooManyRequests)
	if n := e.store.Refunds(); n != 8 {
		t.Errorf("refunds after 2xx and 4xx: got %d, want 8", n)
	}

	// Without the option a 5xx counts.
	get(t, serve, "/fail-counted", clientA).wantStatus(t, http.StatusInternalServerError)
	get(t, serve, "/fail-counted", clientA).wantStatus(t, http.StatusInternalServerError)
	get(t, serve, "/fail-counted", clientA).wantStatus(t, http.StatusTooManyRequests)
}

// errSecret is the kind of internal detail a store error carries and a
// response must never show.
const errSecret = "dial tcp 10.9.8.7:6379: connect: connection refused"

type failingStore struct{}

func (failingStore) Take(context.Context, slidelog.Request) (slidelog.Result, error) {
	return slidelog.Result{}, fmt.Errorf("%w: %w", slidelog.ErrUnavailable, errors.New(errSecret))
}
func (failingStore) Refund(context.Context, slidelog.Request) error { return nil }
func (failingStore) Reset(context.Context, slidelog.Request) error  { return nil }
func (failingStore) Close() error                                   { return nil }

func testLimiterError(t *testing.T, e *httpEnv) {
	failing := newLimiter(t, failingStore{}, slidelog.Policy{Name: "down", Limit: 1, Window: time.Minute}, slidelog.WithFailureMode(slidelog.FailError))
	serve := e.serve(t, HTTPApp{Global: mw(failing), Routes: []HTTPRoute{{Pattern: "/hello"}}})
	r := get(t, serve, "/hello", clientA)
	p := r.wantProblem(t, http.StatusServiceUnavailable)
	r.wantNoInternalText(t, "10.9.8.7", "dial", "refused", "slidelog:")
	r.wantNoRateLimitHeaders(t)
	if p["type"] != httplimit.ProblemTypeUnavailable {
		t.Errorf("problem type: got %v, want %q", p["type"], httplimit.ProblemTypeUnavailable)
	}

	serve = e.serve(t, HTTPApp{Global: &HTTPMiddleware{Limiter: failing, ErrorBody: "limiter down"}, Routes: []HTTPRoute{{Pattern: "/hello"}}})
	get(t, serve, "/hello", clientA).wantStatus(t, http.StatusServiceUnavailable).
		wantBody(t, "limiter down", "error handler's")
}

// testSkipBypass: SkipPaths("/healthz") must skip only what the router
// serves from the /healthz route. Encoded slashes, dot segments, double
// slashes, percent-encoded letters and trailing slashes that the router
// serves from another route (/users/:id, /:page) are limited: at most one
// of five requests of a fresh client reaches such a handler at limit 1.
func testSkipBypass(t *testing.T, e *httpEnv) {
	serve := e.serveSkippingHealthz(t, HTTPRoute{Pattern: "/healthz"}, HTTPRoute{Pattern: "/users/:id"}, HTTPRoute{Pattern: "/:page"})
	attacks := []string{
		"/users/..%2f..%2fhealthz", "/users/..%2Fhealthz", "/users/%2e%2e%2fhealthz", "/users/../healthz",
		"/users/./../healthz", "/./healthz", "/%68ealthz", "/%2568ealthz", "/healthz%2f", "/healthz/",
		"//healthz", "/users//healthz", "/HEALTHZ", "/healthz%20", "/users/healthz",
	}
	for i, path := range attacks {
		remote := fmt.Sprintf("198.51.100.%d:1000", i+1)
		handled := 0
		for range 5 {
			r := get(t, serve, path, remote)
			route := r.header.Get(RouteHeader)
			switch {
			case route == "/healthz":
				// The router served the skipped route itself: skipping it is right.
			case r.status == http.StatusOK:
				handled++
			case r.status == http.StatusTooManyRequests, r.status == http.StatusNotFound,
				r.status == http.StatusBadRequest, r.status >= 300 && r.status < 400:
			default:
				t.Errorf("GET %s: status %d", path, r.status)
			}
		}
		if handled > 1 {
			t.Errorf("GET %s: %d of 5 requests reached a handler other than /healthz at limit 1: the skip rule was bypassed", path, handled)
		}
	}
	// The real path is still skipped.
	for range 3 {
		get(t, serve, "/healthz", clientA).wantStatus(t, http.StatusOK).wantNoRateLimitHeaders(t).
			wantHeader(t, RouteHeader, "/healthz")
	}
}

// testHeaderNameCase: header names are matched without regard to case, on
// every adapter, also where the framework keeps names as sent (fiber's
// DisableHeaderNormalizing) or code wrote a non-canonical name. 20
// clients behind a proxy that writes "x-forwarded-for" in lower case (as
// Envoy does) are 20 identities, not the proxy's one; an API key sent as
// "x-api-key" is found.
func testHeaderNameCase(t *testing.T, e *httpEnv) {
	l := e.limiter(t, slidelog.Policy{Name: "ip", Limit: 1, Window: time.Minute})
	serve := e.serve(t, HTTPApp{
		RawHeaderNames: true,
		Global:         mw(l, httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: []string{"10.0.0.0/8"}, Header: "X-Forwarded-For"})),
		Routes:         []HTTPRoute{{Pattern: "/hello"}},
	})
	raw := func(path string, header ...string) *http.Request {
		req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, path, nil)
		req.RemoteAddr = "10.0.0.1:1000"
		for i := 0; i+1 < len(header); i += 2 {
			req.Header[header[i]] = append(req.Header[header[i]], header[i+1]) // the name as written
		}
		return req
	}
	allowed := 0
	for i := range 20 {
		if send(t, serve, raw("/hello", "x-forwarded-for", fmt.Sprintf("203.0.113.%d", i+1))).status == http.StatusOK {
			allowed++
		}
	}
	if allowed != 20 {
		t.Errorf("allowed: got %d of 20 clients, want 20 (one each)", allowed)
	}
	if keys := e.store.Identities(); len(keys) != 20 || keys["ip:10.0.0.1"] != 0 {
		t.Errorf("identities: got %d (%v), want 20 clients and not the proxy", len(keys), keys)
	}

	byKey := e.limiter(t, slidelog.Policy{Name: "key", Limit: 1, Window: time.Minute})
	serve = e.serve(t, HTTPApp{
		RawHeaderNames: true,
		Global:         mw(byKey, httplimit.WithKeyFunc(httplimit.ByHeader("X-Api-Key"))),
		Routes:         []HTTPRoute{{Pattern: "/hello"}},
	})
	send(t, serve, raw("/hello", "x-api-key", "key-1")).wantStatus(t, http.StatusOK)
	send(t, serve, raw("/hello", "X-API-KEY", "key-1")).wantStatus(t, http.StatusTooManyRequests)
	send(t, serve, raw("/hello", "x-api-key", "key-2")).wantStatus(t, http.StatusOK)
}

// ctxKey is a context key type of the suite; userKey and orgKey are two
// keys of that one type.
type ctxKey int

const (
	userKey ctxKey = iota
	orgKey
)

// nilStringer panics in String when nil.
type nilStringer struct{ s string }

func (n *nilStringer) String() string { return n.s }

// withValues sends GET path from remote with the context values kv.
func withValues(t *testing.T, serve HTTPServe, path, remote string, kv ...any) reply {
	t.Helper()
	ctx := t.Context()
	for i := 0; i+1 < len(kv); i += 2 {
		ctx = context.WithValue(ctx, kv[i], kv[i+1])
	}
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, path, nil)
	req.RemoteAddr = remote
	return send(t, serve, req)
}

// testContextValues: identities from context values. Two keys of one type
// are two identities; a typed nil is no identity (FirstOf moves on, no
// panic); a value of a type that cannot be an identity is the server's
// misconfiguration (500), not an unavailable store (503).
func testContextValues(t *testing.T, e *httpEnv) {
	l := e.limiter(t, slidelog.Policy{Name: "user", Limit: 1, Window: time.Minute})
	key := httplimit.FirstOf(httplimit.ByContextValue(userKey), httplimit.ByContextValue(orgKey), httplimit.ByClientIP())
	serve := e.serve(t, HTTPApp{Global: mw(l, httplimit.WithKeyFunc(key)), Routes: []HTTPRoute{{Pattern: "/hello"}}})

	withValues(t, serve, "/hello", clientA, userKey, "7").wantStatus(t, http.StatusOK)
	withValues(t, serve, "/hello", clientA, orgKey, "7").wantStatus(t, http.StatusOK) // not user 7's bucket
	withValues(t, serve, "/hello", clientA, userKey, "7").wantStatus(t, http.StatusTooManyRequests)

	withValues(t, serve, "/hello", "192.0.2.9:1", userKey, (*nilStringer)(nil)).wantStatus(t, http.StatusOK)
	withValues(t, serve, "/hello", "192.0.2.9:1", userKey, (*nilStringer)(nil)).wantStatus(t, http.StatusTooManyRequests)
	if keys := e.store.Identities(); len(keys) != 3 || keys["ip:192.0.2.9"] != 2 {
		t.Errorf("identities: got %v, want user 7, org 7 and ip:192.0.2.9 twice", keys)
	}

	takes := e.store.Takes()
	r := withValues(t, serve, "/hello", clientA, userKey, 1.5)
	r.wantProblem(t, http.StatusInternalServerError)
	r.wantNoInternalText(t, "float64", "slidelog")
	r.wantNoRateLimitHeaders(t)
	if n := e.store.Takes(); n != takes {
		t.Errorf("store takes for a misconfigured identity: got %d, want none", n-takes)
	}
}

// testFailOpenStateUnknown: an admission of FailOpen checked nothing, so
// the response must not say r=0 (nothing left): it sends the policy and
// omits the state.
func testFailOpenStateUnknown(t *testing.T, e *httpEnv) {
	open := newLimiter(t, failingStore{}, slidelog.Policy{Name: "down", Limit: 5, Window: time.Minute}, slidelog.WithFailureMode(slidelog.FailOpen))
	serve := e.serve(t, HTTPApp{Global: mw(open), Routes: []HTTPRoute{{Pattern: "/hello"}}})
	get(t, serve, "/hello", clientA).wantStatus(t, http.StatusOK).
		wantHeader(t, "RateLimit-Policy", `"down";q=5;w=60`).
		wantHeader(t, "RateLimit", "").
		wantHeader(t, "Retry-After", "")
	serve = e.serve(t, HTTPApp{Global: mw(open, httplimit.WithHeaders(httplimit.HeadersLegacy)), Routes: []HTTPRoute{{Pattern: "/hello"}}})
	get(t, serve, "/hello", clientA).wantStatus(t, http.StatusOK).
		wantHeader(t, "X-RateLimit-Limit", "5").
		wantHeader(t, "X-RateLimit-Remaining", "").
		wantHeader(t, "X-RateLimit-Reset", "")
}

// testIPv6TwoLevels: one allocation (a /48) holds 65,536 /64s. A limit per
// /64 alone gives it 65,536 budgets; a second middleware limiting the /48
// bounds the whole allocation: 400 /64s of one /48, 2 requests each, get
// at most the /48's 50, while another /48 keeps its own budget.
func testIPv6TwoLevels(t *testing.T, e *httpEnv) {
	network := e.limiter(t, slidelog.Policy{Name: "per-48", Limit: 50, Window: time.Minute})
	host := e.limiter(t, slidelog.Policy{Name: "per-64", Limit: 2, Window: time.Minute})
	serve := e.serve(t, HTTPApp{
		Global: mw(network, httplimit.WithClientIP(httplimit.ClientIP{IPv6Prefix: 48})),
		Routes: []HTTPRoute{{Pattern: "/hello", Middleware: mw(host)}},
	})
	allowed := 0
	for i := range 400 {
		for range 2 {
			switch r := get(t, serve, "/hello", fmt.Sprintf("[2001:db8:77:%x::1]:1000", i)); r.status {
			case http.StatusOK:
				allowed++
			case http.StatusTooManyRequests:
			default:
				t.Fatalf("/64 %d: status %d", i, r.status)
			}
		}
	}
	if allowed != 50 {
		t.Errorf("allowed: got %d of 800 from one /48, want its 50", allowed)
	}
	r := get(t, serve, "/hello", "[2001:db8:78::1]:1000").wantStatus(t, http.StatusOK)
	r.wantHeader(t, "RateLimit", `"per-48";r=49;t=60, "per-64";r=1;t=60`)
}
