package httplimit

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	slidelog "github.com/slidelog/slidelog/core"
)

// HeaderStyle chooses which rate-limit header fields responses carry.
type HeaderStyle uint8

// Header styles.
const (
	// HeadersIETF sends RateLimit-Policy and RateLimit as defined by
	// draft-ietf-httpapi-ratelimit-headers-10, one list member per policy:
	//
	//	RateLimit-Policy: "per-minute";q=100;w=60
	//	RateLimit: "per-minute";r=42;t=17
	//
	// q is the policy's limit and w its window in seconds; r is the exact
	// number of units remaining after this decision and t the seconds,
	// rounded up, until the policy's window holds no entries (full
	// capacity is back). A decision of FailOpen or FailClosed, which
	// checked nothing, carries RateLimit-Policy only: its state is
	// unknown, which the draft lets a server say by omitting the field.
	//
	// A policy's name is sent as a Structured Field String, which holds
	// printable ASCII only (a quote and a backslash are escaped): New
	// refuses a limiter with a policy whose name has other bytes, so that
	// no two names show as one. The policies of a limiter chosen by
	// WithLimiterFunc, or by a policy function (slidelog.WithPolicyFunc),
	// are not known then: such a name is sent with '_' for each of those
	// bytes. The default.
	HeadersIETF HeaderStyle = iota
	// HeadersLegacy sends X-RateLimit-Limit, X-RateLimit-Remaining and
	// X-RateLimit-Reset (seconds until full capacity, rounded up) for the
	// binding policy (see Result); only X-RateLimit-Limit on a decision
	// of FailOpen or FailClosed, whose state is unknown. When two middlewares limit one request,
	// the inner one's values replace the outer one's.
	HeadersLegacy
	// HeadersNone sends no rate-limit header fields. Retry-After is still
	// sent on a denial.
	HeadersNone
)

// String returns "ietf", "legacy" or "none".
func (s HeaderStyle) String() string {
	switch s {
	case HeadersIETF:
		return "ietf"
	case HeadersLegacy:
		return "legacy"
	case HeadersNone:
		return "none"
	}
	return "unknown"
}

// HeaderField is one response header field.
type HeaderField struct {
	Name, Value string
	// Append says to add the value to the field's existing values rather
	// than replace them. RateLimit and RateLimit-Policy are lists: when
	// two middlewares (say a group's and a route's) both limit a request,
	// the response lists both limiters' policies. Other fields replace.
	Append bool
}

// HeaderFields returns the header fields the middleware sends with the
// decision res in style: the rate-limit fields, and on a denial
// Retry-After (whole seconds, rounded up), last. A handler that decides on
// its own (say a login keyed by the username in its body) sends what the
// middleware would with SetHeader, then WriteDenied on a denial:
//
//	res, err := limiter.Allow(r.Context(), "login:"+username)
//	if err != nil {
//		httplimit.WriteError(w, err)
//		return
//	}
//	httplimit.SetHeader(w.Header(), httplimit.HeaderFields(httplimit.HeadersIETF, res))
//	if !res.Allowed {
//		httplimit.WriteDenied(w, res)
//		return
//	}
func HeaderFields(style HeaderStyle, res slidelog.Result) []HeaderField {
	return appendHeaderFields(nil, style, res, nil, nil)
}

// appendHeaderFields appends HeaderFields(style, res) to h, with the
// RateLimit-Policy value of res's policies taken from texts when it holds
// them (texts may be nil).
func appendHeaderFields(h []HeaderField, style HeaderStyle, res slidelog.Result, texts *policyTexts, room []byte) []HeaderField {
	h = appendRateLimitHeaders(h, style, res, texts, room)
	if !res.Allowed {
		h = append(h, HeaderField{Name: "Retry-After", Value: retryAfterSeconds(res.RetryAfter)})
	}
	return h
}

