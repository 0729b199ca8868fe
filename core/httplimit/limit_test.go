package httplimit_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/slidelogtest"
)

// newEngine returns httplimit.New(l, opts...); it fails the test if New
// returns an error.
func newEngine(t *testing.T, l *slidelog.Limiter, opts ...httplimit.Option) *httplimit.Engine {
	t.Helper()
	e, err := httplimit.New(l, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func newMemory(t *testing.T) (*slidelogtest.CountingStore, *slidelogtest.Clock) {
	t.Helper()
	clock := slidelogtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	inner := memstore.New(memstore.WithClock(clock.Now))
	t.Cleanup(func() { _ = inner.Close() })
	return slidelogtest.NewCountingStore(inner), clock
}

func TestNewErrors(t *testing.T) {
	store, _ := newMemory(t)
	l := slidelogtest.NewLimiter(t, store, slidelog.PerSecond(1))
	one := func(*httplimit.Request) int { return 1 }
	mine := func(*httplimit.Request) *slidelog.Limiter { return l }
	tests := []struct {
		name string
		l    *slidelog.Limiter
		opts []httplimit.Option
	}{
		{"nil limiter", nil, nil},
		{"bad cidr", l, []httplimit.Option{httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: []string{"10.0.0.0/40"}})}},
		{"trust every address", l, []httplimit.Option{httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: []string{"0.0.0.0/0"}, Header: "X-Real-IP"})}},
		{"trusted proxies, no header", l, []httplimit.Option{httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: []string{"10.0.0.0/8"}})}},
		{"all peers trusted, no header", l, []httplimit.Option{httplimit.WithClientIP(httplimit.ClientIP{AllPeersTrusted: true})}},
		{"header, no trusted proxy", l, []httplimit.Option{httplimit.WithClientIP(httplimit.ClientIP{Header: "X-Real-IP"})}},
		{"bad header name", l, []httplimit.Option{httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: []string{"10.0.0.0/8"}, Header: "X Real IP"})}},
		{"empty header name", l, []httplimit.Option{httplimit.WithClientIP(httplimit.ClientIP{TrustedProxies: []string{"10.0.0.0/8"}, Header: ""})}},
		{"unix socket proxy, no header", l, []httplimit.Option{httplimit.WithClientIP(httplimit.ClientIP{UnixSocketProxy: true})}},
		{"two client IP options", l, []httplimit.Option{httplimit.WithClientIP(httplimit.ClientIP{}), httplimit.WithClientIP(httplimit.ClientIP{IPv6Prefix: 48})}},
		{"ipv6 prefix -1", l, []httplimit.Option{httplimit.WithClientIP(httplimit.ClientIP{IPv6Prefix: -1})}},
		{"ipv6 prefix 129", l, []httplimit.Option{httplimit.WithClientIP(httplimit.ClientIP{IPv6Prefix: 129})}},
		{"cost 0", l, []httplimit.Option{httplimit.WithCost(0)}},
		{"nil key func", l, []httplimit.Option{httplimit.WithKeyFunc(nil)}},
		{"header style", l, []httplimit.Option{httplimit.WithHeaders(httplimit.HeaderStyle(9))}},
		{"nil cost func", l, []httplimit.Option{httplimit.WithCostFunc(nil)}},
		{"nil limiter func", l, []httplimit.Option{httplimit.WithLimiterFunc(nil)}},
		{"cost and cost func", l, []httplimit.Option{httplimit.WithCostFunc(one), httplimit.WithCost(2)}},
		{"two cost funcs", l, []httplimit.Option{httplimit.WithCostFunc(one), httplimit.WithCostFunc(one)}},
		{"two limiter funcs", l, []httplimit.Option{httplimit.WithLimiterFunc(mine), httplimit.WithLimiterFunc(mine)}},
	}
	for _, tt := range tests {
		if _, err := httplimit.New(tt.l, tt.opts...); !errors.Is(err, slidelog.ErrInvalidOption) {
			t.Errorf("%s: got %v, want ErrInvalidOption", tt.name, err)
		}
	}
}

