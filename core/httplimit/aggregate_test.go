package httplimit_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/slidelogtest"
)

// keyStore counts the identities a limiter asks its store about, and
// answers from inner (nil: every call fails, so the limiter falls back).
type keyStore struct {
	inner slidelog.Store
	mu    sync.Mutex
	keys  map[string]struct{}
}

var errDown = errors.New("store down")

func (s *keyStore) Take(ctx context.Context, req slidelog.Request) (slidelog.Result, error) {
	s.mu.Lock()
	s.keys[req.Key] = struct{}{}
	s.mu.Unlock()
	if s.inner == nil {
		return slidelog.Result{}, errDown
	}
	return s.inner.Take(ctx, req)
}

func (s *keyStore) Refund(ctx context.Context, req slidelog.Request) error {
	if s.inner == nil {
		return errDown
	}
	return s.inner.Refund(ctx, req)
}

func (s *keyStore) Reset(ctx context.Context, req slidelog.Request) error {
	if s.inner == nil {
		return errDown
	}
	return s.inner.Reset(ctx, req)
}

func (s *keyStore) Close() error { return nil }

// count returns how many identities the store was asked about.
func (s *keyStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.keys)
}

// keyStoreInners are the stores a keyStore answers from in the flood
// tests: a memory store (closed when the test ends), and none (every call
// fails, so the limiter's fallback decides).
var keyStoreInners = []struct {
	name  string
	inner func(t *testing.T) slidelog.Store
}{
	{"memory store", func(t *testing.T) slidelog.Store {
		m := memstore.New()
		t.Cleanup(func() { _ = m.Close() })
		return m
	}},
	{"fallback", func(*testing.T) slidelog.Store { return nil }},
}

// newKeyStoreEngine returns a keyStore on inner and an Engine, keyed by
// the default key, of a limiter "ip" of limit an hour on it, with no deny
// cache and FailFallback.
func newKeyStoreEngine(t *testing.T, inner slidelog.Store, limit int) (*keyStore, *httplimit.Engine) {
	t.Helper()
	store := &keyStore{inner: inner, keys: map[string]struct{}{}}
	l := slidelogtest.NewLimiter(t, store, slidelog.Policy{Name: "ip", Limit: limit, Window: time.Hour},
		slidelog.WithDenyCache(0), slidelog.WithFailureMode(slidelog.FailFallback))
	return store, newEngine(t, l)
}

// TestMintedIPv6PrefixesLockOut: an attacker rotating 150,000 /64s from
// three /48s (a /48 holds 65,536 /64s), with the default key, the default memory store (its default
// table of 100,000 identities) and the limiter's fallback (its default
// 100,000 keys), cannot stop a new client of another prefix from being
// admitted; the identities it makes are bounded by the aggregation: 64
// /64s and the /48 itself per /48. (Without the aggregation the table
// fills at 100,000 and every new client shares the exhausted overflow
// log.)
func TestMintedIPv6PrefixesLockOut(t *testing.T) {
	const minted = 150_000
	for _, tt := range keyStoreInners {
		t.Run(tt.name, func(t *testing.T) {
			store, e := newKeyStoreEngine(t, tt.inner(t), 1)
			for i := range minted {
				d := e.Check(newSource(fmt.Sprintf("[2001:db8:%x:%x::1]:443", 0x10+i%3, i/3)))
				if d.Outcome == httplimit.OutcomeError {
					t.Fatalf("minted /64 %d: %v", i, d.Err)
				}
			}
			for _, newcomer := range []string{"[2001:db8:99:1::1]:443", "[2001:db9::1]:443", "192.0.2.1:443"} {
				if d := e.Check(newSource(newcomer)); d.Outcome != httplimit.OutcomeNext {
					t.Errorf("new client %s: got %v (%v), want admitted", newcomer, d.Outcome, d.Err)
				}
			}
			// A client seen before the flood keeps its window.
			if d := e.Check(newSource("[2001:db8:10::5]:443")); d.Outcome != httplimit.OutcomeDenied {
				t.Errorf("first minted /64 again: got %v, want denied (its window is kept)", d.Outcome)
			}
			want := 3*(httplimit.DefaultIPv6PrefixesPerNetwork+1) + 3
			if n := store.count(); n > want {
				t.Errorf("identities: got %d, want at most %d", n, want)
			}
		})
	}
}