// WriteDenied writes the middleware's default answer to the denial res:
// status 429 with the problem body DeniedProblem(res). Set the header
// fields first (SetHeader, HeaderFields), as the header is sent with the
// status.
func WriteDenied(w http.ResponseWriter, res slidelog.Result) {
	WriteProblem(w, DeniedProblem(res))
}

// WriteError writes the middleware's default answer to a request no
// decision could be made on because of err: ErrorProblem(err)'s status
// and body, never err's text.
func WriteError(w http.ResponseWriter, err error) {
	WriteProblem(w, ErrorProblem(err))
}

// WriteProblem writes p as the response: Content-Type
// ProblemContentType, p.Status, and p as JSON.
func WriteProblem(w http.ResponseWriter, p Problem) {
	w.Header().Set("Content-Type", ProblemContentType)
	w.WriteHeader(p.Status)
	_, _ = w.Write(p.JSON())
}

func appendRateLimitHeaders(h []HeaderField, style HeaderStyle, res slidelog.Result, texts *policyTexts, room []byte) []HeaderField {
	switch style {
	case HeadersIETF:
		states := res.States()
		if len(states) == 0 {
			return h
		}
		t := texts.of(states)
		h = append(h, HeaderField{Name: "RateLimit-Policy", Value: t.value, Append: true})
		if res.Unchecked() {
			return h // nothing was checked: the state is unknown, not "none left"
		}
		// Built on the stack: one allocation, the value.
		var buf [128]byte
		b := buf[:0]
		for i, p := range states {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = append(b, t.names[i]...)
			b = append(b, ";r="...)
			b = strconv.AppendInt(b, int64(max(p.Remaining, 0)), 10)
			b = append(b, ";t="...)
			b = strconv.AppendInt(b, ceilSeconds(p.ResetAfter), 10)
		}
		return append(h, HeaderField{Name: "RateLimit", Value: text(b, room), Append: true})
	case HeadersLegacy:
		if res.Unchecked() {
			return append(h, HeaderField{Name: "X-RateLimit-Limit", Value: strconv.Itoa(res.Limit)})
		}
		return append(h,
			HeaderField{Name: "X-RateLimit-Limit", Value: strconv.Itoa(res.Limit)},
			HeaderField{Name: "X-RateLimit-Remaining", Value: strconv.Itoa(max(res.Remaining, 0))},
			HeaderField{Name: "X-RateLimit-Reset", Value: strconv.FormatInt(ceilSeconds(res.ResetAfter), 10)})
	}
	return h
}

// text returns b as a string, stored in room when it fits: room's bytes
// are never written again (Check sets aside room for one request).
func text(b, room []byte) string {
	if len(b) == 0 || len(b) > len(room) {
		return string(b)
	}
	n := copy(room, b)
	return unsafe.String(&room[0], n)
}

// policyText is what the RateLimit headers say of a list of policies
// whatever the decision: the RateLimit-Policy value, and each policy's
// name as a Structured Field String.
type policyText struct {
	policies []slidelog.Policy
	names    []string
	value    string
}

// newPolicyText renders the policies of states.
func newPolicyText(states []slidelog.PolicyResult) *policyText {
	t := &policyText{policies: make([]slidelog.Policy, len(states)), names: make([]string, len(states))}
	var b strings.Builder
	for i, p := range states {
		t.policies[i] = p.Policy
		t.names[i] = sfString(p.Policy.String())
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(t.names[i])
		b.WriteString(";q=")
		b.WriteString(strconv.Itoa(p.Policy.Limit))
		b.WriteString(";w=")
		b.WriteString(strconv.FormatInt(ceilSeconds(p.Policy.Window), 10))
	}
	t.value = b.String()
	return t
}

// policyTexts keeps the policyTexts of an Engine's last few sets of
// policies (a limiter's, or the few a LimiterFunc chooses between), so
// that each set is rendered once. It is safe for concurrent use; a nil
// *policyTexts renders every time.
type policyTexts struct {
	last [4]atomic.Pointer[policyText]
	next atomic.Uint32 // where the next new text goes, round robin
}

