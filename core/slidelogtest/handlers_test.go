package slidelogtest_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/slidelogtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestSetClientIP(t *testing.T) {
	for _, tt := range []struct {
		give, want string
	}{
		{"203.0.113.7", "203.0.113.7:1234"},
		{"2001:db8::1", "[2001:db8::1]:1234"},
		{"::ffff:192.0.2.1", "[::ffff:192.0.2.1]:1234"},
	} {
		req := slidelogtest.SetClientIP(httptest.NewRequest(http.MethodGet, "/", nil), tt.give)
		assert.Equal(t, tt.want, req.RemoteAddr, "SetClientIP(%q)", tt.give)
	}
	for _, give := range []string{"", "203.0.113.7:80", "example.com", "[::1]"} {
		assert.PanicsWithValue(t, fmt.Sprintf("slidelogtest: SetClientIP: %q is not an IP address", give), func() {
			slidelogtest.SetClientIP(httptest.NewRequest(http.MethodGet, "/", nil), give)
		})
	}
}

// SetClientIP gives a request built with http.NewRequest (no RemoteAddr,
// which the engine answers 400) an identity, and different addresses
// different budgets.
func TestSetClientIPSeparatesBudgets(t *testing.T) {
	store := memstore.New()
	t.Cleanup(func() { _ = store.Close() })
	l, err := slidelog.New(store, slidelog.Policy{Name: "api", Limit: 1, Window: time.Minute})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	h, err := httplimit.New(l)
	require.NoError(t, err)

	bare, err := http.NewRequest(http.MethodGet, "/", nil)
	require.NoError(t, err)
	assert.Equal(t, httplimit.OutcomeError, h.Check(source{bare}).Outcome, "bare http.NewRequest")

	for _, tt := range []struct {
		give string
		want httplimit.Outcome
	}{
		{"203.0.113.7", httplimit.OutcomeNext},
		{"203.0.113.7", httplimit.OutcomeDenied},
		{"203.0.113.8", httplimit.OutcomeNext},
		{"2001:db8::1", httplimit.OutcomeNext},
	} {
		req, err := http.NewRequest(http.MethodGet, "/", nil)
		require.NoError(t, err)
		d := h.Check(source{slidelogtest.SetClientIP(req, tt.give)})
		assert.Equal(t, tt.want, d.Outcome, "request from %s", tt.give)
	}
}

// Two middlewares whose limiters name their policies alike: each state
// goes to its own policy, in order.
func TestParseRateLimitHeadersTwoMiddlewares(t *testing.T) {
	h := http.Header{}
	h.Add("RateLimit-Policy", `"per-minute";q=100;w=60`)
	h.Add("RateLimit", `"per-minute";r=99;t=60`)
	h.Add("RateLimit-Policy", `"per-minute";q=20;w=60`)
	h.Add("RateLimit", `"per-minute";r=0;t=30`)
	h.Set("Retry-After", "30")
	got, err := slidelogtest.ParseRateLimitHeaders(h)
	require.NoError(t, err)
	assert.Equal(t, 30*time.Second, got.RetryAfter)
	require.Len(t, got.Policies, 2)
	assert.Equal(t, 99, got.Policies[0].Remaining)
	assert.Equal(t, 0, got.Policies[1].Remaining)
	assert.Equal(t, 30*time.Second, got.Policies[1].Reset)
}