func TestCheckOutcomes(t *testing.T) {
	store, _ := newMemory(t)
	l := slidelogtest.NewLimiter(t, store, slidelog.Policy{Name: "p", Limit: 1, Window: time.Minute})
	h, err := httplimit.New(l, httplimit.WithSkipFunc(httplimit.SkipPaths("/healthz")))
	if err != nil {
		t.Fatal(err)
	}
	skip := newSource("192.0.2.1:1")
	skip.path = "/healthz"
	if d := h.Check(skip); d.Outcome != httplimit.OutcomeNext || !d.Skipped || len(d.Header) != 0 {
		t.Errorf("skipped: got %v skipped=%v header=%v", d.Outcome, d.Skipped, d.Header)
	}
	if d := h.Check(newSource("192.0.2.1:1")); d.Outcome != httplimit.OutcomeNext || !d.Result.Allowed {
		t.Errorf("first: got %v, want next and allowed", d.Outcome)
	}
	d := h.Check(newSource("192.0.2.1:1"))
	if d.Outcome != httplimit.OutcomeDenied || d.Result.Allowed {
		t.Fatalf("second: got %v, want denied", d.Outcome)
	}
	if last := d.Header[len(d.Header)-1]; last.Name != "Retry-After" || last.Value != "60" {
		t.Errorf("second: last header %v, want Retry-After: 60", last)
	}
	if d := h.Check(newSource("@")); d.Outcome != httplimit.OutcomeError || !errors.Is(d.Err, slidelog.ErrInvalidKey) {
		t.Errorf("unix socket: got %v, %v, want error ErrInvalidKey", d.Outcome, d.Err)
	}
	if store.Takes() != 2 {
		t.Errorf("takes: got %d, want 2", store.Takes())
	}
	if got := httplimit.OutcomeDenied.String(); got != "denied" {
		t.Errorf("String: got %q", got)
	}
}

func TestEmptyIdentityIsNoKey(t *testing.T) {
	store, _ := newMemory(t)
	l := slidelogtest.NewLimiter(t, store, slidelog.PerSecond(1))
	h, _ := httplimit.New(l, httplimit.WithKeyFunc(func(*httplimit.Request) (string, error) { return "", nil }))
	if d := h.Check(newSource("192.0.2.1:1")); !errors.Is(d.Err, httplimit.ErrNoKey) || store.Takes() != 0 {
		t.Errorf("got %v with %d takes, want ErrNoKey and no store call", d.Err, store.Takes())
	}
}

func TestOversizedIdentity(t *testing.T) {
	store, _ := newMemory(t)
	l := slidelogtest.NewLimiter(t, store, slidelog.PerSecond(1))
	h, _ := httplimit.New(l, httplimit.WithKeyFunc(httplimit.ByHeader("X-Key")))
	d := h.Check(newSource("192.0.2.1:1", "X-Key", strings.Repeat("x", 1<<20)))
	if !errors.Is(d.Err, httplimit.ErrIdentityTooLong) || store.Takes() != 0 {
		t.Errorf("got %v with %d takes, want ErrIdentityTooLong and no store call", d.Err, store.Takes())
	}
	if p := httplimit.ErrorProblem(d.Err); p.Status != 431 {
		t.Errorf("status: got %d, want 431", p.Status)
	}
}

// Limiters with different names on one store never share an identity's
// log, whatever their policies; a second open limiter of one name on one
// store is refused.
func TestLimiterNamespaces(t *testing.T) {
	store, _ := newMemory(t)
	short := slidelogtest.NewLimiter(t, store, slidelog.Policy{Name: "short", Limit: 1, Window: time.Second})
	long := slidelogtest.NewLimiter(t, store, slidelog.Policy{Name: "long", Limit: 1, Window: time.Hour})
	if _, err := slidelog.New(store, slidelog.Policy{Name: "long", Limit: 1, Window: time.Hour}); !errors.Is(err, slidelog.ErrNameTaken) {
		t.Fatalf("New with the name of an open limiter: error %v, want ErrNameTaken", err)
	}
	check := func(l *slidelog.Limiter, want bool) {
		t.Helper()
		h, _ := httplimit.New(l)
		if d := h.Check(newSource("192.0.2.1:1")); d.Result.Allowed != want {
			t.Errorf("%s: allowed %v, want %v", l.Policies()[0], d.Result.Allowed, want)
		}
	}
	check(short, true)
	check(long, true)
	check(long, false)
}

