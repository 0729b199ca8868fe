package httplimit_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/memstore"
)

func TestRetryAfterSeconds(t *testing.T) {
	for _, tt := range []struct {
		give time.Duration
		want string
	}{
		{0, "0"}, {-time.Second, "0"}, {time.Microsecond, "1"}, {time.Second, "1"},
		{time.Second + time.Microsecond, "2"}, {59500 * time.Millisecond, "60"}, {time.Hour, "3600"},
	} {
		if got := httplimit.RetryAfterSeconds(tt.give); got != tt.want {
			t.Errorf("RetryAfterSeconds(%v): got %s, want %s", tt.give, got, tt.want)
		}
	}
}

func TestRateLimitHeaders(t *testing.T) {
	res := slidelog.NewResult([]slidelog.PolicyResult{
		{Policy: slidelog.Policy{Name: `we"ird\né`, Limit: 10, Window: 1500 * time.Millisecond}, Allowed: true, Remaining: 3, ResetAfter: 1200 * time.Millisecond},
		{Policy: slidelog.Policy{Limit: 100, Window: time.Hour}, Allowed: true, Remaining: 90, ResetAfter: 59 * time.Minute},
	}, memstore.Source)
	tests := []struct {
		style httplimit.HeaderStyle
		want  string
	}{
		{httplimit.HeadersIETF, `RateLimit-Policy: "we\"ird\\n__";q=10;w=2, "100-per-1h0m0s";q=100;w=3600` + "\n" +
			`RateLimit: "we\"ird\\n__";r=3;t=2, "100-per-1h0m0s";r=90;t=3540`},
		{httplimit.HeadersLegacy, "X-RateLimit-Limit: 10\nX-RateLimit-Remaining: 3\nX-RateLimit-Reset: 2"},
		{httplimit.HeadersNone, ""},
	}
	for _, tt := range tests {
		var lines []string
		for _, f := range httplimit.RateLimitHeaders(tt.style, res) {
			lines = append(lines, f.Name+": "+f.Value)
		}
		if got := strings.Join(lines, "\n"); got != tt.want {
			t.Errorf("%s:\ngot  %s\nwant %s", tt.style, got, tt.want)
		}
	}
}

