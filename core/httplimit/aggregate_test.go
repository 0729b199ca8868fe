package httplimit_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/memstore"
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
	for _, tt := range []struct {
		name  string
		inner func(t *testing.T) slidelog.Store
	}{
		{"memory store", func(t *testing.T) slidelog.Store {
			m := memstore.New()
			t.Cleanup(func() { _ = m.Close() })
			return m
		}},
		{"fallback", func(*testing.T) slidelog.Store { return nil }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			store := &keyStore{inner: tt.inner(t), keys: map[string]struct{}{}}
			l, err := slidelog.New(store, slidelog.Policy{Name: "ip", Limit: 1, Window: time.Hour},
				slidelog.WithDenyCache(0), slidelog.WithFailureMode(slidelog.FailFallback))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Close() })
			e, err := httplimit.New(l)
			if err != nil {
				t.Fatal(err)
			}
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
			store.mu.Lock()
			n := len(store.keys)
			store.mu.Unlock()
			if n > want {
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
	for _, give := range [][]int{{-1, 1}, {128, 1}, {48, 0}, {64, 4}} {
		if _, err := httplimit.New(l, httplimit.WithIPv6Aggregation(give[0], give[1])); !errors.Is(err, slidelog.ErrInvalidOption) {
			t.Errorf("WithIPv6Aggregation(%d, %d): got %v, want ErrInvalidOption", give[0], give[1], err)
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
	if got := keys(httplimit.WithIPv6Aggregation(40, 3)); len(got) != 4 || !got["ip:2001:db8::/40"] {
		t.Errorf("aggregation /40 after 3: got %v, want 3 /64s and the /40", got)
	}
	if got := keys(httplimit.WithIPv6Aggregation(0, 0)); len(got) != 10 {
		t.Errorf("aggregation off: got %d identities, want 10", len(got))
	}
}