func TestShadowModeOutcomes(t *testing.T) {
	store, _ := newMemory(t)
	l := slidelogtest.NewLimiter(t, store, slidelog.Policy{Name: "p", Limit: 1, Window: time.Minute})
	var reports []error
	h, _ := httplimit.New(l, httplimit.WithKeyFunc(httplimit.ByHeader("X-Key")),
		httplimit.WithShadowMode(func(_ *httplimit.Request, _ slidelog.Result, err error) { reports = append(reports, err) }))
	for i, src := range []*source{
		newSource("192.0.2.1:1", "X-Key", "a"),
		newSource("192.0.2.1:1", "X-Key", "a"),
		newSource("192.0.2.1:1"),
	} {
		d := h.Check(src)
		if d.Outcome != httplimit.OutcomeNext {
			t.Errorf("request %d: got %v, want next", i, d.Outcome)
		}
		for _, f := range d.Header {
			if f.Name == "Retry-After" {
				t.Errorf("request %d: Retry-After in shadow mode", i)
			}
		}
	}
	if len(reports) != 2 || reports[0] != nil || !errors.Is(reports[1], httplimit.ErrNoKey) {
		t.Errorf("reports: got %v, want [nil, ErrNoKey]", reports)
	}
}

// Shadow mode tells report of a request whose key, skip, cost or limiter
// function panicked, once; a report function that panics itself is
// ignored, and the request still goes on with its headers.
func TestShadowModeReportsPanics(t *testing.T) {
	store, _ := newMemory(t)
	l := slidelogtest.NewLimiter(t, store, slidelog.Policy{Name: "p", Limit: 1, Window: time.Minute})
	boom := func(*httplimit.Request) (string, error) { panic("boom") }
	var reports []error
	h, err := httplimit.New(l, httplimit.WithKeyFunc(boom),
		httplimit.WithShadowMode(func(_ *httplimit.Request, _ slidelog.Result, err error) { reports = append(reports, err) }))
	if err != nil {
		t.Fatal(err)
	}
	if d := h.Check(newSource("192.0.2.1:1")); d.Outcome != httplimit.OutcomeNext || !errors.Is(d.Err, httplimit.ErrMisconfigured) {
		t.Errorf("panicking key func: got %v, %v, want next and ErrMisconfigured", d.Outcome, d.Err)
	}
	if len(reports) != 1 || !errors.Is(reports[0], httplimit.ErrMisconfigured) {
		t.Errorf("reports: got %v, want one error wrapping ErrMisconfigured", reports)
	}

	calls := 0
	loud, err := httplimit.New(l, httplimit.WithKeyFunc(httplimit.ByHeader("X-Key")),
		httplimit.WithShadowMode(func(*httplimit.Request, slidelog.Result, error) { calls++; panic("report") }))
	if err != nil {
		t.Fatal(err)
	}
	loud.Check(newSource("192.0.2.1:1", "X-Key", "a")) // admitted: not reported
	d := loud.Check(newSource("192.0.2.1:1", "X-Key", "a"))
	if d.Outcome != httplimit.OutcomeNext || d.Err != nil || d.Result.Allowed || len(d.Header) == 0 {
		t.Errorf("panicking report on a denial: got %v, %v, allowed=%v, header=%v, want next, no error, the denial and its headers", d.Outcome, d.Err, d.Result.Allowed, d.Header)
	}
	if d := loud.Check(newSource("192.0.2.1:1")); d.Outcome != httplimit.OutcomeNext || !errors.Is(d.Err, httplimit.ErrNoKey) {
		t.Errorf("panicking report on no key: got %v, %v, want next and ErrNoKey", d.Outcome, d.Err)
	}
	if calls != 2 {
		t.Errorf("report calls: got %d, want 2 (once per request it would have blocked)", calls)
	}
}

