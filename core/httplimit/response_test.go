package httplimit_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
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
		"detail":            "Rate limit exceeded; retry after 1 seconds.",
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