// of returns the policyText of states' policies.
func (c *policyTexts) of(states []slidelog.PolicyResult) *policyText {
	if c == nil {
		return newPolicyText(states)
	}
	for i := range c.last {
		if t := c.last[i].Load(); t != nil && t.describes(states) {
			return t
		}
	}
	t := newPolicyText(states)
	c.last[c.next.Add(1)%uint32(len(c.last))].Store(t)
	return t
}

// describes reports whether t is the text of states' policies.
func (t *policyText) describes(states []slidelog.PolicyResult) bool {
	if len(t.policies) != len(states) {
		return false
	}
	for i := range states {
		if states[i].Policy != t.policies[i] {
			return false
		}
	}
	return true
}

// RetryAfterText is d in whole seconds, rounded up as Retry-After rounds
// it, with its unit: "1 second", "5 seconds". The adapters use it in the
// messages of denials.
func RetryAfterText(d time.Duration) string {
	if s := ceilSeconds(d); s != 1 {
		return strconv.FormatInt(s, 10) + " seconds"
	}
	return "1 second"
}

// retryAfterSeconds formats d as a Retry-After value: whole seconds,
// rounded up, so that a client retrying then is not denied again; at
// least 1 for any d > 0.
func retryAfterSeconds(d time.Duration) string {
	return strconv.FormatInt(ceilSeconds(d), 10)
}