// TestIPv6AggregationOption: the option's bounds, and turning it off.
func TestIPv6AggregationOption(t *testing.T) {
	l, err := slidelog.New(memstore.New(), slidelog.PerMinute(1000), slidelog.WithDenyCache(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	for _, give := range []httplimit.ClientIP{
		{IPv6Network: -1, IPv6PrefixesPerNetwork: 1},
		{IPv6Network: 128, IPv6PrefixesPerNetwork: 1},
		{IPv6Network: 48, IPv6PrefixesPerNetwork: -1},
		{IPv6Network: 64, IPv6PrefixesPerNetwork: 4},
		{IPv6Network: 48, IPv6PrefixesPerNetwork: 4097},
		{IPv6Prefix: 48, IPv6Network: 48},
		{NoIPv6Aggregation: true, IPv6Network: 48},
		{NoIPv6Aggregation: true, IPv6PrefixesPerNetwork: 64},
	} {
		if _, err := httplimit.New(l, httplimit.WithClientIP(give)); !errors.Is(err, slidelog.ErrInvalidOption) {
			t.Errorf("%+v: got %v, want ErrInvalidOption", give, err)
		}
	}
	keys := func(opts ...httplimit.Option) map[string]bool {
		got := map[string]bool{}
		opts = append(opts, httplimit.WithKeyFunc(func(r *httplimit.Request) (string, error) {
			k, err := httplimit.ByClientIP()(r)
			got[k] = true
			return k, err
		}))
		e, err := httplimit.New(l, opts...)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			e.Check(newSource(fmt.Sprintf("[2001:db8:1:%x::1]:1", i)))
		}
		return got
	}
	if got := keys(httplimit.WithClientIP(httplimit.ClientIP{IPv6Network: 40, IPv6PrefixesPerNetwork: 3})); len(got) != 4 || !got["ip:2001:db8::/40"] {
		t.Errorf("aggregation /40 after 3: got %v, want 3 /64s and the /40", got)
	}
	if got := keys(httplimit.WithClientIP(httplimit.ClientIP{NoIPv6Aggregation: true})); len(got) != 10 {
		t.Errorf("aggregation off: got %d identities, want 10", len(got))
	}
}

// TestMintedIPv6NetworksBound: an attacker minting /64s from a whole /32
// (two in each of its 65,536 /48s: 131,072 in all), or rotating 16,385
// /48s (one more than the networks the aggregation used to remember) for
// three rounds with two fresh /64s each round, makes at most MaxIPv6Identities identities,
// below the memory store's and the fallback's 100,000 keys; new IPv4 and
// IPv6 clients are still admitted with budgets of their own (an IPv6 one
// of another /32 with its own /64: one /32 takes at most an eighth of the
// client prefixes' grants), and a victim
// in the attacker's /32, seen before the flood, keeps its window (one of
// its two admissions left, then denied). The whole /32 is minted on the
// fallback too.
func TestMintedIPv6NetworksBound(t *testing.T) {
	if httplimit.MaxIPv6Identities >= memstore.DefaultMaxKeys {
		t.Fatalf("MaxIPv6Identities %d, want below memstore.DefaultMaxKeys %d", httplimit.MaxIPv6Identities, memstore.DefaultMaxKeys)
	}
	const victim = "[2001:db8:ffff:ffff::1]:443"
	floods := []struct {
		name     string
		fallback bool // also on the limiter's fallback
		mint     func(check func(addr string))
	}{
		{"whole /32", true, func(check func(string)) {
			for i := range 1 << 16 {
				check(fmt.Sprintf("[2001:db8:%x:1::1]:443", i))
				check(fmt.Sprintf("[2001:db8:%x:2::1]:443", i))
			}
		}},
		{"16,385 /48s in rotation", false, func(check func(string)) {
			for round := range 3 {
				for i := range 16385 {
					check(fmt.Sprintf("[2001:db8:%x:%x::1]:443", i, 2*round+1))
					check(fmt.Sprintf("[2001:db8:%x:%x::1]:443", i, 2*round+2))
				}
			}
		}},
	}
	for _, flood := range floods {
		for _, st := range keyStoreInners {
			if st.name == "fallback" && !flood.fallback {
				continue // the fallback's table is the memory store's; one flood on it is enough
			}
			t.Run(flood.name+"/"+st.name, func(t *testing.T) {
				store, e := newKeyStoreEngine(t, st.inner(t), 2)
				if d := e.Check(newSource(victim)); d.Outcome != httplimit.OutcomeNext {
					t.Fatalf("victim before the flood: got %v, want admitted", d.Outcome)
				}
				flood.mint(func(addr string) {
					if d := e.Check(newSource(addr)); d.Outcome == httplimit.OutcomeError {
						t.Fatalf("minted %s: %v", addr, d.Err)
					}
				})
				if n := store.count(); n > httplimit.MaxIPv6Identities {
					t.Errorf("identities after the flood: got %d, want at most %d", n, httplimit.MaxIPv6Identities)
				}
				for _, newcomer := range []string{"192.0.2.1:443", "198.51.100.7:443", "[2001:db9:1:1::1]:443", "[2a00:1450:4001::1]:443"} {
					for i, want := range []httplimit.Outcome{httplimit.OutcomeNext, httplimit.OutcomeNext, httplimit.OutcomeDenied} {
						if d := e.Check(newSource(newcomer)); d.Outcome != want {
							t.Errorf("new client %s, request %d: got %v (%v), want %v", newcomer, i+1, d.Outcome, d.Err, want)
						}
					}
				}
				// One /32 holds at most an eighth of the client-prefix grants:
				// a newcomer of another /32 keeps its own /64.
				store.mu.Lock()
				_, own := store.keys["ip:2001:db9:1:1::/64"]
				store.mu.Unlock()
				if st.name == "memory store" && !own {
					t.Error("new client [2001:db9:1:1::1] of another /32: not keyed by its own /64")
				}
				for i, want := range []httplimit.Outcome{httplimit.OutcomeNext, httplimit.OutcomeDenied} {
					if d := e.Check(newSource(victim)); d.Outcome != want {
						t.Errorf("victim after the flood, request %d: got %v, want %v (its own window, one admission left)", i+1, d.Outcome, want)
					}
				}
			})
		}
	}
}

// keyRecorder returns options that record the identities ByClientIP
// gives, and the identity of the last request.
func keyRecorder(got map[string]int, last *string) httplimit.Option {
	return httplimit.WithKeyFunc(func(r *httplimit.Request) (string, error) {
		k, err := httplimit.ByClientIP()(r)
		got[k]++
		*last = k
		return k, err
	})
}

// TestIPv6ActiveClientKeepsIdentity: a /64 seen before its /48 filled up
// keeps its own identity for as long as it stays active (every 30 minutes
// for four hours here), while its neighbours keep minting /64s; once it
// has been idle past the hour, its identity goes to a newcomer.
func TestIPv6ActiveClientKeepsIdentity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New()
		defer store.Close()
		l, err := slidelog.New(store, slidelog.PerMinute(1000), slidelog.WithDenyCache(0))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		got, last := map[string]int{}, ""
		e, err := httplimit.New(l, keyRecorder(got, &last))
		if err != nil {
			t.Fatal(err)
		}
		const own = "ip:2001:db8:1:ffff::/64"
		e.Check(newSource("[2001:db8:1:ffff::1]:1"))
		minted := 0
		mint := func(n int) {
			for range n {
				minted++
				e.Check(newSource(fmt.Sprintf("[2001:db8:1:%x::1]:1", minted)))
			}
		}
		mint(100)
		for step := range 8 {
			time.Sleep(30 * time.Minute)
			mint(100)
			if e.Check(newSource("[2001:db8:1:ffff::2]:1")); last != own {
				t.Fatalf("victim after %v: got identity %s, want %s", time.Duration(step+1)*30*time.Minute, last, own)
			}
		}
		if got["ip:2001:db8:1::/48"] == 0 {
			t.Fatal("the /48 never filled: the test tests nothing")
		}
		// Idle past the hour, the victim's grant ends; every minted /64 is
		// idle too, so the next newcomers get grants of their own.
		time.Sleep(61 * time.Minute)
		if e.Check(newSource("[2001:db8:1:eeee::1]:1")); last != "ip:2001:db8:1:eeee::/64" {
			t.Errorf("newcomer after every grant went idle: got %s, want its own /64", last)
		}
	})
}

