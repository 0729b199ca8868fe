package slidelogtest

import (
	"testing"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
)

// take calls the store's Take with req and fails the test unless the
// Result is w and well formed (checkResult).
func (e *storeEnv) take(t *testing.T, req slidelog.Request, w want) slidelog.Result {
	t.Helper()
	res, err := e.store.Take(t.Context(), req)
	if err != nil {
		t.Fatalf("Take(%q %q, ID %d, cost %d): unexpected error %v", req.Namespace, req.Key, req.ID, req.Cost, err)
	}
	if res.Allowed != w.allowed || res.Remaining != w.remaining || res.RetryAfter != w.retryAfter || res.ResetAfter != w.resetAfter {
		t.Fatalf("Take(%q %q, ID %d, cost %d) = allowed %v remaining %d retryAfter %v resetAfter %v; want allowed %v remaining %d retryAfter %v resetAfter %v",
			req.Namespace, req.Key, req.ID, req.Cost, res.Allowed, res.Remaining, res.RetryAfter, res.ResetAfter, w.allowed, w.remaining, w.retryAfter, w.resetAfter)
	}
	e.checkResult(t, "Take", req.Policies, res)
	return res
}

// testBindingPolicyFreesLast: with two policies violated, the top-level
// fields are those of the one that frees up last, not of the first.
func testBindingPolicyFreesLast(t *testing.T, e *storeEnv) {
	short := slidelog.Policy{Name: "short", Limit: 2, Window: time.Second}
	long := slidelog.Policy{Name: "long", Limit: 3, Window: time.Minute}
	l := e.limiter(t, short, slidelog.WithPolicy(long))
	e.check(t, l, "k", 1, want{allowed: true, remaining: 1, resetAfter: time.Second})
	e.clock.Advance(10 * time.Second)
	e.check(t, l, "k", 2, want{allowed: true, remaining: 0, resetAfter: time.Second})
	e.clock.Advance(100 * time.Millisecond)
	// short frees a unit in 900 ms, long in 49.9 s (the entry of 0 s).
	res := e.check(t, l, "k", 1, want{remaining: 0, retryAfter: 49900 * time.Millisecond, resetAfter: 59900 * time.Millisecond})
	if got := res.Violated(); len(got) != 2 || got[0] != "short" || got[1] != "long" {
		t.Fatalf("Violated() = %v, want [short long]", got)
	}
	if got := res.Policies[0]; got.RetryAfter != 900*time.Millisecond {
		t.Fatalf("short policy = %+v, want RetryAfter 900ms", got)
	}
}

// testDenialHoldsForStableFor: a denial's StableFor is no longer than
// until the first entry leaves any policy's window (zero when the store
// does not say), and until then the store answers the same denial but
// for the elapsed time.
func testDenialHoldsForStableFor(t *testing.T, e *storeEnv) {
	p := slidelog.Policy{Name: "p", Limit: 3, Window: time.Second}
	ps := []slidelog.Policy{p}
	for i := range 3 {
		e.take(t, slidelog.Request{Key: "k", Cost: 1, Policies: ps, ID: uint64(i + 1)},
			want{allowed: true, remaining: 2 - i, resetAfter: time.Second})
		e.clock.Advance(100 * time.Millisecond)
	}
	// At 300 ms, cost 2 needs the entries of 0 and 100 ms gone (1.1 s),
	// but the one of 0 ms leaves at 1 s and frees a unit.
	deny := slidelog.Request{Key: "k", Cost: 2, Policies: ps, ID: 4}
	res := e.take(t, deny, want{remaining: 0, retryAfter: 800 * time.Millisecond, resetAfter: 900 * time.Millisecond})
	if res.StableFor > 700*time.Millisecond {
		t.Fatalf("StableFor = %v, want at most 700ms (the entry of 0 ms leaves at 1 s)", res.StableFor)
	}
	if d := res.StableFor - time.Microsecond; d > 0 {
		e.clock.Advance(d)
		e.take(t, deny, want{remaining: 0, retryAfter: 800*time.Millisecond - d, resetAfter: 900*time.Millisecond - d})
	}

	// Two policies: the one that denies frees up in 900 ms, the other's
	// count changes in 400 ms.
	short := slidelog.Policy{Name: "short", Limit: 2, Window: time.Second}
	long := slidelog.Policy{Name: "long", Limit: 10, Window: 10 * time.Second}
	two := []slidelog.Policy{short, long}
	e.take(t, slidelog.Request{Key: "j", Cost: 1, Policies: two, ID: 1}, want{allowed: true, remaining: 1, resetAfter: time.Second})
	e.clock.Advance(9500 * time.Millisecond)
	e.take(t, slidelog.Request{Key: "j", Cost: 2, Policies: two, ID: 2}, want{allowed: true, remaining: 0, resetAfter: time.Second})
	e.clock.Advance(100 * time.Millisecond)
	res = e.take(t, slidelog.Request{Key: "j", Cost: 1, Policies: two, ID: 3}, want{remaining: 0, retryAfter: 900 * time.Millisecond, resetAfter: 900 * time.Millisecond})
	if res.StableFor > 400*time.Millisecond {
		t.Fatalf("StableFor = %v, want at most 400ms (the entry of 0 s leaves the long window at 10 s)", res.StableFor)
	}
}
