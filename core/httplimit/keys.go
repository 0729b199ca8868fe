package httplimit

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	slidelog "github.com/slidelog/slidelog/core"
)

// Key functions prefix each identity with its kind ("ip:", "h:", "v:",
// "r:"), so that a header value can never be taken for an IP address or
// a route when several kinds share one limiter.

// ByClientIP keys requests by client address: the socket peer unless it
// is a trusted proxy, IPv6 grouped by prefix (/64 by default), and a
// network's further prefixes by the network while it has too many active
// ones (a /48 past 64 /64s, a /32 past 64 such /48s): see ClientIP. The identity is "ip:"
// followed by the IPv4 address or the IPv6 prefix, such as
// "ip:192.0.2.1", "ip:2001:db8:1:2::/64" or "ip:2001:db8:1::/48". It is
// the default key function.
func ByClientIP() KeyFunc {
	return func(r *Request) (string, error) {
		p, err := r.ClientPrefix()
		if err != nil {
			return "", err
		}
		// Built in a buffer on the stack: one allocation, the identity.
		var buf [len("ip:") + len("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128")]byte
		b := append(buf[:0], "ip:"...)
		if p.Addr().Is4() {
			b = p.Addr().AppendTo(b)
		} else {
			b = p.AppendTo(b)
		}
		return string(b), nil
	}
}

// ByHeader keys requests by the value of the named header field: "h:" +
// the lower-case name + ":" + the value (the name, a header token, holds
// no ':'). It is for a value your own proxy or gateway sets after
// checking the client (an API gateway's consumer id, a user id your
// authenticating proxy writes), or a secret API key checked further on;
// never for a value the client chooses freely, since every new value is a
// new budget: for identities your own code verifies, use ByContextValue,
// and put a ByClientIP limit in front of the authentication.
//
// The header must carry one value. A request with the field more than
// once, or with a comma-separated list in it, fails with
// ErrDuplicateHeader (400), before any store call: a proxy that adds the
// field (HAProxy's http-request add-header) puts its value after the
// client's, one that sets it (nginx's proxy_set_header) leaves one, and
// the application cannot tell which proxy it is behind, so it refuses
// rather than guess; only a client that sends the field itself is
// refused. A request without the field, or with an empty value, fails
// with ErrNoKey; a value with control characters with
// slidelog.ErrInvalidKey (400); one longer than the limiter's maximum key
// length with ErrIdentityTooLong (431). The name's case does not matter.
// It panics when name is not a header field name, so that the mistake
// shows at start-up.
func ByHeader(name string) KeyFunc {
	if !validHeaderName(name) {
		panic(fmt.Sprintf("httplimit: ByHeader(%q): not a header field name", name))
	}
	prefix := "h:" + strings.ToLower(name) + ":"
	return func(r *Request) (string, error) {
		vs := r.Header(name)
		if len(vs) > 1 {
			return "", fmt.Errorf("%w: header %s sent %d times", ErrDuplicateHeader, name, len(vs))
		}
		v := ""
		if len(vs) == 1 {
			v = strings.TrimSpace(vs[0])
		}
		if v == "" {
			return "", fmt.Errorf("%w: header %s", ErrNoKey, name)
		}
		if strings.IndexByte(v, ',') >= 0 {
			return "", fmt.Errorf("%w: header %s holds a list", ErrDuplicateHeader, name)
		}
		if hasControl(v) {
			return "", fmt.Errorf("%w: control character in header %s", slidelog.ErrInvalidKey, name)
		}
		return prefix + v, nil
	}
}

// ByContextValue keys requests by a value the application's
// authentication middleware stored for the request after verifying it,
// such as the subject claim of a verified JWT: the value r.Value(key)
// finds (gin's and echo's Set, fiber's Locals, or the request context). It
// must be a fmt.Stringer, a string or an integer (not a uintptr), of a
// named type too (type userID int64): a value that is not a fmt.Stringer
// gives the identity its underlying type's value would, so
// subject("alice") and "alice", userID(42) and 42 share a budget.
// Absent, empty or a nil pointer, the request fails with ErrNoKey; of
// another type (a float, a struct, a []byte), with ErrMisconfigured
// (500).
//
// The identity is "v:", the length of the key's identity, ":", the key's
// identity, ":" and the value, so that two keys never share identities:
// a string key is itself ("s:user"), any other key is its type and value
// ("t:auth.ctxKey=1"), so two keys of one type differ by value. A key
// should print (%v) the same in every process, as strings, named integers
// and structs do: a Redis store shares its logs between processes. It
// panics when key is nil or not comparable (as context.WithValue does),
// so that the mistake shows at start-up.
//
// Never key by a claim of a token that was not verified (signature,
// algorithm allow-list, expiry): decoding an unverified token lets any
// client choose its identity. Verification costs CPU, so put a limit by
// IP in front of the authentication middleware too.
func ByContextValue(key any) KeyFunc {
	if key == nil || !reflect.TypeOf(key).Comparable() {
		panic(fmt.Sprintf("httplimit: ByContextValue(%T): key is nil or not comparable", key))
	}
	var id string
	if s, ok := key.(string); ok {
		id = "s:" + s
	} else {
		id = fmt.Sprintf("t:%T=%v", key, key)
	}
	prefix := "v:" + strconv.Itoa(len(id)) + ":" + id + ":"
	return func(r *Request) (string, error) {
		s, err := identityOf(r.Value(key))
		if err != nil {
			return "", err
		}
		if s == "" {
			return "", fmt.Errorf("%w: no context value for %s", ErrNoKey, id)
		}
		if hasControl(s) {
			return "", fmt.Errorf("%w: control character in context value", slidelog.ErrInvalidKey)
		}
		return prefix + s, nil
	}
}