// TestIPv6CraftedPrefixes: 4,000 addresses of one /48, crafted so that
// the aggregation's former unkeyed hash (hi ^ lo*C) gave all of them one
// value, with ClientIP.IPv6Prefix 128: they get at most 64 identities of
// their own and the /48's, as any 4,000 addresses would.
func TestIPv6CraftedPrefixes(t *testing.T) {
	l, err := slidelog.New(memstore.New(), slidelog.PerMinute(1000), slidelog.WithDenyCache(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	got, last := map[string]int{}, ""
	e, err := httplimit.New(l, httplimit.WithClientIP(httplimit.ClientIP{IPv6Prefix: 128}), keyRecorder(got, &last))
	if err != nil {
		t.Fatal(err)
	}
	const c = 0x9e3779b97f4a7c15
	inv := uint64(c) // c's inverse modulo 2^64, by Newton's iteration
	for range 6 {
		inv *= 2 - c*inv
	}
	for i := range 4000 {
		var b [16]byte
		hi := uint64(0x20010db800010000) | uint64(i)
		binary.BigEndian.PutUint64(b[:8], hi)
		binary.BigEndian.PutUint64(b[8:], (hi^0x1234)*inv) // hi ^ lo*c == 0x1234
		e.Check(newSource(netip.AddrPortFrom(netip.AddrFrom16(b), 1).String()))
	}
	if want := httplimit.DefaultIPv6PrefixesPerNetwork + 1; len(got) > want {
		t.Errorf("identities of 4,000 crafted /128s: got %d, want at most %d", len(got), want)
	}
}
