package memstore_test

import (
	"testing"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/slidelogtest"
)

// A decision on a key the store tracks, with one policy, allocates
// nothing, admitted or denied, exact or bucketed; so does a limiter's
// AllowN on it. (Allocation counts are deterministic; timings are in the
// bench module.)
func TestTakeAllocatesNothing(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy slidelog.Policy
	}{
		{"exact", slidelog.Policy{Name: "p", Limit: 100, Window: time.Second}},
		{"bucketed", slidelog.Policy{Name: "p", Limit: 100, Window: time.Second, Precision: 10 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := slidelogtest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
			store := memstore.New(memstore.WithClock(clock.Now))
			t.Cleanup(func() { _ = store.Close() })
			var err error
			req := slidelog.Request{Namespace: "n", Key: "k", Cost: 1, Policies: []slidelog.Policy{tc.policy}, ID: 1}
			take := func(wantAllowed bool) {
				req.ID++
				res, err := store.Take(t.Context(), req)
				if err != nil || res.Allowed != wantAllowed {
					t.Fatalf("Take = %+v, %v; want allowed %v", res, err, wantAllowed)
				}
				if res.Policies != nil {
					t.Fatalf("Take of one policy: Policies = %v, want nil", res.Policies)
				}
			}
			// Warm up: the key's log and its ring reach their size while
			// admissions come at half the rate the limit allows.
			for range 300 {
				clock.Advance(20 * time.Millisecond)
				take(true)
			}
			if n := testing.AllocsPerRun(100, func() {
				clock.Advance(20 * time.Millisecond)
				take(true)
			}); n != 0 {
				t.Errorf("admitted Take: %v allocations, want 0", n)
			}
			// Fill the window at one instant.
			for res := (slidelog.Result{Allowed: true}); res.Allowed; {
				req.ID++
				if res, err = store.Take(t.Context(), req); err != nil {
					t.Fatal(err)
				}
			}
			if n := testing.AllocsPerRun(100, func() { take(false) }); n != 0 {
				t.Errorf("denied Take: %v allocations, want 0", n)
			}

			l, err := slidelog.New(store, tc.policy, slidelog.WithName("alloc"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Close() })
			clock.Advance(2 * time.Second)
			for range 300 {
				clock.Advance(20 * time.Millisecond)
				if res, err := l.Allow(t.Context(), "k"); err != nil || !res.Allowed {
					t.Fatalf("Allow = %+v, %v", res, err)
				}
			}
			if n := testing.AllocsPerRun(100, func() {
				clock.Advance(20 * time.Millisecond)
				if res, _ := l.Allow(t.Context(), "k"); !res.Allowed {
					t.Fatal("denied")
				}
			}); n != 0 {
				t.Errorf("admitted Allow: %v allocations, want 0", n)
			}
			for res := (slidelog.Result{Allowed: true}); res.Allowed; {
				if res, err = l.Allow(t.Context(), "k"); err != nil {
					t.Fatal(err)
				}
			}
			if n := testing.AllocsPerRun(100, func() {
				if res, _ := l.Allow(t.Context(), "k"); res.Allowed {
					t.Fatal("admitted")
				}
			}); n != 0 {
				t.Errorf("denied Allow: %v allocations, want 0", n)
			}
		})
	}
}

// The conformance suite runs its bucketed cases on a Store.