// identityOf returns v as an identity: "" for nil, a nil pointer or any
// other nil value; a fmt.Stringer's String; a string's or an integer's
// value, of a named type too; an error wrapping ErrMisconfigured for a
// type that cannot be one.
func identityOf(v any) (string, error) {
	if v == nil {
		return "", nil
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
		if rv.IsNil() {
			return "", nil
		}
	}
	switch v := v.(type) {
	case string:
		return v, nil
	case fmt.Stringer:
		return v.String(), nil
	case int:
		return strconv.Itoa(v), nil
	case int32:
		return strconv.FormatInt(int64(v), 10), nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case uint:
		return strconv.FormatUint(uint64(v), 10), nil
	case uint32:
		return strconv.FormatUint(uint64(v), 10), nil
	case uint64:
		return strconv.FormatUint(v, 10), nil
	}
	// A named string or integer type (type userID int64), or a smaller
	// integer: the value as its underlying type would give it.
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.String:
		return rv.String(), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(rv.Int(), 10), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return strconv.FormatUint(rv.Uint(), 10), nil
	}
	return "", fmt.Errorf("%w: context value of type %T cannot be an identity", ErrMisconfigured, v)
}

// ByRoute keys requests by the pattern of the route the framework matched
// ("r:/users/:id"), never by the raw path, so /users/1 and /users/2 share
// one identity. Every adapter knows the pattern: chi's route (found even
// under r.Use, before chi routes), http.ServeMux's Request.Pattern (Go
// 1.22; set once the mux has routed, so wrap each handler the mux
// serves, not the mux), gin's FullPath, echo's Path, fiber's route (on a
// route or its handlers, not under app.Use or a group's Use, which run
// before fiber knows the route), the gRPC full method and the Connect
// procedure (before connect-go routes it under slideconnect's
// Interceptor.Handler, where a made-up name is a procedure too: see
// there). Where the pattern is not known, or no route matched (a 404),
// ByRoute fails with ErrNoRoute, answered 400, never one budget shared by
// every route; FirstOf(ByRoute(), ByClientIP()) keys those requests by
// client instead. Combine it with ByClientIP in Composite for a
// per-client, per-route limit.
func ByRoute() KeyFunc {
	return func(r *Request) (string, error) {
		route := r.Route()
		if route == "" {
			return "", ErrNoRoute
		}
		return "r:" + route, nil
	}
}

// Composite keys requests by several identities at once, such as route
// and client: the parts are escaped and joined with "|" so that no two
// different lists of parts give the same identity. Any part's error is
// the composite's error. It panics when given no key function or a nil
// one, so that the mistake shows at start-up, not per request.
func Composite(fs ...KeyFunc) KeyFunc {
	mustKeyFuncs("Composite", fs)
	return func(r *Request) (string, error) {
		var b strings.Builder
		for i, f := range fs {
			part, err := f(r)
			if err != nil {
				return "", err
			}
			if i > 0 {
				b.WriteByte('|')
			}
			for j := 0; j < len(part); j++ {
				if part[j] == '|' || part[j] == '\\' {
					b.WriteByte('\\')
				}
				b.WriteByte(part[j])
			}
		}
		return b.String(), nil
	}
}

// FirstOf keys requests by the first key function that finds an
// identity: it moves on when one fails with ErrNoKey and stops at any
// other error. For example FirstOf(ByContextValue(userKey), ByClientIP())
// limits signed-in users by account and everyone else by address. When
// none finds one, it fails with ErrNoKey. It panics when given no key
// function or a nil one, so that the mistake shows at start-up.
func FirstOf(fs ...KeyFunc) KeyFunc {
	mustKeyFuncs("FirstOf", fs)
	return func(r *Request) (string, error) {
		for _, f := range fs {
			key, err := f(r)
			if err == nil || !errors.Is(err, ErrNoKey) {
				return key, err
			}
		}
		return "", ErrNoKey
	}
}

// SkipPaths returns a SkipFunc that lets requests for exactly these paths
// (such as "/healthz") bypass the limiter. It compares Request.Path,
// the path as the framework's router matches it, byte for byte: an
// encoded ("/%68ealthz"), dot-segment ("/files/../healthz"),
// double-slash or trailing-slash spelling that the router serves from
// another route is limited. A spelling the router does serve from the
// skipped route but that differs from it may be limited too: skipping
// less is safe, skipping more is not.
func SkipPaths(paths ...string) SkipFunc {
	set := make(map[string]bool, len(paths))
	for _, p := range paths {
		set[p] = true
	}
	return func(r *Request) bool { return set[r.Path()] }
}

// mustKeyFuncs panics unless fs holds at least one key function and no
// nil one.
func mustKeyFuncs(name string, fs []KeyFunc) {
	if len(fs) == 0 {
		panic("httplimit: " + name + " needs at least one key function")
	}
	for i, f := range fs {
		if f == nil {
			panic(fmt.Sprintf("httplimit: %s: key function %d of %d is nil", name, i+1, len(fs)))
		}
	}
}

func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return true
		}
	}
	return false
}
