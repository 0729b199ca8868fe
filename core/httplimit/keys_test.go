package httplimit_test

import (
	"errors"
	"strings"
	"testing"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
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
		give    httplimit.KeyFunc
		want    string
		wantErr error
	}{
		{"client ip", httplimit.ByClientIP(), "ip:2001:db8:1:2::/64", nil},
		{"header", httplimit.ByHeader("X-Api-Key"), "h:x-api-key:secret", nil},
		{"header case", httplimit.ByHeader("x-api-key"), "h:x-api-key:secret", nil},
		{"missing header", httplimit.ByHeader("X-None"), "", httplimit.ErrNoKey},
		{"empty header", httplimit.ByHeader("X-Empty"), "", httplimit.ErrNoKey},
		{"control character", httplimit.ByHeader("X-Bad"), "", slidelog.ErrInvalidKey},
		{"string value", httplimit.ByContextValue("user"), "v:6:s:user:alice", nil},
		{"stringer value", httplimit.ByContextValue(ctxKey{}), "v:26:t:httplimit_test.ctxKey={}:bob", nil},
		{"int value", httplimit.ByContextValue("id"), "v:4:s:id:42", nil},
		{"missing value", httplimit.ByContextValue("nobody"), "", httplimit.ErrNoKey},
		{"route", httplimit.ByRoute(), "r:/users/:id", nil},
		{"composite", httplimit.Composite(httplimit.ByRoute(), httplimit.ByContextValue("user")), "r:/users/:id|v:6:s:user:alice", nil},
		{"composite error", httplimit.Composite(httplimit.ByRoute(), httplimit.ByHeader("X-None")), "", httplimit.ErrNoKey},
		{"first of", httplimit.FirstOf(httplimit.ByHeader("X-None"), httplimit.ByContextValue("user")), "v:6:s:user:alice", nil},
		{"first of stops", httplimit.FirstOf(httplimit.ByHeader("X-Bad"), httplimit.ByContextValue("user")), "", slidelog.ErrInvalidKey},
		{"first of none", httplimit.FirstOf(httplimit.ByHeader("X-None")), "", httplimit.ErrNoKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.give(httplimit.NewRequest(src))
			if got != tt.want || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Errorf("got %q, %v, want %q, %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
	if _, err := httplimit.ByContextValue("float")(httplimit.NewRequest(src)); !errors.Is(err, httplimit.ErrMisconfigured) {
		t.Errorf("float context value: got %v, want ErrMisconfigured", err)
	}
}

// Composite never maps two different lists of parts to one identity.
func TestCompositeInjective(t *testing.T) {
	constant := func(s string) httplimit.KeyFunc {
		return func(*httplimit.Request) (string, error) { return s, nil }
	}
	seen := map[string][2]string{}
	parts := []string{"", "a", "a|b", "b", "a\\", "\\|", "|", "\\", "b|c", "a|"}
	r := httplimit.NewRequest(newSource("192.0.2.1:1"))
	for _, x := range parts {
		for _, y := range parts {
			k, _ := httplimit.Composite(constant(x), constant(y))(r)
			if prev, ok := seen[k]; ok {
				t.Errorf("Composite(%q, %q) = Composite(%q, %q) = %q", x, y, prev[0], prev[1], k)
			}
			seen[k] = [2]string{x, y}
		}
	}
}

func TestSkipPaths(t *testing.T) {
	skip := httplimit.SkipPaths("/healthz", "/readyz")
	for _, tt := range []struct {
		give string
		want bool
	}{{"/healthz", true}, {"/readyz", true}, {"/healthz/", false}, {"/", false}, {strings.ToUpper("/healthz"), false}} {
		src := newSource("192.0.2.1:1")
		src.path = tt.give
		if got := skip(httplimit.NewRequest(src)); got != tt.want {
			t.Errorf("SkipPaths(%q): got %v, want %v", tt.give, got, tt.want)
		}
	}
}

type ptrStringer struct{ s string }

func (p *ptrStringer) String() string { return p.s } // panics on a nil *ptrStringer

type authKey int

const (
	userKey authKey = iota
	orgKey
)

// ByContextValue never gives two (key, value) pairs one identity: keys of
// one type differ by value, and a ':' in a key or value cannot shift the
// boundary between them.
func TestByContextValueInjective(t *testing.T) {
	src := newSource("192.0.2.1:1")
	src.values[userKey] = "7"
	src.values[orgKey] = "7"
	src.values["user"] = "x:1"
	src.values["user:x"] = "1"
	seen := map[string]any{}
	for _, key := range []any{userKey, orgKey, "user", "user:x", ctxKey{}} {
		id, err := httplimit.ByContextValue(key)(httplimit.NewRequest(src))
		if errors.Is(err, httplimit.ErrNoKey) {
			continue
		}
		if err != nil {
			t.Fatalf("key %v: %v", key, err)
		}
		if prev, ok := seen[id]; ok {
			t.Errorf("keys %v and %v both give identity %q", prev, key, id)
		}
		seen[id] = key
	}
	if len(seen) != 4 {
		t.Errorf("identities: got %d, want 4", len(seen))
	}
}

// A typed nil in the context is no identity (ErrNoKey), never a panic.
func TestByContextValueTypedNil(t *testing.T) {
	src := newSource("192.0.2.1:1")
	src.values["user"] = (*ptrStringer)(nil)
	_, err := httplimit.ByContextValue("user")(httplimit.NewRequest(src))
	if !errors.Is(err, httplimit.ErrNoKey) {
		t.Errorf("typed nil Stringer: got %v, want ErrNoKey", err)
	}
	id, err := httplimit.FirstOf(httplimit.ByContextValue("user"), httplimit.ByClientIP())(httplimit.NewRequest(src))
	if err != nil || id != "ip:192.0.2.1" {
		t.Errorf("FirstOf past a typed nil: got %q, %v, want ip:192.0.2.1", id, err)
	}
}

// Bad key-function configuration fails at construction, with a message
// that names the mistake.
func TestKeyFuncConstructionPanics(t *testing.T) {
	tests := []struct {
		name string
		make func()
		want string
	}{
		{"composite nil", func() { httplimit.Composite(httplimit.ByRoute(), nil) }, "Composite: key function 2 of 2 is nil"},
		{"composite none", func() { httplimit.Composite() }, "Composite needs at least one"},
		{"first of nil", func() { httplimit.FirstOf(nil, httplimit.ByClientIP()) }, "FirstOf: key function 1 of 2 is nil"},
		{"context value nil key", func() { httplimit.ByContextValue(nil) }, "not comparable"},
		{"context value slice key", func() { httplimit.ByContextValue([]string{"a"}) }, "not comparable"},
		{"header name", func() { httplimit.ByHeader("X Api Key") }, "not a header field name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				p := recover()
				if msg, _ := p.(string); !strings.Contains(msg, tt.want) {
					t.Errorf("panic: got %v, want a message containing %q", p, tt.want)
				}
			}()
			tt.make()
		})
	}
}

