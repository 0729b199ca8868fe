package httplimit_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/internal/logbuf"
	"github.com/slidelog/slidelog/core/slidelogtest"
)

// loggedLimiter returns a limiter named name on a memory store, logging
// to buf.
func loggedLimiter(t *testing.T, name string, buf *logbuf.Buffer) *slidelog.Limiter {
	t.Helper()
	store, _ := newMemory(t)
	return slidelogtest.NewLimiter(t, store, slidelog.PerMinute(1_000_000), slidelog.WithName(name),
		slidelog.WithLogger(slog.New(slog.NewTextHandler(buf, nil))))
}

// A panicking key, skip, cost or limiter function is a misconfiguration
// the server sees only at run time: Check says so at ERROR, with the
// panic's value and the stack that panicked, to the limiter's logger, once
// for 1,000 requests, not once per request; the client's answer keeps its
// fixed text.
func TestPanicsAreLogged(t *testing.T) {
	keyPanic := func(*httplimit.Request) (string, error) { panic("key func boom") }
	for _, tt := range []struct {
		kind string
		opts func(l *slidelog.Limiter) []httplimit.Option
	}{
		{"key_func_panic", func(*slidelog.Limiter) []httplimit.Option {
			return []httplimit.Option{httplimit.WithKeyFunc(keyPanic)}
		}},
		{"skip_func_panic", func(*slidelog.Limiter) []httplimit.Option {
			return []httplimit.Option{httplimit.WithSkipFunc(func(*httplimit.Request) bool { panic("skip func boom") })}
		}},
		{"cost_func_panic", func(*slidelog.Limiter) []httplimit.Option {
			return []httplimit.Option{httplimit.WithCostFunc(func(*httplimit.Request) int { panic("cost func boom") })}
		}},
		{"limiter_func_panic", func(*slidelog.Limiter) []httplimit.Option {
			return []httplimit.Option{httplimit.WithLimiterFunc(func(*httplimit.Request) *slidelog.Limiter { panic("limiter func boom") })}
		}},
	} {
		t.Run(tt.kind, func(t *testing.T) {
			var buf logbuf.Buffer
			l := loggedLimiter(t, "api", &buf)
			h, err := httplimit.New(l, tt.opts(l)...)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 1000 {
				src := newSource("192.0.2.1:1", "Authorization", "Bearer s3cret-token")
				src.route = "/users/{id}"
				d := h.Check(src)
				if d.Outcome != httplimit.OutcomeError || !errors.Is(d.Err, httplimit.ErrMisconfigured) {
					t.Fatalf("request %d: got %v, %v, want an error wrapping ErrMisconfigured", i, d.Outcome, d.Err)
				}
				if p := httplimit.ErrorProblem(d.Err); p.Status != 500 || strings.Contains(string(p.JSON()), "boom") {
					t.Fatalf("problem: got %d %s, want 500 without the panic's text", p.Status, p.JSON())
				}
			}
			lines := buf.Lines("recovered a panic")
			if len(lines) != 1 {
				t.Fatalf("got %d records for 1,000 panics, want 1:\n%s", len(lines), buf.String())
			}
			for _, want := range []string{"level=ERROR", "limiter=api", "kind=" + tt.kind, "route=/users/{id}", "method=GET",
				"requests=1", strings.ReplaceAll(tt.kind, "_func_panic", " func boom"), "stack=", `\npanic({`, "TestPanicsAreLogged"} {
				if !strings.Contains(lines[0], want) {
					t.Errorf("record lacks %q:\n%s", want, lines[0])
				}
			}
			if strings.Contains(buf.String(), "s3cret") {
				t.Errorf("a header value of the client's in the log:\n%s", buf.String())
			}
		})
	}
}