func TestParseRateLimitHeadersMalformed(t *testing.T) {
	for _, tt := range []struct {
		name string
		give http.Header
		want string
	}{
		{"unquoted name", http.Header{"Ratelimit-Policy": {`api;q=1;w=60`}}, "quoted string"},
		{"no q", http.Header{"Ratelimit-Policy": {`"api";w=60`}}, "no q parameter"},
		{"negative r", http.Header{"Ratelimit-Policy": {`"api";q=1;w=60`}, "Ratelimit": {`"api";r=-1;t=1`}}, "r="},
		{"unknown policy", http.Header{"Ratelimit-Policy": {`"api";q=1;w=60`}, "Ratelimit": {`"web";r=0;t=1`}}, `"web"`},
		{"trailing comma", http.Header{"Ratelimit-Policy": {`"api";q=1;w=60,`}}, "trailing"},
		{"unterminated", http.Header{"Ratelimit-Policy": {`"api;q=1`}}, "unterminated"},
		{"both styles", http.Header{"Ratelimit-Policy": {`"api";q=1;w=60`}, "X-Ratelimit-Limit": {"1"}}, "both"},
		{"legacy remaining missing", http.Header{"X-Ratelimit-Limit": {"1"}, "X-Ratelimit-Reset": {"1"}}, "X-RateLimit-Remaining"},
		{"retry-after date", http.Header{"Retry-After": {"Wed, 21 Oct 2015 07:28:00 GMT"}}, "Retry-After"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := slidelogtest.ParseRateLimitHeaders(tt.give)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// The assertions fail a test on the wrong response and pass on the right one.
func TestAssertions(t *testing.T) {
	denied := &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{
		"Ratelimit-Policy": {`"api";q=1;w=60`}, "Ratelimit": {`"api";r=0;t=60`}, "Retry-After": {"60"},
	}}
	admitted := &http.Response{StatusCode: http.StatusOK, Header: http.Header{
		"Ratelimit-Policy": {`"api";q=1;w=60`}, "Ratelimit": {`"api";r=0;t=60`},
	}}
	noRetryAfter := &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{}}

	for _, tt := range []struct {
		name     string
		assert   func(testing.TB, *http.Response) slidelogtest.RateLimitHeaders
		give     *http.Response
		wantFail string
	}{
		{"rate limited: denial", slidelogtest.AssertRateLimited, denied, ""},
		{"rate limited: admission", slidelogtest.AssertRateLimited, admitted, "status: got 200, want 429"},
		{"rate limited: no Retry-After", slidelogtest.AssertRateLimited, noRetryAfter, "Retry-After"},
		{"admitted: admission", slidelogtest.AssertAdmitted, admitted, ""},
		{"admitted: denial", slidelogtest.AssertAdmitted, denied, "status: got 429"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recordingTB{TB: t}
			tt.assert(rec, tt.give)
			if tt.wantFail == "" {
				assert.Empty(t, rec.errors)
			} else {
				assert.Contains(t, strings.Join(rec.errors, "\n"), tt.wantFail)
			}
		})
	}
}

// recordingTB records Errorf instead of failing the test.
type recordingTB struct {
	testing.TB
	errors []string
}

func (r *recordingTB) Helper() {}
func (r *recordingTB) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

// source presents a net/http request to the engine.
type source struct{ r *http.Request }

func (s source) Context() context.Context    { return s.r.Context() }
func (s source) Method() string              { return s.r.Method }
func (s source) Path() string                { return s.r.URL.Path }
func (s source) Route() string               { return "" }
func (s source) Header(name string) []string { return s.r.Header.Values(name) }
func (s source) RemoteAddr() string          { return s.r.RemoteAddr }
func (s source) Value(key any) any           { return s.r.Context().Value(key) }
func (s source) Native() any                 { return s.r }

// A test clock moves the memory store's time by hand: after the window,
// the budget is back, without sleeping.
func ExampleClock() {
	clock := slidelogtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	store := memstore.New(memstore.WithClock(clock.Now))
	defer store.Close()
	l, _ := slidelog.New(store, slidelog.Policy{Name: "api", Limit: 1, Window: time.Minute})
	defer l.Close()

	ctx := context.Background()
	for _, step := range []time.Duration{0, 30 * time.Second, 30 * time.Second} {
		clock.Advance(step)
		res, _ := l.Allow(ctx, "user:42")
		fmt.Printf("+%v allowed=%v\n", step, res.Allowed)
	}
	// Output:
	// +0s allowed=true
	// +30s allowed=false
	// +30s allowed=true
}

// ParseRateLimitHeaders reads what the middleware wrote on a response.
func ExampleParseRateLimitHeaders() {
	h := http.Header{}
	h.Set("RateLimit-Policy", `"per-minute";q=10;w=60`)
	h.Set("RateLimit", `"per-minute";r=0;t=42`)
	h.Set("Retry-After", "42")

	rl, err := slidelogtest.ParseRateLimitHeaders(h)
	if err != nil {
		panic(err)
	}
	remaining, _ := rl.Remaining()
	fmt.Println(rl.Policies[0].Name, rl.Policies[0].Limit, remaining, rl.RetryAfter)
	// Output:
	// per-minute 10 0 42s
}
