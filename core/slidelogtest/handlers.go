package slidelogtest

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"
)

// This file helps users test their own handlers behind the middleware:
// give each test request a client identity, and read or assert the
// rate-limit header fields the middleware writes.

// SetClientIP makes req come from the client at ip (an IPv4 or IPv6
// address without a port) by setting its socket peer, req.RemoteAddr, to
// ip with port 1234, and returns req. The default key function,
// httplimit.ByClientIP, keys by that address, so requests from different
// addresses use different budgets.
//
// httptest.NewRequest gives every request the same peer (192.0.2.1:1234),
// so all of a test's requests share one budget; http.NewRequest gives
// none, and the middleware answers such a request 400 (no identity).
//
// fiber's app.Test serves every request from 0.0.0.0, whatever
// RemoteAddr says; serve requests with slidefiber.Test instead, which
// keeps it.
//
// SetClientIP panics when ip is not an IP address, as httptest.NewRequest
// does on a bad target: it is meant for tests. To test a request behind a
// trusted proxy, set RemoteAddr to the proxy and the forwarding header to
// the client.
func SetClientIP(req *http.Request, ip string) *http.Request {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		panic(fmt.Sprintf("slidelogtest: SetClientIP: %q is not an IP address", ip))
	}
	req.RemoteAddr = net.JoinHostPort(addr.String(), "1234")
	return req
}

// RateLimitHeaders is what a response's rate-limit header fields say:
// RateLimit-Policy and RateLimit (httplimit.HeadersIETF), or
// X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset
// (httplimit.HeadersLegacy), and Retry-After. ParseRateLimitHeaders
// returns it.
type RateLimitHeaders struct {
	// Policies holds one entry per member of RateLimit-Policy, in order
	// (a request limited by two middlewares lists both limiters'
	// policies), or the one binding policy of the X-RateLimit-* fields.
	// Empty when the response carries no rate-limit fields (a skipped
	// request, httplimit.HeadersNone).
	Policies []PolicyHeaders
	// RetryAfter is the Retry-After field, whole seconds; 0 when the
	// response has none (only denials carry it).
	RetryAfter time.Duration
}

// PolicyHeaders is what the response says about one policy.
type PolicyHeaders struct {
	// Name is the policy's name (the RateLimit-Policy member's string);
	// "" for the X-RateLimit-* fields, which name none.
	Name string
	// Limit is the policy's limit: q, or X-RateLimit-Limit.
	Limit int
	// Window is the policy's window (w); 0 for the X-RateLimit-* fields,
	// which do not say it.
	Window time.Duration
	// Known says whether the response gave the policy's state (Remaining
	// and Reset). An admission the limiter let through unchecked
	// (slidelog.FailOpen) gives the policy only.
	Known bool
	// Remaining is the number of units left after this request: r, or
	// X-RateLimit-Remaining.
	Remaining int
	// Reset is the time, whole seconds, until the policy's window is
	// empty again: t, or X-RateLimit-Reset.
	Reset time.Duration
}

// Remaining returns the smallest Remaining over the policies whose state
// the response gave: how many more units the client may use now. ok is
// false when the response gave no policy's state.
func (h RateLimitHeaders) Remaining() (remaining int, ok bool) {
	for _, p := range h.Policies {
		if p.Known && (!ok || p.Remaining < remaining) {
			remaining, ok = p.Remaining, true
		}
	}
	return remaining, ok
}

// ParseRateLimitHeaders reads the rate-limit header fields of a response
// in either style, and Retry-After. A response without them parses to the
// zero RateLimitHeaders. It returns an error, naming the field, when a
// field is malformed, when a RateLimit member names no policy of
// RateLimit-Policy, or when the response mixes both styles.
func ParseRateLimitHeaders(h http.Header) (RateLimitHeaders, error) {
	var out RateLimitHeaders
	if v := h.Values("Retry-After"); len(v) > 0 {
		d, err := seconds(v, "Retry-After")
		if err != nil {
			return RateLimitHeaders{}, err
		}
		out.RetryAfter = d
	}
	ietf := len(h.Values("RateLimit-Policy")) > 0 || len(h.Values("RateLimit")) > 0
	legacy := len(h.Values("X-RateLimit-Limit")) > 0 || len(h.Values("X-RateLimit-Remaining")) > 0 || len(h.Values("X-RateLimit-Reset")) > 0
	var err error
	switch {
	case ietf && legacy:
		return RateLimitHeaders{}, errors.New("both RateLimit and X-RateLimit-* fields")
	case ietf:
		out.Policies, err = parseIETF(h)
	case legacy:
		out.Policies, err = parseLegacy(h)
	}
	if err != nil {
		return RateLimitHeaders{}, err
	}
	return out, nil
}

// AssertRateLimited reports a test error unless resp is a denial by the
// limiter: status 429, a Retry-After of at least one second, and
// rate-limit fields that parse. It returns what the fields say, for
// further checks. With an httptest.ResponseRecorder, pass rec.Result().
func AssertRateLimited(t testing.TB, resp *http.Response) RateLimitHeaders {
	t.Helper()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("status: got %d, want %d", resp.StatusCode, http.StatusTooManyRequests)
	}
	h, err := ParseRateLimitHeaders(resp.Header)
	if err != nil {
		t.Errorf("rate-limit header fields: %v", err)
		return h
	}
	if h.RetryAfter < time.Second {
		t.Errorf("Retry-After: got %q, want at least 1 second", resp.Header.Get("Retry-After"))
	}
	return h
}