// A key function's error that is not the client's (not wrapping
// slidelog.ErrInvalidKey) is answered 503, and logged at WARN once for
// 1,000 requests; a missing identity (the client's fault, 400) is not
// logged.
func TestKeyFuncErrorIsLogged(t *testing.T) {
	var buf logbuf.Buffer
	l := loggedLimiter(t, "sessions", &buf)
	failing := func(r *httplimit.Request) (string, error) {
		if len(r.Header("X-Session")) == 0 {
			return "", httplimit.ErrNoKey
		}
		return "", errors.New("session store: connection refused")
	}
	h, err := httplimit.New(l, httplimit.WithKeyFunc(failing))
	if err != nil {
		t.Fatal(err)
	}
	for range 1000 {
		d := h.Check(newSource("192.0.2.1:1", "X-Session", "s3cret-session"))
		if d.Outcome != httplimit.OutcomeError {
			t.Fatalf("got %v, want error", d.Outcome)
		}
		if p := httplimit.ErrorProblem(d.Err); p.Status != 503 || strings.Contains(string(p.JSON()), "refused") {
			t.Fatalf("problem: got %d %s, want 503 without the error's text", p.Status, p.JSON())
		}
		if d := h.Check(newSource("192.0.2.1:1")); !errors.Is(d.Err, httplimit.ErrNoKey) {
			t.Fatalf("no session: got %v, want ErrNoKey", d.Err)
		}
	}
	lines := buf.Lines("key function failed")
	if len(lines) != 1 {
		t.Fatalf("got %d records for 1,000 key func errors, want 1:\n%s", len(lines), buf.String())
	}
	for _, want := range []string{"level=WARN", "limiter=sessions", "kind=key_func_error", "method=GET", "requests=1",
		`error="session store: connection refused"`} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("record lacks %q:\n%s", want, lines[0])
		}
	}
	if n := strings.Count(buf.String(), "\n"); n != 1 {
		t.Errorf("got %d records, want the key func error's alone (ErrNoKey is the client's):\n%s", n, buf.String())
	}
	if strings.Contains(buf.String(), "s3cret") {
		t.Errorf("a header value of the client's in the log:\n%s", buf.String())
	}
}

