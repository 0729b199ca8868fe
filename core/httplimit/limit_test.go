package slidelog_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/slidelogtest"
)

func newTestLimiter(t *testing.T, store slidelog.Store, p slidelog.Policy) *slidelog.Limiter {
	t.Helper()
	l, err := slidelog.New(store, p)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func newMemory(t *testing.T) (*slidelogtest.CountingStore, *slidelogtest.Clock) {
	t.Helper()
	clock := slidelogtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	inner := slidelog.NewMemoryStore(slidelog.WithClock(clock.Now))
	t.Cleanup(func() { _ = inner.Close() })
	return slidelogtest.NewCountingStore(inner), clock
}

func TestNewHTTPLimiterErrors(t *testing.T) {
	store, _ := newMemory(t)
	l := newTestLimiter(t, store, slidelog.PerSecond(1))
	tests := []struct {
		name string
		l    *slidelog.Limiter
		opts []slidelog.HTTPOption
	}{
		{"nil limiter", nil, nil},
		{"bad cidr", l, []slidelog.HTTPOption{slidelog.WithTrustedProxies("10.0.0.0/40")}},
		{"trust every address", l, []slidelog.HTTPOption{slidelog.WithTrustedProxies("0.0.0.0/0"), slidelog.WithClientIPHeader("X-Real-IP")}},
		{"trusted proxies, no header", l, []slidelog.HTTPOption{slidelog.WithTrustedProxies("10.0.0.0/8")}},
		{"all peers trusted, no header", l, []slidelog.HTTPOption{slidelog.WithAllPeersTrusted()}},
		{"header, no trusted proxy", l, []slidelog.HTTPOption{slidelog.WithClientIPHeader("X-Real-IP")}},
		{"bad header name", l, []slidelog.HTTPOption{slidelog.WithTrustedProxies("10.0.0.0/8"), slidelog.WithClientIPHeader("X Real IP")}},
		{"empty header name", l, []slidelog.HTTPOption{slidelog.WithTrustedProxies("10.0.0.0/8"), slidelog.WithClientIPHeader("")}},
		{"ipv6 prefix 0", l, []slidelog.HTTPOption{slidelog.WithIPv6Prefix(0)}},
		{"ipv6 prefix 129", l, []slidelog.HTTPOption{slidelog.WithIPv6Prefix(129)}},
		{"cost 0", l, []slidelog.HTTPOption{slidelog.WithCost(0)}},
		{"nil key func", l, []slidelog.HTTPOption{slidelog.WithKeyFunc(nil)}},
		{"header style", l, []slidelog.HTTPOption{slidelog.WithHeaders(slidelog.HeaderStyle(9))}},
	}
	for _, tt := range tests {
		if _, err := slidelog.NewHTTPLimiter(tt.l, tt.opts...); !errors.Is(err, slidelog.ErrInvalidOption) {
			t.Errorf("%s: got %v, want ErrInvalidOption", tt.name, err)
		}
	}
}

func TestCheckOutcomes(t *testing.T) {
	store, _ := newMemory(t)
	l := newTestLimiter(t, store, slidelog.Policy{Name: "p", Limit: 1, Window: time.Minute})
	h, err := slidelog.NewHTTPLimiter(l, slidelog.WithSkipFunc(slidelog.SkipPaths("/healthz")))
	if err != nil {
		t.Fatal(err)
	}
	skip := newSource("192.0.2.1:1")
	skip.path = "/healthz"
	if d := h.Check(skip); d.Outcome != slidelog.OutcomeNext || !d.Skipped || len(d.Header) != 0 {
		t.Errorf("skipped: got %v skipped=%v header=%v", d.Outcome, d.Skipped, d.Header)
	}
	if d := h.Check(newSource("192.0.2.1:1")); d.Outcome != slidelog.OutcomeNext || !d.Result.Allowed {
		t.Errorf("first: got %v, want next and allowed", d.Outcome)
	}
	d := h.Check(newSource("192.0.2.1:1"))
	if d.Outcome != slidelog.OutcomeDenied || d.Result.Allowed {
		t.Fatalf("second: got %v, want denied", d.Outcome)
	}
	if last := d.Header[len(d.Header)-1]; last.Name != "Retry-After" || last.Value != "60" {
		t.Errorf("second: last header %v, want Retry-After: 60", last)
	}
	if d := h.Check(newSource("@")); d.Outcome != slidelog.OutcomeError || !errors.Is(d.Err, slidelog.ErrInvalidKey) {
		t.Errorf("unix socket: got %v, %v, want error ErrInvalidKey", d.Outcome, d.Err)
	}
	if store.Takes() != 2 {
		t.Errorf("takes: got %d, want 2", store.Takes())
	}
	if got := slidelog.OutcomeDenied.String(); got != "denied" {
		t.Errorf("String: got %q", got)
	}
}

func TestEmptyIdentityIsNoKey(t *testing.T) {
	store, _ := newMemory(t)
	l := newTestLimiter(t, store, slidelog.PerSecond(1))
	h, _ := slidelog.NewHTTPLimiter(l, slidelog.WithKeyFunc(func(*slidelog.HTTPRequest) (string, error) { return "", nil }))
	if d := h.Check(newSource("192.0.2.1:1")); !errors.Is(d.Err, slidelog.ErrNoKey) || store.Takes() != 0 {
		t.Errorf("got %v with %d takes, want ErrNoKey and no store call", d.Err, store.Takes())
	}
}

func TestOversizedIdentity(t *testing.T) {
	store, _ := newMemory(t)
	l := newTestLimiter(t, store, slidelog.PerSecond(1))
	h, _ := slidelog.NewHTTPLimiter(l, slidelog.WithKeyFunc(slidelog.ByHeader("X-Key")))
	d := h.Check(newSource("192.0.2.1:1", "X-Key", strings.Repeat("x", 1<<20)))
	if !errors.Is(d.Err, slidelog.ErrIdentityTooLong) || store.Takes() != 0 {
		t.Errorf("got %v with %d takes, want ErrIdentityTooLong and no store call", d.Err, store.Takes())
	}
	if p := slidelog.ErrorProblem(d.Err); p.Status != 431 {
		t.Errorf("status: got %d, want 431", p.Status)
	}
}

// Limiters with different names on one store never share an identity's
// log, whatever their policies; a second open limiter of one name on one
// store is refused.
func TestLimiterNamespaces(t *testing.T) {
	store, _ := newMemory(t)
	short := newTestLimiter(t, store, slidelog.Policy{Name: "short", Limit: 1, Window: time.Second})
	long := newTestLimiter(t, store, slidelog.Policy{Name: "long", Limit: 1, Window: time.Hour})
	if _, err := slidelog.New(store, slidelog.Policy{Name: "long", Limit: 1, Window: time.Hour}); !errors.Is(err, slidelog.ErrNameTaken) {
		t.Fatalf("New with the name of an open limiter: error %v, want ErrNameTaken", err)
	}
	check := func(l *slidelog.Limiter, want bool) {
		t.Helper()
		h, _ := slidelog.NewHTTPLimiter(l)
		if d := h.Check(newSource("192.0.2.1:1")); d.Result.Allowed != want {
			t.Errorf("%s: allowed %v, want %v", l.Policies()[0], d.Result.Allowed, want)
		}
	}
	check(short, true)
	check(long, true)
	check(long, false)
	if short.Namespace() != "short" || long.Namespace() != "long" {
		t.Errorf("namespaces %q and %q: want the limiters' names", short.Namespace(), long.Namespace())
	}
}

func TestShadowModeOutcomes(t *testing.T) {
	store, _ := newMemory(t)
	l := newTestLimiter(t, store, slidelog.Policy{Name: "p", Limit: 1, Window: time.Minute})
	var reports []error
	h, _ := slidelog.NewHTTPLimiter(l, slidelog.WithKeyFunc(slidelog.ByHeader("X-Key")),
		slidelog.WithShadowMode(func(_ *slidelog.HTTPRequest, _ slidelog.Result, err error) { reports = append(reports, err) }))
	for i, src := range []*source{
		newSource("192.0.2.1:1", "X-Key", "a"),
		newSource("192.0.2.1:1", "X-Key", "a"),
		newSource("192.0.2.1:1"),
	} {
		d := h.Check(src)
		if d.Outcome != slidelog.OutcomeNext {
			t.Errorf("request %d: got %v, want next", i, d.Outcome)
		}
		for _, f := range d.Header {
			if f.Name == "Retry-After" {
				t.Errorf("request %d: Retry-After in shadow mode", i)
			}
		}
	}
	if len(reports) != 2 || reports[0] != nil || !errors.Is(reports[1], slidelog.ErrNoKey) {
		t.Errorf("reports: got %v, want [nil, ErrNoKey]", reports)
	}
}

func TestFinishRefunds(t *testing.T) {
	store, clock := newMemory(t)
	l := newTestLimiter(t, store, slidelog.Policy{Name: "p", Limit: 1, Window: time.Minute})
	h, _ := slidelog.NewHTTPLimiter(l, slidelog.WithRefundOnServerError())
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

// A key function that panics, a nil source, or a zero HTTPLimiter give an
// error wrapping ErrMisconfigured, never a panic.
func TestCheckNeverPanics(t *testing.T) {
	store, _ := newMemory(t)
	l := newTestLimiter(t, store, slidelog.PerSecond(10))
	boom := func(*slidelog.HTTPRequest) (string, error) { panic("boom") }
	h, err := slidelog.NewHTTPLimiter(l, slidelog.WithKeyFunc(boom))
	if err != nil {
		t.Fatal(err)
	}
	if d := h.Check(newSource("192.0.2.1:1")); d.Outcome != slidelog.OutcomeError || !errors.Is(d.Err, slidelog.ErrMisconfigured) {
		t.Errorf("panicking key func: got %v, %v, want an error wrapping ErrMisconfigured", d.Outcome, d.Err)
	} else if p := slidelog.ErrorProblem(d.Err); p.Status != 500 || strings.Contains(string(p.JSON()), "boom") {
		t.Errorf("problem: got %d %s, want 500 without the panic's text", p.Status, p.JSON())
	}
	shadow, err := slidelog.NewHTTPLimiter(l, slidelog.WithKeyFunc(boom), slidelog.WithShadowMode(nil))
	if err != nil {
		t.Fatal(err)
	}
	if d := shadow.Check(newSource("192.0.2.1:1")); d.Outcome != slidelog.OutcomeNext {
		t.Errorf("shadow mode: got %v, want next", d.Outcome)
	}
	def, err := slidelog.NewHTTPLimiter(l)
	if err != nil {
		t.Fatal(err)
	}
	if d := def.Check(nil); d.Outcome != slidelog.OutcomeError || !errors.Is(d.Err, slidelog.ErrInvalidKey) {
		t.Errorf("nil source: got %v, %v, want ErrInvalidKey", d.Outcome, d.Err)
	}
	for _, z := range []*slidelog.HTTPLimiter{nil, {}} {
		d := z.Check(newSource("192.0.2.1:1"))
		if d.Outcome != slidelog.OutcomeError || !errors.Is(d.Err, slidelog.ErrMisconfigured) {
			t.Errorf("%v: got %v, %v, want ErrMisconfigured", z, d.Outcome, d.Err)
		}
		d.Finish(500)
	}
	var none *slidelog.HTTPDecision
	none.Finish(500)
}

func TestNewRejectsNilStores(t *testing.T) {
	for _, s := range []slidelog.Store{nil, (*slidelog.MemoryStore)(nil), (*slidelog.RedisStore)(nil)} {
		if _, err := slidelog.New(s, slidelog.PerSecond(1)); !errors.Is(err, slidelog.ErrNilStore) {
			t.Errorf("New(%#v): got %v, want ErrNilStore", s, err)
		}
	}
}