// AssertAdmitted reports a test error unless resp went past the limiter:
// a status other than 429, no Retry-After, and rate-limit fields that
// parse. It returns what the fields say, for further checks such as
// Remaining. With an httptest.ResponseRecorder, pass rec.Result().
func AssertAdmitted(t testing.TB, resp *http.Response) RateLimitHeaders {
	t.Helper()
	if resp.StatusCode == http.StatusTooManyRequests {
		t.Errorf("status: got %d, want a request the limiter admitted", resp.StatusCode)
	}
	h, err := ParseRateLimitHeaders(resp.Header)
	if err != nil {
		t.Errorf("rate-limit header fields: %v", err)
		return h
	}
	if h.RetryAfter != 0 {
		t.Errorf("Retry-After: got %q, want none", resp.Header.Get("Retry-After"))
	}
	return h
}

func parseIETF(h http.Header) ([]PolicyHeaders, error) {
	policies, err := parseList(h.Values("RateLimit-Policy"), "RateLimit-Policy", "q", "w")
	if err != nil {
		return nil, err
	}
	states, err := parseList(h.Values("RateLimit"), "RateLimit", "r", "t")
	if err != nil {
		return nil, err
	}
	out := make([]PolicyHeaders, len(policies))
	for i, p := range policies {
		out[i] = PolicyHeaders{Name: p.name, Limit: p.params[0], Window: time.Duration(p.params[1]) * time.Second}
	}
	// Each middleware appends its policies to both fields in the same
	// order, so a state belongs to the next policy of its name after the
	// previous state's (two limiters may name their policies alike).
	next := 0
	for _, s := range states {
		i := next
		for i < len(out) && out[i].Name != s.name {
			i++
		}
		if i == len(out) {
			return nil, fmt.Errorf("RateLimit: member %q follows no RateLimit-Policy member of that name", s.name)
		}
		out[i].Known, out[i].Remaining, out[i].Reset = true, s.params[0], time.Duration(s.params[1])*time.Second
		next = i + 1
	}
	return out, nil
}

func parseLegacy(h http.Header) ([]PolicyHeaders, error) {
	limit, err := integer(h.Values("X-RateLimit-Limit"), "X-RateLimit-Limit")
	if err != nil {
		return nil, err
	}
	p := PolicyHeaders{Limit: limit}
	remaining, reset := h.Values("X-RateLimit-Remaining"), h.Values("X-RateLimit-Reset")
	if len(remaining) == 0 && len(reset) == 0 {
		return []PolicyHeaders{p}, nil // an unchecked admission: the limit only
	}
	if p.Remaining, err = integer(remaining, "X-RateLimit-Remaining"); err != nil {
		return nil, err
	}
	if p.Reset, err = seconds(reset, "X-RateLimit-Reset"); err != nil {
		return nil, err
	}
	p.Known = true
	return []PolicyHeaders{p}, nil
}

// member is one member of a RateLimit or RateLimit-Policy list: a string
// and the two integer parameters the field must carry.
type member struct {
	name   string
	params [2]int
}

// parseList parses the Structured Field lists in values (RFC 9651) whose
// members are strings with the integer parameters want (and possibly
// others, ignored).
func parseList(values []string, field string, want ...string) ([]member, error) {
	var out []member
	for _, v := range values {
		s := strings.TrimSpace(v)
		for s != "" {
			m, rest, err := parseMember(s, want)
			if err != nil {
				return nil, fmt.Errorf("%s: %q: %w", field, v, err)
			}
			out = append(out, m)
			rest = strings.TrimLeft(rest, " \t")
			if rest == "" {
				break
			}
			if rest[0] != ',' {
				return nil, fmt.Errorf("%s: %q: want ',' between members", field, v)
			}
			s = strings.TrimLeft(rest[1:], " \t")
			if s == "" {
				return nil, fmt.Errorf("%s: %q: trailing ','", field, v)
			}
		}
	}
	return out, nil
}

func parseMember(s string, want []string) (member, string, error) {
	var m member
	if s == "" || s[0] != '"' {
		return m, "", errors.New("a member must start with a quoted string")
	}
	var name strings.Builder
	i := 1
	for ; i < len(s) && s[i] != '"'; i++ {
		if s[i] == '\\' {
			i++
			if i == len(s) || (s[i] != '"' && s[i] != '\\') {
				return m, "", errors.New("bad escape in string")
			}
		}
		name.WriteByte(s[i])
	}
	if i == len(s) {
		return m, "", errors.New("unterminated string")
	}
	m.name, s = name.String(), s[i+1:]
	var seen [2]bool
	for strings.HasPrefix(s, ";") {
		s = strings.TrimLeft(s[1:], " ")
		eq := strings.IndexByte(s, '=')
		if eq <= 0 {
			return m, "", errors.New("a parameter needs a value")
		}
		key := s[:eq]
		s = s[eq+1:]
		end := strings.IndexAny(s, ";, \t")
		if end < 0 {
			end = len(s)
		}
		val := s[:end]
		s = s[end:]
		for j, w := range want {
			if key == w {
				n, err := strconv.Atoi(val)
				if err != nil || n < 0 {
					return m, "", fmt.Errorf("parameter %s=%q is not a non-negative integer", key, val)
				}
				m.params[j], seen[j] = n, true
			}
		}
	}
	for j, w := range want {
		if !seen[j] {
			return m, "", fmt.Errorf("member %q has no %s parameter", m.name, w)
		}
	}
	return m, s, nil
}

// integer parses a field that must hold exactly one non-negative integer.
func integer(values []string, field string) (int, error) {
	if len(values) != 1 {
		return 0, fmt.Errorf("%s: got %d values, want 1", field, len(values))
	}
	n, err := strconv.Atoi(strings.TrimSpace(values[0]))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s: %q is not a non-negative integer", field, values[0])
	}
	return n, nil
}

func seconds(values []string, field string) (time.Duration, error) {
	n, err := integer(values, field)
	return time.Duration(n) * time.Second, err
}