// In shadow mode a panic is logged as well, once, and every request is
// still let through and reported.
func TestShadowModeLogsPanics(t *testing.T) {
	var buf logbuf.Buffer
	l := loggedLimiter(t, "shadow", &buf)
	reports := 0
	h, err := httplimit.New(l, httplimit.WithKeyFunc(func(*httplimit.Request) (string, error) { panic("boom") }),
		httplimit.WithShadowMode(func(_ *httplimit.Request, _ slidelog.Result, err error) {
			if errors.Is(err, httplimit.ErrMisconfigured) {
				reports++
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	for range 1000 {
		if d := h.Check(newSource("192.0.2.1:1")); d.Outcome != httplimit.OutcomeNext {
			t.Fatalf("got %v, want next", d.Outcome)
		}
	}
	if reports != 1000 {
		t.Errorf("reports: got %d, want 1000", reports)
	}
	if lines := buf.Lines("recovered a panic"); len(lines) != 1 || !strings.Contains(lines[0], "kind=key_func_panic") {
		t.Errorf("got records %q, want one of kind key_func_panic", lines)
	}
}

// The kinds are counted apart: a key func error does not hide a panic of
// the same Engine.
func TestProblemKindsLoggedApart(t *testing.T) {
	var buf logbuf.Buffer
	l := loggedLimiter(t, "kinds", &buf)
	h, err := httplimit.New(l, httplimit.WithKeyFunc(func(r *httplimit.Request) (string, error) {
		if r.Method() == "POST" {
			panic("boom")
		}
		return "", errors.New("lookup failed")
	}))
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		h.Check(newSource("192.0.2.1:1"))
		post := newSource("192.0.2.1:1")
		post.method = "POST"
		h.Check(post)
	}
	if n := len(buf.Lines("kind=key_func_error")); n != 1 {
		t.Errorf("key func error records: got %d, want 1", n)
	}
	if n := len(buf.Lines("kind=key_func_panic")); n != 1 {
		t.Errorf("key func panic records: got %d, want 1", n)
	}
}

// A logger whose handler panics loses the record, never the request.
func TestProblemLogNeverPanics(t *testing.T) {
	store, _ := newMemory(t)
	l := slidelogtest.NewLimiter(t, store, slidelog.PerSecond(10), slidelog.WithLogger(slog.New(panickingHandler{})))
	h, err := httplimit.New(l, httplimit.WithKeyFunc(func(*httplimit.Request) (string, error) { panic("boom") }))
	if err != nil {
		t.Fatal(err)
	}
	if d := h.Check(newSource("192.0.2.1:1")); !errors.Is(d.Err, httplimit.ErrMisconfigured) {
		t.Errorf("got %v, want ErrMisconfigured", d.Err)
	}
}

type panickingHandler struct{ slog.Handler }

func (panickingHandler) Enabled(context.Context, slog.Level) bool  { return true }
func (panickingHandler) Handle(context.Context, slog.Record) error { panic("handler") }

// A limiter function that chooses no limiter, on an Engine that has none
// of its own, leaves the request with no limiter to ask: a
// misconfiguration the server sees only at run time, answered 500 (in
// shadow mode, let through and reported). Check logs it at ERROR, once for
// 1,000 requests, with the route and method, to slog.Default() (there is
// no limiter's logger); no limiter's observers count it, as none was
// chosen. A route the function gives a limiter is decided as usual.
func TestNoLimiterIsLogged(t *testing.T) {
	for _, shadow := range []bool{false, true} {
		t.Run(map[bool]string{false: "enforcing", true: "shadow"}[shadow], func(t *testing.T) {
			buf := logbuf.CaptureDefault(t)
			var limited logbuf.Buffer
			l := loggedLimiter(t, "admin", &limited)
			opts := []httplimit.Option{httplimit.WithLimiterFunc(func(r *httplimit.Request) *slidelog.Limiter {
				if r.Route() == "/admin" {
					return l
				}
				return nil // forgot the route
			})}
			reports := 0
			if shadow {
				opts = append(opts, httplimit.WithShadowMode(func(_ *httplimit.Request, _ slidelog.Result, err error) {
					if errors.Is(err, httplimit.ErrMisconfigured) {
						reports++
					}
				}))
			}
			h, err := httplimit.New(nil, opts...)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 1000 {
				src := newSource("192.0.2.1:1")
				src.route, src.method = "/users/{id}", http.MethodPost
				d := h.Check(src)
				if !errors.Is(d.Err, httplimit.ErrMisconfigured) {
					t.Fatalf("request %d: got %v, %v, want an error wrapping ErrMisconfigured", i, d.Outcome, d.Err)
				}
				if want := map[bool]httplimit.Outcome{false: httplimit.OutcomeError, true: httplimit.OutcomeNext}[shadow]; d.Outcome != want {
					t.Fatalf("request %d: got %v, want %v", i, d.Outcome, want)
				}
				if p := httplimit.ErrorProblem(d.Err); p.Status != http.StatusInternalServerError {
					t.Fatalf("problem: got %d, want 500", p.Status)
				}
				admin := newSource("192.0.2.1:1")
				admin.route = "/admin"
				if d := h.Check(admin); d.Err != nil || d.Outcome != httplimit.OutcomeNext {
					t.Fatalf("a route with a limiter: got %v, %v, want it admitted", d.Outcome, d.Err)
				}
			}
			lines := buf.Lines("no limiter")
			if len(lines) != 1 {
				t.Fatalf("got %d records for 1,000 requests with no limiter, want 1:\n%s", len(lines), buf.String())
			}
			for _, want := range []string{"level=ERROR", "kind=no_limiter", "route=/users/{id}", "method=POST", "requests=1"} {
				if !strings.Contains(lines[0], want) {
					t.Errorf("record lacks %q:\n%s", want, lines[0])
				}
			}
			if n := strings.Count(buf.String(), "\n"); n != 1 {
				t.Errorf("got %d records in slog.Default(), want the one:\n%s", n, buf.String())
			}
			if limited.String() != "" {
				t.Errorf("the limiter of another route logged:\n%s", limited.String())
			}
			if shadow && reports != 1000 {
				t.Errorf("reports: got %d, want 1000", reports)
			}
		})
	}
}

// A shadow function that panics is logged once per interval, with its
// panic and stack, and every request goes on as shadow mode decided it.
func TestShadowFuncPanicIsLogged(t *testing.T) {
	var buf logbuf.Buffer
	store, _ := newMemory(t)
	l := slidelogtest.NewLimiter(t, store, slidelog.PerMinute(1), slidelog.WithName("api"),
		slidelog.WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	reports := 0
	h, err := httplimit.New(l, httplimit.WithKeyFunc(func(*httplimit.Request) (string, error) { return "one", nil }),
		httplimit.WithShadowMode(func(*httplimit.Request, slidelog.Result, error) {
			reports++
			panic("shadow func boom")
		}))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		src := newSource("192.0.2.1:1")
		src.route = "/users/{id}"
		if d := h.Check(src); d.Outcome != httplimit.OutcomeNext || d.Err != nil {
			t.Fatalf("request %d: got %v, %v, want it let through (shadow mode)", i, d.Outcome, d.Err)
		}
	}
	if reports != 999 {
		t.Fatalf("the shadow function was told of %d requests, want 999 (all but the first denied)", reports)
	}
	lines := buf.Lines("panic of the shadow function")
	if len(lines) != 1 {
		t.Fatalf("got %d records for the shadow function's panics, want 1:\n%s", len(lines), buf.String())
	}
	for _, want := range []string{"level=ERROR", "limiter=api", "kind=shadow_func_panic", "route=/users/{id}", "shadow func boom", "stack=", "TestShadowFuncPanicIsLogged"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("record lacks %q:\n%s", want, lines[0])
		}
	}
}