// The zero Request, and one of a nil source, answer every method
// without a panic; key functions on them fail with ErrInvalidKey.
func TestZeroRequest(t *testing.T) {
	for _, r := range []*httplimit.Request{{}, httplimit.NewRequest(nil), nil} {
		if r.Context() == nil || r.Method() != "" || r.Path() != "" || r.Route() != "" || r.Header("X") != nil ||
			r.RemoteAddr() != "" || r.Value("k") != nil || r.Native() != nil || r.HeaderValue("X") != "" {
			t.Errorf("%#v: want zero answers", r)
		}
		if _, err := r.ClientIP(); !errors.Is(err, slidelog.ErrInvalidKey) {
			t.Errorf("ClientIP: got %v, want ErrInvalidKey", err)
		}
		if _, err := httplimit.ByClientIP()(r); !errors.Is(err, slidelog.ErrInvalidKey) {
			t.Errorf("ByClientIP: got %v, want ErrInvalidKey", err)
		}
		if _, err := httplimit.ByHeader("X-Api-Key")(r); !errors.Is(err, httplimit.ErrNoKey) {
			t.Errorf("ByHeader: got %v, want ErrNoKey", err)
		}
		if _, err := httplimit.Composite(httplimit.ByRoute(), httplimit.ByContextValue("u"))(r); !errors.Is(err, httplimit.ErrNoKey) {
			t.Errorf("Composite: got %v, want ErrNoKey", err)
		}
		_ = httplimit.SkipPaths("/healthz")(r)
	}
}

type (
	subject string
	userID  int64
	shard   uint16
	kindKey struct{}
)

// ByContextValue takes named string and integer types and every integer
// size: each gives the identity of the same value as a string or an int,
// and so the same budget. Other kinds are still ErrMisconfigured.
func TestByContextValueKinds(t *testing.T) {
	key := kindKey{}
	id := func(v any) (string, error) {
		src := newSource("192.0.2.1:1")
		src.values[key] = v
		return httplimit.ByContextValue(key)(httplimit.NewRequest(src))
	}
	for _, tt := range []struct{ give, same any }{
		{subject("alice"), "alice"},
		{userID(42), int64(42)},
		{userID(-42), -42},
		{int8(-7), -7},
		{int16(7), 7},
		{uint8(7), 7},
		{uint16(7), 7},
		{shard(7), 7},
	} {
		got, err := id(tt.give)
		want, werr := id(tt.same)
		if err != nil || werr != nil || got != want {
			t.Errorf("%T(%v): got %q, %v, want %q (as %T)", tt.give, tt.give, got, err, want, tt.same)
		}
	}
	if _, err := id(subject("")); !errors.Is(err, httplimit.ErrNoKey) {
		t.Errorf(`subject(""): got %v, want ErrNoKey`, err)
	}
	if _, err := id(subject("a\x00b")); !errors.Is(err, slidelog.ErrInvalidKey) {
		t.Errorf(`subject("a\x00b"): got %v, want ErrInvalidKey`, err)
	}
	for _, give := range []any{1.5, float32(2), struct{ s string }{"alice"}, []byte("alice"), true, uintptr(7), complex(1, 2)} {
		if got, err := id(give); !errors.Is(err, httplimit.ErrMisconfigured) {
			t.Errorf("%T: got %q, %v, want ErrMisconfigured", give, got, err)
		}
	}
}