func TestDeniedProblem(t *testing.T) {
	res := slidelog.NewResult([]slidelog.PolicyResult{
		{Policy: slidelog.PerSecond(2), Allowed: false, RetryAfter: 300 * time.Millisecond, ResetAfter: time.Second},
		{Policy: slidelog.PerHour(100), Allowed: true, Remaining: 50, ResetAfter: time.Hour},
	}, memstore.Source)
	p := httplimit.DeniedProblem(res)
	var got map[string]any
	if err := json.Unmarshal(p.JSON(), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"type":              httplimit.ProblemTypeRateLimited,
		"title":             "Too Many Requests",
		"status":            float64(429),
		"detail":            "Rate limit exceeded; retry after 1 second.",
		"violated-policies": []any{"per-second"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("problem:\ngot  %v\nwant %v", got, want)
	}
}

func TestErrorProblem(t *testing.T) {
	secret := errors.New("dial tcp 10.0.0.1:6379: i/o timeout")
	tests := []struct {
		give error
		want int
	}{
		{fmt.Errorf("%w: %w", slidelog.ErrUnavailable, secret), http.StatusServiceUnavailable},
		{fmt.Errorf("%w: %w", httplimit.ErrIdentityTooLong, secret), http.StatusRequestHeaderFieldsTooLarge},
		{fmt.Errorf("%w: %w", httplimit.ErrNoKey, secret), http.StatusBadRequest},
		{fmt.Errorf("%w: %w", slidelog.ErrInvalidKey, secret), http.StatusBadRequest},
		{fmt.Errorf("%w: %w", slidelog.ErrInvalidCost, secret), http.StatusInternalServerError},
		{slidelog.ErrClosed, http.StatusServiceUnavailable},
		{secret, http.StatusServiceUnavailable},
	}
	for _, tt := range tests {
		p := httplimit.ErrorProblem(tt.give)
		if p.Status != tt.want {
			t.Errorf("ErrorProblem(%v): status %d, want %d", tt.give, p.Status, tt.want)
		}
		if body := string(p.JSON()); strings.Contains(body, "10.0.0.1") || strings.Contains(body, "slidelog:") {
			t.Errorf("ErrorProblem(%v): body %s carries internal text", tt.give, body)
		}
	}
}

// A decision of FailOpen or FailClosed checked nothing: its headers name
// the policies but invent no state, and a FailClosed denial's body lists
// no violated policy.
func TestUncheckedSendsNoState(t *testing.T) {
	for _, src := range []slidelog.Source{slidelog.SourceFailOpen, slidelog.SourceFailClosed} {
		allowed := src == slidelog.SourceFailOpen
		st := slidelog.PolicyResult{Policy: slidelog.PerMinute(10), Allowed: allowed}
		if !allowed {
			st.RetryAfter = 5 * time.Second
		}
		res := slidelog.NewResult([]slidelog.PolicyResult{st}, src)
		for _, tt := range []struct {
			style httplimit.HeaderStyle
			want  string
		}{
			{httplimit.HeadersIETF, `RateLimit-Policy: "per-minute";q=10;w=60`},
			{httplimit.HeadersLegacy, "X-RateLimit-Limit: 10"},
		} {
			var lines []string
			for _, f := range httplimit.RateLimitHeaders(tt.style, res) {
				lines = append(lines, f.Name+": "+f.Value)
			}
			if got := strings.Join(lines, "\n"); got != tt.want {
				t.Errorf("%v %s: got %q, want %q", src, tt.style, got, tt.want)
			}
		}
		if allowed {
			continue
		}
		p := httplimit.DeniedProblem(res)
		if p.ViolatedPolicies != nil || strings.Contains(string(p.JSON()), "violated") {
			t.Errorf("FailClosed problem: got %s, want no violated policies", p.JSON())
		}
		if p.Detail != "The rate limiter is unavailable; retry after 5 seconds." {
			t.Errorf("FailClosed problem detail: got %q", p.Detail)
		}
	}
}

// Two middlewares whose policies share a name list them under distinct
// names, in RateLimit-Policy and RateLimit alike.
func TestSetHeaderDistinctPolicyNames(t *testing.T) {
	h := http.Header{}
	outer := slidelog.NewResult([]slidelog.PolicyResult{{Policy: slidelog.PerMinute(100), Allowed: true, Remaining: 99, ResetAfter: time.Minute}}, slidelog.Source("memory"))
	inner := slidelog.NewResult([]slidelog.PolicyResult{{Policy: slidelog.PerMinute(10), Allowed: true, Remaining: 9, ResetAfter: time.Minute}}, slidelog.Source("memory"))
	httplimit.SetHeader(h, httplimit.RateLimitHeaders(httplimit.HeadersIETF, outer))
	httplimit.SetHeader(h, httplimit.RateLimitHeaders(httplimit.HeadersIETF, inner))
	httplimit.SetHeader(h, httplimit.RateLimitHeaders(httplimit.HeadersIETF, inner))
	for _, tt := range []struct{ give, want string }{
		{"RateLimit-Policy", `"per-minute";q=100;w=60, "per-minute-2";q=10;w=60, "per-minute-3";q=10;w=60`},
		{"RateLimit", `"per-minute";r=99;t=60, "per-minute-2";r=9;t=60, "per-minute-3";r=9;t=60`},
	} {
		if got := strings.Join(h.Values(tt.give), ", "); got != tt.want {
			t.Errorf("%s: got %s, want %s", tt.give, got, tt.want)
		}
	}
	fields := httplimit.RateLimitHeaders(httplimit.HeadersIETF, inner)
	if got := httplimit.DistinctPolicyNames(fields, []string{`"other";q=1;w=1`}); &got[0] != &fields[0] {
		t.Errorf("no repeated name: got a copy %v, want fields itself", got)
	}
	got := httplimit.DistinctPolicyNames([]httplimit.HeaderField{{Name: "RateLimit-Policy", Value: `"a\"b, c";q=1;w=1`, Append: true}},
		[]string{`"a\"b, c";q=2;w=2`})
	if got[0].Value != `"a\"b, c-2";q=1;w=1` {
		t.Errorf("escaped name: got %s", got[0].Value)
	}
}

func TestHeaderFieldsAndWriters(t *testing.T) {
	p := slidelog.Policy{Name: "p", Limit: 5, Window: time.Minute}
	denied := slidelog.NewResult([]slidelog.PolicyResult{{Policy: p, Remaining: 0, RetryAfter: 1500 * time.Millisecond, ResetAfter: time.Minute}}, "memory")
	allowed := slidelog.NewResult([]slidelog.PolicyResult{{Policy: p, Allowed: true, Remaining: 4, ResetAfter: time.Minute}}, "memory")
	tests := []struct {
		name  string
		style httplimit.HeaderStyle
		res   slidelog.Result
		want  []httplimit.HeaderField
	}{
		{"ietf denied", httplimit.HeadersIETF, denied, []httplimit.HeaderField{
			{Name: "RateLimit-Policy", Value: `"p";q=5;w=60`, Append: true},
			{Name: "RateLimit", Value: `"p";r=0;t=60`, Append: true},
			{Name: "Retry-After", Value: "2"}}},
		{"legacy allowed", httplimit.HeadersLegacy, allowed, []httplimit.HeaderField{
			{Name: "X-RateLimit-Limit", Value: "5"}, {Name: "X-RateLimit-Remaining", Value: "4"}, {Name: "X-RateLimit-Reset", Value: "60"}}},
		{"none denied", httplimit.HeadersNone, denied, []httplimit.HeaderField{{Name: "Retry-After", Value: "2"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := httplimit.HeaderFields(tt.style, tt.res); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}

	rec := httptest.NewRecorder()
	httplimit.WriteDenied(rec, denied)
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Content-Type") != httplimit.ProblemContentType ||
		!strings.Contains(rec.Body.String(), `"violated-policies":["p"]`) {
		t.Errorf("WriteDenied: got %d %q %s, want 429 problem+json naming p", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
	for _, tt := range []struct {
		give error
		want int
	}{
		{fmt.Errorf("%w: plans: dial tcp 10.0.0.9:5432", slidelog.ErrPolicyFunc), http.StatusServiceUnavailable},
		{fmt.Errorf("%w: limit 0", slidelog.ErrInvalidPolicy), http.StatusInternalServerError},
		{httplimit.ErrNoKey, http.StatusBadRequest},
	} {
		rec := httptest.NewRecorder()
		httplimit.WriteError(rec, tt.give)
		if rec.Code != tt.want || strings.Contains(rec.Body.String(), "10.0.0.9") {
			t.Errorf("WriteError(%v): got %d %s, want %d without the error's text", tt.give, rec.Code, rec.Body, tt.want)
		}
	}
}

// TestNewRefusesPolicyNamesHeadersCannotCarry: the IETF headers write a
// policy's name as a Structured Field String, which holds printable ASCII
// only, so "é" and "è" would both show as "__". New refuses such a name
// with those headers, naming the policy; the legacy fields and no fields
// carry no names, and accept it.
func TestNewRefusesPolicyNamesHeadersCannotCarry(t *testing.T) {
	store := memstore.New()
	t.Cleanup(func() { _ = store.Close() })
	newLimiter := func(name string, ps ...slidelog.Policy) *slidelog.Limiter {
		l, err := slidelog.New(store, ps[0], append([]slidelog.Option{slidelog.WithName(name)}, slidelog.WithPolicy(ps[1:]...))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	accented := newLimiter("accented", slidelog.PerMinute(10), slidelog.Policy{Name: "per-heure-é", Limit: 100, Window: time.Hour})
	for _, opts := range [][]httplimit.Option{nil, {httplimit.WithHeaders(httplimit.HeadersIETF)}} {
		_, err := httplimit.New(accented, opts...)
		if !errors.Is(err, slidelog.ErrInvalidOption) || !strings.Contains(err.Error(), `"per-heure-é"`) {
			t.Errorf("IETF headers, policy \"per-heure-é\": got %v, want ErrInvalidOption naming the policy", err)
		}
	}
	for _, style := range []httplimit.HeaderStyle{httplimit.HeadersLegacy, httplimit.HeadersNone} {
		if _, err := httplimit.New(accented, httplimit.WithHeaders(style)); err != nil {
			t.Errorf("%s headers, policy \"per-heure-é\": %v, want no error", style, err)
		}
	}
	for _, name := range []string{"tab\there", "del\x7f"} {
		if _, err := httplimit.New(newLimiter(name, slidelog.Policy{Name: name, Limit: 1, Window: time.Minute})); !errors.Is(err, slidelog.ErrInvalidOption) {
			t.Errorf("IETF headers, policy %q: got %v, want ErrInvalidOption", name, err)
		}
	}
	// A quote and a backslash are escaped, never replaced.
	if _, err := httplimit.New(newLimiter("quoted", slidelog.Policy{Name: `say "hi" \o/`, Limit: 1, Window: time.Minute})); err != nil {
		t.Errorf(`IETF headers, policy "say \"hi\" \\o/": %v, want no error`, err)
	}
}

// TestDecisionSetHeader: Decision.SetHeader sets what SetHeader sets, in
// the room Check set aside, so that it allocates nothing; the values it
// stores do not share room that a later Add could overwrite; and a value
// too long for the room (many policies) is still whole.
func TestDecisionSetHeader(t *testing.T) {
	store := memstore.New()
	t.Cleanup(func() { _ = store.Close() })
	one := slidelog.MustNew(store, slidelog.Policy{Name: "per-minute", Limit: 1000, Window: time.Minute})
	t.Cleanup(func() { _ = one.Close() })
	many := slidelog.MustNew(store,
		slidelog.Policy{Name: "a-rather-long-policy-name-1", Limit: 1000, Window: time.Minute},
		slidelog.WithPolicy(slidelog.Policy{Name: "a-rather-long-policy-name-2", Limit: 100000, Window: time.Hour}))
	t.Cleanup(func() { _ = many.Close() })
	for _, l := range []*slidelog.Limiter{one, many} {
		e, err := httplimit.New(l)
		if err != nil {
			t.Fatal(err)
		}
		src := newSource("198.51.100.7:4000")
		for _, deny := range []bool{false, true} {
			d := e.Check(src)
			if deny { // a denial has three fields
				d.Result = slidelog.NewResult([]slidelog.PolicyResult{{Policy: l.Policies()[0], RetryAfter: time.Second}}, memstore.Source)
				d.Header = httplimit.HeaderFields(httplimit.HeadersIETF, d.Result)
			}
			if fresh := httplimit.HeaderFields(httplimit.HeadersIETF, d.Result); !reflect.DeepEqual(d.Header, fresh) {
				t.Errorf("Decision.Header %+v, HeaderFields %+v", d.Header, fresh)
			}
			got, want := http.Header{}, http.Header{}
			d.SetHeader(got)
			httplimit.SetHeader(want, d.Header)
			if !reflect.DeepEqual(got, want) || len(got) < 2 {
				t.Errorf("Decision.SetHeader set %v; SetHeader sets %v", got, want)
			}
			// A second call, on a header that lists the policy already,
			// renames it there and leaves the first header as it was.
			set := got.Clone()
			other := http.Header{"Ratelimit-Policy": {d.Header[0].Value}}
			d.SetHeader(other)
			if !reflect.DeepEqual(got, set) || len(other.Values("RateLimit")) != 1 || other.Get("RateLimit") == got.Get("RateLimit") {
				t.Errorf("a second Decision.SetHeader made %v of the first header %v, and set %v", got, set, other)
			}
			got.Add("RateLimit-Policy", "x")
			got.Add("RateLimit", "y")
			for _, name := range []string{"RateLimit-Policy", "RateLimit"} {
				if g, w := got.Values(name), append(set.Values(name), map[string]string{"RateLimit-Policy": "x", "RateLimit": "y"}[name]); !reflect.DeepEqual(g, w) {
					t.Errorf("after Add: %s is %q, want %q", name, g, w)
				}
			}
		}
		h := make(http.Header, 8)
		checkOnly := testing.AllocsPerRun(100, func() { _ = e.Check(src) })
		withSet := testing.AllocsPerRun(100, func() {
			clear(h)
			e.Check(src).SetHeader(h)
		})
		withFunc := testing.AllocsPerRun(100, func() {
			clear(h)
			d := e.Check(src)
			httplimit.SetHeader(h, d.Header)
		})
		if l == one && withSet != checkOnly {
			t.Errorf("Check with Decision.SetHeader: %v allocations, Check alone %v: want none more", withSet, checkOnly)
		}
		if withFunc <= withSet {
			t.Errorf("SetHeader: %v allocations, Decision.SetHeader %v: the test cannot tell them apart", withFunc, withSet)
		}
	}
}

// TestDecisionSetHeaderOnCopies: copies of a Decision (a value a user may
// keep, as of any struct) share nothing that SetHeader writes: a header
// one copy set keeps its values whatever another copy sets elsewhere,
// as with SetHeader(h, d.Header).
func TestDecisionSetHeaderOnCopies(t *testing.T) {
	store := memstore.New()
	t.Cleanup(func() { _ = store.Close() })
	l := slidelog.MustNew(store, slidelog.Policy{Name: "per-minute", Limit: 1000, Window: time.Minute})
	t.Cleanup(func() { _ = l.Close() })
	e, err := httplimit.New(l)
	if err != nil {
		t.Fatal(err)
	}
	d := e.Check(newSource("198.51.100.7:4000"))
	c := *d
	first := http.Header{}
	d.SetHeader(first)
	want := first.Clone()
	// A response that lists the policy already (an outer middleware's
	// RateLimit-Policy, with no RateLimit field): the copy renames it.
	other := http.Header{"Ratelimit-Policy": {d.Header[0].Value}}
	c.SetHeader(other)
	if !reflect.DeepEqual(first, want) {
		t.Errorf("after a copy's SetHeader on another header: got %v, want %v", first, want)
	}
	if got := other.Get("RateLimit"); got == want.Get("RateLimit") {
		t.Errorf("the copy's RateLimit: got %q, want the renamed policy", got)
	}
}