func TestFinishRefunds(t *testing.T) {
	store, clock := newMemory(t)
	l := slidelogtest.NewLimiter(t, store, slidelog.Policy{Name: "p", Limit: 1, Window: time.Minute})
	h, _ := httplimit.New(l, httplimit.WithRefundOnServerError())
	for _, status := range []int{500, 503, 599} {
		d := h.Check(newSource("192.0.2.1:1"))
		if !d.Result.Allowed {
			t.Fatalf("status %d: request denied, want the previous 5xx refunded", status)
		}
		d.Finish(status)
		d.Finish(status) // idempotent
	}
	if store.Refunds() != 3 {
		t.Errorf("refunds: got %d, want 3", store.Refunds())
	}
	clock.Advance(time.Millisecond)
	h.Check(newSource("192.0.2.1:1")).Finish(499)
	if d := h.Check(newSource("192.0.2.1:1")); d.Result.Allowed {
		t.Error("after a 499: allowed, want denied (4xx is not refunded)")
	}
	h.Check(newSource("192.0.2.1:1")).Finish(500) // a denial: nothing to refund
	if store.Refunds() != 3 {
		t.Errorf("refunds: got %d, want 3", store.Refunds())
	}
}

// A key function that panics, a nil source, or a zero Engine give an
// error wrapping ErrMisconfigured, never a panic.
func TestCheckNeverPanics(t *testing.T) {
	store, _ := newMemory(t)
	l := slidelogtest.NewLimiter(t, store, slidelog.PerSecond(10))
	boom := func(*httplimit.Request) (string, error) { panic("boom") }
	h, err := httplimit.New(l, httplimit.WithKeyFunc(boom))
	if err != nil {
		t.Fatal(err)
	}
	if d := h.Check(newSource("192.0.2.1:1")); d.Outcome != httplimit.OutcomeError || !errors.Is(d.Err, httplimit.ErrMisconfigured) {
		t.Errorf("panicking key func: got %v, %v, want an error wrapping ErrMisconfigured", d.Outcome, d.Err)
	} else if p := httplimit.ErrorProblem(d.Err); p.Status != 500 || strings.Contains(string(p.JSON()), "boom") {
		t.Errorf("problem: got %d %s, want 500 without the panic's text", p.Status, p.JSON())
	}
	shadow, err := httplimit.New(l, httplimit.WithKeyFunc(boom), httplimit.WithShadowMode(nil))
	if err != nil {
		t.Fatal(err)
	}
	if d := shadow.Check(newSource("192.0.2.1:1")); d.Outcome != httplimit.OutcomeNext {
		t.Errorf("shadow mode: got %v, want next", d.Outcome)
	}
	def, err := httplimit.New(l)
	if err != nil {
		t.Fatal(err)
	}
	if d := def.Check(nil); d.Outcome != httplimit.OutcomeError || !errors.Is(d.Err, slidelog.ErrInvalidKey) {
		t.Errorf("nil source: got %v, %v, want ErrInvalidKey", d.Outcome, d.Err)
	}
	for _, z := range []*httplimit.Engine{nil, {}} {
		d := z.Check(newSource("192.0.2.1:1"))
		if d.Outcome != httplimit.OutcomeError || !errors.Is(d.Err, httplimit.ErrMisconfigured) {
			t.Errorf("%v: got %v, %v, want ErrMisconfigured", z, d.Outcome, d.Err)
		}
		d.Finish(500)
	}
	var none *httplimit.Decision
	none.Finish(500)
}

type (
	deniedFunc = func(http.ResponseWriter, *http.Request, slidelog.Result)
	errorFunc  = func(http.ResponseWriter, *http.Request, error)
)