func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// sfPrintable reports whether sfString(s) holds every byte of s: whether
// s is printable ASCII (0x20 to 0x7e).
func sfPrintable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// sfString encodes s as a Structured Field String (RFC 9651): quoted,
// with quote and backslash escaped. Characters a String cannot hold
// (controls, non-ASCII) become '_'.
func sfString(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c > 0x7e:
			b.WriteByte('_')
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// ProblemContentType is the media type of problem bodies (RFC 9457).
const ProblemContentType = "application/problem+json"

// Problem type URIs of the bodies the default handlers send.
const (
	ProblemTypeRateLimited     = "https://github.com/slidelog/slidelog/blob/main/docs/problems.md#rate-limited"
	ProblemTypeInvalidIdentity = "https://github.com/slidelog/slidelog/blob/main/docs/problems.md#invalid-identity"
	ProblemTypeUnavailable     = "https://github.com/slidelog/slidelog/blob/main/docs/problems.md#limiter-unavailable"
)

// Problem is an RFC 9457 problem details body.
type Problem struct {
	// Type is a URI identifying the kind of problem.
	Type string `json:"type"`
	// Title is a short, human-readable summary of the kind of problem.
	Title string `json:"title"`
	// Status is the HTTP status code.
	Status int `json:"status"`
	// Detail explains this occurrence. It never carries internal error
	// text.
	Detail string `json:"detail"`
	// ViolatedPolicies names the policies that denied the request (on a
	// 429 only).
	ViolatedPolicies []string `json:"violated-policies,omitempty"`
}

// JSON returns the problem encoded as JSON.
func (p Problem) JSON() []byte {
	b, err := json.Marshal(p)
	if err != nil { // cannot happen: every field is a string, an int or strings
		return []byte(`{"status":` + strconv.Itoa(p.Status) + `}`)
	}
	return b
}

// DeniedProblem returns the body of a 429 for the denial res: its
// violated policies and when to retry. A denial of FailClosed checked
// nothing and violated no policy: its body says the limiter was
// unavailable and lists no violated policies.
func DeniedProblem(res slidelog.Result) Problem {
	if res.Unchecked() {
		return Problem{
			Type:   ProblemTypeRateLimited,
			Title:  "Too Many Requests",
			Status: http.StatusTooManyRequests,
			Detail: "The rate limiter is unavailable; retry after " + RetryAfterText(res.RetryAfter) + ".",
		}
	}
	violated := res.Violated()
	if violated == nil {
		violated = []string{}
	}
	return Problem{
		Type:             ProblemTypeRateLimited,
		Title:            "Too Many Requests",
		Status:           http.StatusTooManyRequests,
		Detail:           "Rate limit exceeded; retry after " + RetryAfterText(res.RetryAfter) + ".",
		ViolatedPolicies: violated,
	}
}

// ErrorProblem returns the body for a request the middleware could not
// decide on, with a generic detail: 400 for an identity wrapping
// slidelog.ErrInvalidKey, 431 for ErrIdentityTooLong, 500 for a server-side
// misconfiguration (slidelog.ErrInvalidCost, slidelog.ErrInvalidPolicy (a
// policy func's), slidelog.ErrInvalidOption, ErrMisconfigured), and 503 for
// everything else (the store was unavailable, a policy func failed, the
// context ended, the limiter was closed). The error's text is never part of the body.
func ErrorProblem(err error) Problem {
	switch {
	case errors.Is(err, ErrIdentityTooLong):
		return Problem{
			Type:   ProblemTypeInvalidIdentity,
			Title:  "Request Header Fields Too Large",
			Status: http.StatusRequestHeaderFieldsTooLarge,
			Detail: "The client identity in this request is too long.",
		}
	case errors.Is(err, slidelog.ErrInvalidKey):
		return Problem{
			Type:   ProblemTypeInvalidIdentity,
			Title:  "Bad Request",
			Status: http.StatusBadRequest,
			Detail: "This request carries no valid client identity.",
		}
	case errors.Is(err, slidelog.ErrInvalidCost), errors.Is(err, slidelog.ErrInvalidPolicy), errors.Is(err, slidelog.ErrInvalidOption), errors.Is(err, ErrMisconfigured):
		return Problem{
			Type:   "about:blank",
			Title:  "Internal Server Error",
			Status: http.StatusInternalServerError,
			Detail: "The rate limiter is misconfigured.",
		}
	}
	return Problem{
		Type:   ProblemTypeUnavailable,
		Title:  "Service Unavailable",
		Status: http.StatusServiceUnavailable,
		Detail: "The rate limiter could not decide on this request; try again later.",
	}
}

// SetHeader applies a decision's header fields to h, in order: a field
// with Append adds its value to h's values of its name, any other
// replaces them. Adapters built on net/http call it before the handler
// or the denied handler writes the response.
//
// When a RateLimit-Policy member repeats the name of a policy h already
// lists (two middlewares on one request whose policies share a name, such
// as two LimitByIP(slidelog.PerMinute(n)) on nested routes), this
// decision's policy is listed under its name with "-2" appended (or "-3",
// and so on: the first not yet listed), in RateLimit-Policy and RateLimit
// alike, so that each name in the response names one policy.
func SetHeader(h http.Header, fields []HeaderField) {
	setHeader(h, fields, nil)
}

// SetHeader applies d.Header to h as SetHeader(h, d.Header) does. The
// first call stores the values in the room Check set aside for them, and
// so allocates nothing of its own; a later call, on d or on a copy of it,
// allocates as SetHeader does, leaving the values the first one stored as
// they are.
func (d *Decision) SetHeader(h http.Header) {
	var room []string
	if a := d.alloc; a != nil && a.taken.CompareAndSwap(false, true) {
		room = a.values[:]
	}
	setHeader(h, d.Header, room)
}

// setHeader is SetHeader, storing the values in room when it has space
// for them.
func setHeader(h http.Header, fields []HeaderField, room []string) {
	if len(fields) == 0 {
		return
	}
	if listed := h[keyRateLimitPolicy]; len(listed) > 0 {
		fields = DistinctPolicyNames(fields, listed)
	}
	// As h.Add and h.Set, with at most one allocation for every new value.
	values := room
	if len(values) < len(fields) {
		values = make([]string, len(fields))
	}
	for i, f := range fields {
		key := canonicalKey(f.Name)
		if f.Append && len(h[key]) > 0 {
			h[key] = append(h[key], f.Value)
			continue
		}
		values[i] = f.Value
		h[key] = values[i : i+1 : i+1]
	}
}

// The canonical forms (http.CanonicalHeaderKey) of the names of the header
// fields the middleware sends.
var (
	keyRateLimitPolicy  = http.CanonicalHeaderKey("RateLimit-Policy")
	keyRateLimit        = http.CanonicalHeaderKey("RateLimit")
	keyRetryAfter       = http.CanonicalHeaderKey("Retry-After")
	keyXRateLimitLimit  = http.CanonicalHeaderKey("X-RateLimit-Limit")
	keyXRateLimitRemain = http.CanonicalHeaderKey("X-RateLimit-Remaining")
	keyXRateLimitReset  = http.CanonicalHeaderKey("X-RateLimit-Reset")
)

// canonicalKey is http.CanonicalHeaderKey(name), without its allocation
// for the names the middleware sends.
func canonicalKey(name string) string {
	switch name {
	case "RateLimit-Policy":
		return keyRateLimitPolicy
	case "RateLimit":
		return keyRateLimit
	case "Retry-After":
		return keyRetryAfter
	case "X-RateLimit-Limit":
		return keyXRateLimitLimit
	case "X-RateLimit-Remaining":
		return keyXRateLimitRemain
	case "X-RateLimit-Reset":
		return keyXRateLimitReset
	}
	return http.CanonicalHeaderKey(name)
}

// DistinctPolicyNames returns fields with the policies of its
// RateLimit-Policy and RateLimit fields renamed where their names repeat
// one the response already lists in listed (its RateLimit-Policy
// values), as SetHeader does. It returns fields itself when nothing
// repeats. It is for adapters whose framework has no http.Header.
func DistinctPolicyNames(fields []HeaderField, listed []string) []HeaderField {
	taken := map[string]bool{}
	for _, v := range listed {
		for _, m := range sfMembers(v) {
			taken[m.name] = true
		}
	}
	if len(taken) == 0 {
		return fields
	}
	rename := map[string]string{}
	for _, f := range fields {
		if !strings.EqualFold(f.Name, "RateLimit-Policy") {
			continue
		}
		for _, m := range sfMembers(f.Value) {
			if !taken[m.name] {
				taken[m.name] = true
				continue
			}
			for i := 2; ; i++ {
				if n := m.name + "-" + strconv.Itoa(i); !taken[n] {
					rename[m.name], taken[n] = n, true
					break
				}
			}
		}
	}
	if len(rename) == 0 {
		return fields
	}
	out := make([]HeaderField, len(fields))
	for i, f := range fields {
		if strings.EqualFold(f.Name, "RateLimit-Policy") || strings.EqualFold(f.Name, "RateLimit") {
			var b strings.Builder
			for j, m := range sfMembers(f.Value) {
				if j > 0 {
					b.WriteString(", ")
				}
				name := m.name
				if n, ok := rename[name]; ok {
					name = n
				}
				b.WriteString(sfString(name))
				b.WriteString(m.params)
			}
			f.Value = b.String()
		}
		out[i] = f
	}
	return out
}

// sfMember is one member of a Structured Field List whose items are
// Strings: the string's value and the parameters after it, such as
// ";q=100;w=60".
type sfMember struct{ name, params string }

// sfMembers splits a RateLimit-Policy or RateLimit value into its
// members. A member that is not a String is skipped.
func sfMembers(v string) []sfMember {
	var out []sfMember
	for i := 0; i < len(v); {
		for i < len(v) && (v[i] == ' ' || v[i] == '\t' || v[i] == ',') {
			i++
		}
		if i >= len(v) {
			break
		}
		var name strings.Builder
		quoted := v[i] == '"'
		if quoted {
			for i++; i < len(v) && v[i] != '"'; i++ {
				if v[i] == '\\' && i+1 < len(v) {
					i++
				}
				name.WriteByte(v[i])
			}
			i++ // the closing quote
		}
		start := i
		for i < len(v) && v[i] != ',' {
			i++
		}
		if quoted {
			out = append(out, sfMember{name: name.String(), params: strings.TrimRight(v[start:i], " \t")})
		}
	}
	return out
}
