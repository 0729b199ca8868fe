package slidelog_test

import (
	"errors"
	"strings"
	"testing"

	slidelog "github.com/slidelog/slidelog/core"
)

type stringer struct{ s string }

func (s stringer) String() string { return s.s }

type ctxKey struct{}

func TestKeyFuncs(t *testing.T) {
	src := newSource("[2001:db8:1:2::9]:80", "X-Api-Key", " secret ", "X-Bad", "a\x00b", "X-Empty", "")
	src.route = "/users/:id"
	src.values["user"] = "alice"
	src.values[ctxKey{}] = stringer{"bob"}
	src.values["id"] = 42
	src.values["float"] = 1.5
	tests := []struct {
		name    string
		give    slidelog.KeyFunc
		want    string
		wantErr error
	}{
		{"client ip", slidelog.ByClientIP(), "ip:2001:db8:1:2::/64", nil},
		{"header", slidelog.ByHeader("X-Api-Key"), "h:x-api-key:secret", nil},
		{"header case", slidelog.ByHeader("x-api-key"), "h:x-api-key:secret", nil},
		{"missing header", slidelog.ByHeader("X-None"), "", slidelog.ErrNoKey},
		{"empty header", slidelog.ByHeader("X-Empty"), "", slidelog.ErrNoKey},
		{"control character", slidelog.ByHeader("X-Bad"), "", slidelog.ErrInvalidKey},
		{"string value", slidelog.ByContextValue("user"), "v:user:alice", nil},
		{"stringer value", slidelog.ByContextValue(ctxKey{}), "v:slidelog_test.ctxKey:bob", nil},
		{"int value", slidelog.ByContextValue("id"), "v:id:42", nil},
		{"missing value", slidelog.ByContextValue("nobody"), "", slidelog.ErrNoKey},
		{"route", slidelog.ByRoute(), "r:/users/:id", nil},
		{"composite", slidelog.Composite(slidelog.ByRoute(), slidelog.ByContextValue("user")), "r:/users/:id|v:user:alice", nil},
		{"composite error", slidelog.Composite(slidelog.ByRoute(), slidelog.ByHeader("X-None")), "", slidelog.ErrNoKey},
		{"first of", slidelog.FirstOf(slidelog.ByHeader("X-None"), slidelog.ByContextValue("user")), "v:user:alice", nil},
		{"first of stops", slidelog.FirstOf(slidelog.ByHeader("X-Bad"), slidelog.ByContextValue("user")), "", slidelog.ErrInvalidKey},
		{"first of none", slidelog.FirstOf(slidelog.ByHeader("X-None")), "", slidelog.ErrNoKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.give(slidelog.NewHTTPRequest(src))
			if got != tt.want || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Errorf("got %q, %v, want %q, %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
	if _, err := slidelog.ByContextValue("float")(slidelog.NewHTTPRequest(src)); err == nil || errors.Is(err, slidelog.ErrInvalidKey) {
		t.Errorf("float context value: got %v, want a server-side error", err)
	}
}

// Composite never maps two different lists of parts to one identity.
func TestCompositeInjective(t *testing.T) {
	constant := func(s string) slidelog.KeyFunc {
		return func(*slidelog.HTTPRequest) (string, error) { return s, nil }
	}
	seen := map[string][2]string{}
	parts := []string{"", "a", "a|b", "b", "a\\", "\\|", "|", "\\", "b|c", "a|"}
	r := slidelog.NewHTTPRequest(newSource("192.0.2.1:1"))
	for _, x := range parts {
		for _, y := range parts {
			k, _ := slidelog.Composite(constant(x), constant(y))(r)
			if prev, ok := seen[k]; ok {
				t.Errorf("Composite(%q, %q) = Composite(%q, %q) = %q", x, y, prev[0], prev[1], k)
			}
			seen[k] = [2]string{x, y}
		}
	}
}

func TestSkipPaths(t *testing.T) {
	skip := slidelog.SkipPaths("/healthz", "/readyz")
	for _, tt := range []struct {
		give string
		want bool
	}{{"/healthz", true}, {"/readyz", true}, {"/healthz/", false}, {"/", false}, {strings.ToUpper("/healthz"), false}} {
		src := newSource("192.0.2.1:1")
		src.path = tt.give
		if got := skip(slidelog.NewHTTPRequest(src)); got != tt.want {
			t.Errorf("SkipPaths(%q): got %v, want %v", tt.give, got, tt.want)
		}
	}
}