// Handlers gives an adapter its own handlers back with their types, and
// refuses another adapter's.
func TestHandlers(t *testing.T) {
	store, _ := newMemory(t)
	l := slidelogtest.NewLimiter(t, store, slidelog.PerSecond(1))
	e, err := httplimit.New(l)
	if err != nil {
		t.Fatal(err)
	}
	if d, h, err := httplimit.Handlers[deniedFunc, errorFunc](e); d != nil || h != nil || err != nil {
		t.Errorf("no handlers: got %v, %v, %v, want nil, nil, nil", d != nil, h != nil, err)
	}
	var denied, failed bool
	e, err = httplimit.New(l,
		httplimit.WithDeniedHandler(func(http.ResponseWriter, *http.Request, slidelog.Result) { denied = true }),
		httplimit.WithErrorHandler(func(http.ResponseWriter, *http.Request, error) { failed = true }))
	if err != nil {
		t.Fatal(err)
	}
	d, h, err := httplimit.Handlers[deniedFunc, errorFunc](e)
	if err != nil || d == nil || h == nil {
		t.Fatalf("handlers: got %v, %v, %v, want both", d != nil, h != nil, err)
	}
	d(nil, nil, slidelog.Result{})
	h(nil, nil, nil)
	if !denied || !failed {
		t.Errorf("called: denied %v, error %v, want the handlers given", denied, failed)
	}
	for name, o := range map[string]httplimit.Option{
		"denied": httplimit.WithDeniedHandler(func(*http.Request, slidelog.Result) {}),
		"error":  httplimit.WithErrorHandler(func(*http.Request, error) {}),
	} {
		e, err := httplimit.New(l, o)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := httplimit.Handlers[deniedFunc, errorFunc](e); !errors.Is(err, slidelog.ErrInvalidOption) {
			t.Errorf("%s handler of another type: got %v, want ErrInvalidOption", name, err)
		}
	}
	var nilDenied deniedFunc
	e, err = httplimit.New(l, httplimit.WithDeniedHandler(nilDenied), httplimit.WithErrorHandler(nil))
	if err != nil {
		t.Fatal(err)
	}
	if d, h, err := httplimit.Handlers[deniedFunc, errorFunc](e); d != nil || h != nil || err != nil {
		t.Errorf("nil handlers: got %v, %v, %v, want nil, nil, nil (the defaults)", d != nil, h != nil, err)
	}
	if e, _ := httplimit.New(l); e.RefundsOnServerError() {
		t.Error("RefundsOnServerError without the option: got true")
	}
	if e, _ := httplimit.New(l, httplimit.WithRefundOnServerError()); !e.RefundsOnServerError() {
		t.Error("RefundsOnServerError with the option: got false")
	}
}

// With a policy func, the header fields and the 429 name the policies
// applied to each request: its plan's.
func TestPolicyFuncHeaders(t *testing.T) {
	store, _ := newMemory(t)
	l := slidelogtest.NewLimiter(t, store, slidelog.PerMinute(1), slidelog.WithName("plans"),
		slidelog.WithPolicyFunc(func(_ context.Context, key string) ([]slidelog.Policy, error) {
			if key == "ip:192.0.2.9" {
				return []slidelog.Policy{slidelog.PerMinute(5), slidelog.PerDay(50)}, nil
			}
			return nil, nil
		}))
	e := newEngine(t, l)
	header := func(d *httplimit.Decision, name string) string {
		for _, f := range d.Header {
			if f.Name == name {
				return f.Value
			}
		}
		return ""
	}
	d := e.Check(newSource("192.0.2.9:1"))
	if got, want := header(d, "RateLimit-Policy"), `"per-minute";q=5;w=60, "per-day";q=50;w=86400`; got != want {
		t.Errorf("pro plan: RateLimit-Policy %q, want %q", got, want)
	}
	if got, want := header(d, "RateLimit"), `"per-minute";r=4;t=60, "per-day";r=49;t=86400`; got != want {
		t.Errorf("pro plan: RateLimit %q, want %q", got, want)
	}
	e.Check(newSource("192.0.2.1:1"))
	d = e.Check(newSource("192.0.2.1:1"))
	if d.Outcome != httplimit.OutcomeDenied || header(d, "RateLimit-Policy") != `"per-minute";q=1;w=60` {
		t.Errorf("no plan, second request: got %v %q, want denied under the limiter's own policy", d.Outcome, header(d, "RateLimit-Policy"))
	}
}

// Decision.Serve finishes an admitted request with the status its handler
// returned, and one whose handler panicked as a 500 while the panic goes
// on with its value: both are refunded with WithRefundOnServerError, a 200
// is not.
func TestDecisionServe(t *testing.T) {
	store, _ := newMemory(t)
	l := slidelogtest.NewLimiter(t, store, slidelog.Policy{Name: "p", Limit: 5, Window: time.Minute})
	h, err := httplimit.New(l, httplimit.WithRefundOnServerError())
	if err != nil {
		t.Fatal(err)
	}
	h.Check(newSource("192.0.2.1:1")).Serve(func() int { return http.StatusOK })
	h.Check(newSource("192.0.2.1:1")).Serve(func() int { return http.StatusBadGateway })
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Errorf("recovered %v, want the handler's panic", p)
			}
		}()
		h.Check(newSource("192.0.2.1:1")).Serve(func() int { panic("boom") })
	}()
	if n := store.Refunds(); n != 2 {
		t.Errorf("refunds: got %d, want 2 (the 502 and the panic)", n)
	}
}

// ctxSource is a source whose context is ctx.
type ctxSource struct {
	*source
	ctx context.Context
}

func (s *ctxSource) Context() context.Context { return s.ctx }

// With WithRefundOnServerError, a request whose context is done when
// Finish runs (its client went away, or its deadline passed) is not
// refunded, whether its handler answered 500 or panicked with
// http.ErrAbortHandler: the handler failed because the client left. A
// 500 on a live context is refunded, also when a middleware inside the
// limiter has since put a context of its own, now canceled, on the
// request: Finish reads the context Check received.
func TestFinishNoRefundWhenClientGone(t *testing.T) {
	store, _ := newMemory(t)
	l := slidelogtest.NewLimiter(t, store, slidelog.Policy{Name: "p", Limit: 1, Window: time.Minute})
	h, err := httplimit.New(l, httplimit.WithRefundOnServerError())
	if err != nil {
		t.Fatal(err)
	}
	// admitted decides one request from remote with ctx, which must be
	// admitted, and returns its decision and source.
	admitted := func(remote string, ctx context.Context) (*httplimit.Decision, *ctxSource) {
		t.Helper()
		src := &ctxSource{newSource(remote), ctx}
		d := h.Check(src)
		if d.Outcome != httplimit.OutcomeNext || !d.Result.Allowed {
			t.Fatalf("%s: got %v, allowed=%v, err=%v, want admitted", remote, d.Outcome, d.Result.Allowed, d.Err)
		}
		return d, src
	}
	stillLimited := func(remote string) {
		t.Helper()
		if d := h.Check(newSource(remote)); d.Result.Allowed {
			t.Errorf("%s: next request allowed, want denied (the failed request must count)", remote)
		}
	}

	canceled, cancel := context.WithCancel(context.Background())
	d, _ := admitted("192.0.2.1:1", canceled)
	cancel()
	d.Finish(http.StatusInternalServerError)
	stillLimited("192.0.2.1:1")

	expiring, cancelExpiring := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancelExpiring()
	d, _ = admitted("192.0.2.2:1", expiring)
	<-expiring.Done()
	d.Finish(http.StatusServiceUnavailable)
	stillLimited("192.0.2.2:1")

	aborted, cancelAborted := context.WithCancel(context.Background())
	d, _ = admitted("192.0.2.3:1", aborted)
	func() {
		defer func() {
			if p := recover(); p != http.ErrAbortHandler {
				t.Errorf("recovered %v, want http.ErrAbortHandler", p)
			}
		}()
		d.Serve(func() int {
			cancelAborted()
			panic(http.ErrAbortHandler)
		})
	}()
	stillLimited("192.0.2.3:1")

	if n := store.Refunds(); n != 0 {
		t.Errorf("refunds with the client gone: got %d, want 0", n)
	}

	d, _ = admitted("192.0.2.4:1", context.Background())
	d.Finish(http.StatusInternalServerError)
	if n := store.Refunds(); n != 1 {
		t.Errorf("refunds after a 500 on a live context: got %d, want 1", n)
	}

	d, src := admitted("192.0.2.5:1", context.Background())
	inner, cancelInner := context.WithCancel(src.ctx)
	src.ctx = inner // as echo's ContextTimeout does, inside the limiter
	cancelInner()
	d.Finish(http.StatusServiceUnavailable)
	if n := store.Refunds(); n != 2 {
		t.Errorf("refunds after a 503 whose inner context was canceled: got %d, want 2", n)
	}
}
