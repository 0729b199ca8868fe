package slidelogtest

import (
	"context"
	"errors"
	"testing"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
)

// The store suite's checks that are functions of their own: those that
// take a policy run on an exact one among storeCases and on a bucketed
// one among bucketedCases.

// take calls the store's Take with req and fails the test unless the
// Result is w and well formed (checkResult).
func (e *storeEnv) take(t *testing.T, req slidelog.Request, w want) slidelog.Result {
	t.Helper()
	res, err := e.store.Take(t.Context(), req)
	if err != nil {
		t.Fatalf("Take(%q %q, ID %d, cost %d): unexpected error %v", req.Namespace, req.Key, req.ID, req.Cost, err)
	}
	e.wantTaken(t, req, res, w)
	return res
}

// wantTaken fails the test unless res, the Result of a Take of req, is w
// and well formed (checkResult).
func (e *storeEnv) wantTaken(t *testing.T, req slidelog.Request, res slidelog.Result, w want) {
	t.Helper()
	if res.Allowed != w.allowed || res.Remaining != w.remaining || res.RetryAfter != w.retryAfter || res.ResetAfter != w.resetAfter {
		t.Fatalf("Take(%q %q, ID %d, cost %d) = allowed %v remaining %d retryAfter %v resetAfter %v; want allowed %v remaining %d retryAfter %v resetAfter %v",
			req.Namespace, req.Key, req.ID, req.Cost, res.Allowed, res.Remaining, res.RetryAfter, res.ResetAfter, w.allowed, w.remaining, w.retryAfter, w.resetAfter)
	}
	e.checkResult(t, "Take", req.Policies, res)
}

// refund calls the store's Refund and fails the test on an error.
func (e *storeEnv) refund(t *testing.T, req slidelog.Request) {
	t.Helper()
	if err := e.store.Refund(t.Context(), req); err != nil {
		t.Fatalf("Refund(%q %q, ID %d): %v", req.Namespace, req.Key, req.ID, err)
	}
}

// testRefundFindsOnlyItsEntry: a refund takes out the entry of its ID in
// its own key's log, once, while it still counts. A second refund, one
// of an entry that has left the window, one of an entry a Reset removed,
// and one of an ID never recorded change nothing, and the same ID in
// another key or namespace is another entry.
func testRefundFindsOnlyItsEntry(t *testing.T, e *storeEnv, p slidelog.Policy) {
	ps := []slidelog.Policy{p}
	span := p.Window + p.Precision // how long an entry made now counts
	req := func(ns, key string, id uint64, cost int) slidelog.Request {
		return slidelog.Request{Namespace: ns, Key: key, Cost: cost, Policies: ps, ID: id}
	}
	full := want{remaining: 0, retryAfter: span, resetAfter: span}
	e.take(t, req("", "j", 1, 4), want{allowed: true, remaining: 0, resetAfter: span})
	e.take(t, req("other", "k", 2, 4), want{allowed: true, remaining: 0, resetAfter: span})
	e.take(t, req("", "k", 1, 2), want{allowed: true, remaining: 2, resetAfter: span})
	e.take(t, req("", "k", 2, 1), want{allowed: true, remaining: 1, resetAfter: span})
	for range 2 { // the second refund of ID 2 finds nothing
		e.refund(t, req("", "k", 2, 1))
	}
	e.take(t, req("", "k", 3, 2), want{allowed: true, remaining: 0, resetAfter: span})
	e.take(t, req("", "k", 4, 1), full)
	e.take(t, req("", "j", 11, 1), full)
	e.take(t, req("other", "k", 11, 1), full)

	e.clock.Advance(span) // everything so far has left the window
	e.take(t, req("", "k", 5, 4), want{allowed: true, remaining: 0, resetAfter: span})
	e.refund(t, req("", "k", 1, 2)) // left the window: nothing to give back
	e.take(t, req("", "k", 6, 1), full)

	if err := e.store.Reset(t.Context(), req("", "k", 0, 1)); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	e.take(t, req("", "k", 7, 4), want{allowed: true, remaining: 0, resetAfter: span})
	e.refund(t, req("", "k", 5, 4))  // removed by the Reset
	e.refund(t, req("", "k", 99, 4)) // never recorded
	e.take(t, req("", "k", 8, 1), full)
	e.refund(t, req("", "k", 7, 1))
	e.take(t, req("", "k", 9, 4), want{allowed: true, remaining: 0, resetAfter: span})
}

// testResetForgetsOnlyItsKey: Reset removes everything the key's log
// holds, in every model, and nothing of another key or namespace.
func testResetForgetsOnlyItsKey(t *testing.T, e *storeEnv, p slidelog.Policy) {
	ps := []slidelog.Policy{p}
	span := p.Window + p.Precision
	req := func(ns, key string, id uint64, cost int) slidelog.Request {
		return slidelog.Request{Namespace: ns, Key: key, Cost: cost, Policies: ps, ID: id}
	}
	for _, r := range []slidelog.Request{req("", "k", 1, 3), req("", "j", 2, 4), req("other", "k", 3, 4)} {
		e.take(t, r, want{allowed: true, remaining: 4 - r.Cost, resetAfter: span})
	}
	e.clock.Advance(p.Window / 2)
	for _, r := range []slidelog.Request{req("", "k", 0, 1), req("", "never", 0, 1)} {
		if err := e.store.Reset(t.Context(), r); err != nil {
			t.Fatalf("Reset(%q): %v", r.Key, err)
		}
	}
	e.take(t, req("", "k", 4, 4), want{allowed: true, remaining: 0, resetAfter: span})
	rest := span - p.Window/2
	e.take(t, req("", "j", 5, 1), want{remaining: 0, retryAfter: rest, resetAfter: rest})
	e.take(t, req("other", "k", 6, 1), want{remaining: 0, retryAfter: rest, resetAfter: rest})
}

// testCancelledContext: a call whose context is already done fails with
// the context's error and records nothing.
func testCancelledContext(t *testing.T, e *storeEnv) {
	p := slidelog.Policy{Name: "p", Limit: 2, Window: time.Second}
	req := slidelog.Request{Key: "k", Cost: 2, Policies: []slidelog.Policy{p}, ID: 1}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if res, err := e.store.Take(ctx, req); !errors.Is(err, context.Canceled) {
		t.Fatalf("Take(cancelled context) = %+v, %v; want an error wrapping context.Canceled", res, err)
	}
	req.ID = 2
	e.take(t, req, want{allowed: true, remaining: 0, resetAfter: time.Second})
	for name, call := range map[string]func(context.Context, slidelog.Request) error{
		"Refund": e.store.Refund,
		"Reset":  e.store.Reset,
	} {
		if err := call(ctx, req); !errors.Is(err, context.Canceled) {
			t.Fatalf("%s(cancelled context) = %v; want an error wrapping context.Canceled", name, err)
		}
	}
	req.ID = 3
	req.Cost = 1
	e.take(t, req, want{remaining: 0, retryAfter: time.Second, resetAfter: time.Second})
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

// testNamesAndKeysDoNotCollide: a store tells every (namespace, key)
// pair from every other, whatever bytes they share.
func testNamesAndKeysDoNotCollide(t *testing.T, e *storeEnv) {
	p := slidelog.Policy{Name: "p", Limit: 1, Window: time.Minute}
	for _, pair := range [][2][2]string{
		{{"x", "y:z"}, {"x:y", "z"}},
		{{"ab", "c"}, {"a", "bc"}},
		{{"m", "n o"}, {"m n", "o"}},
		{{"s", "t\x00u"}, {"s\x00t", "u"}},
		{{"d", "e/f"}, {"d/e", "f"}},
		{{"g", "{h}i"}, {"g{h}", "i"}},
	} {
		for _, nk := range pair {
			l := e.limiter(t, p, slidelog.WithName(nk[0]))
			e.check(t, l, nk[1], 1, want{allowed: true, remaining: 0, resetAfter: time.Minute})
			_ = l.Close()
		}
	}
}

// testRecordIntoItsBucket: an admission recorded at a time counts in
// the bucket of that time, not of now.
func testRecordIntoItsBucket(t *testing.T, e *storeEnv) {
	rec := e.recorder(t)
	p := slidelog.Policy{Name: "p", Limit: 4, Window: time.Second, Precision: 100 * time.Millisecond}
	ps := []slidelog.Policy{p}
	// 150 ms ago: in the bucket ending 100 ms ago, which counts until
	// 900 ms from now.
	r := slidelog.Request{Key: "k", Cost: 3, Policies: ps, ID: 1}
	for range 2 {
		if err := rec.Record(t.Context(), r, e.clock.Now().Add(-150*time.Millisecond)); err != nil {
			t.Fatalf("Record: %v", err)
		}
	}
	e.take(t, slidelog.Request{Key: "k", Cost: 2, Policies: ps, ID: 2}, want{remaining: 1, retryAfter: 900 * time.Millisecond, resetAfter: 900 * time.Millisecond})
	e.clock.Advance(900 * time.Millisecond)
	e.take(t, slidelog.Request{Key: "k", Cost: 4, Policies: ps, ID: 3}, want{allowed: true, remaining: 0, resetAfter: 1100 * time.Millisecond})
}

// testBucketsAlignToTheEpoch runs on a store started 30 ms past a whole
// second: buckets start on multiples of their width since the Unix
// epoch, not at the store's start or a key's first admission.
func testBucketsAlignToTheEpoch(t *testing.T, e *storeEnv) {
	l := e.limiter(t, slidelog.Policy{Name: "p", Limit: 2, Window: time.Second, Precision: 100 * time.Millisecond})
	// The bucket of 30 ms ends at 100 ms and counts until 1.1 s.
	e.check(t, l, "k", 1, want{allowed: true, remaining: 1, resetAfter: 1070 * time.Millisecond})
	e.clock.Advance(80 * time.Millisecond) // 110 ms: the next bucket, ending at 200 ms
	e.check(t, l, "k", 1, want{allowed: true, remaining: 0, resetAfter: 1090 * time.Millisecond})
	e.check(t, l, "k", 1, want{remaining: 0, retryAfter: 990 * time.Millisecond, resetAfter: 1090 * time.Millisecond})
}

// testCloseIsFinal: Close may be called again, and the calls after it
// fail with ErrClosed.
func testCloseIsFinal(t *testing.T, e *storeEnv) {
	for range 2 {
		if err := e.store.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	req := slidelog.Request{Key: "k", Cost: 1, Policies: []slidelog.Policy{{Name: "p", Limit: 1, Window: time.Second}}, ID: 1}
	if res, err := e.store.Take(t.Context(), req); !errors.Is(err, slidelog.ErrClosed) {
		t.Fatalf("Take after Close = %+v, %v; want an error wrapping ErrClosed", res, err)
	}
	for name, call := range map[string]func(context.Context, slidelog.Request) error{
		"Refund": e.store.Refund,
		"Reset":  e.store.Reset,
	} {
		if err := call(t.Context(), req); !errors.Is(err, slidelog.ErrClosed) {
			t.Fatalf("%s after Close = %v; want an error wrapping ErrClosed", name, err)
		}
	}
	if p, ok := e.store.(slidelog.Peeker); ok {
		if res, err := p.Peek(t.Context(), req); !errors.Is(err, slidelog.ErrClosed) {
			t.Fatalf("Peek after Close = %+v, %v; want an error wrapping ErrClosed", res, err)
		}
	}
	if r, ok := e.store.(slidelog.Recorder); ok {
		if err := r.Record(t.Context(), req, e.clock.Now()); !errors.Is(err, slidelog.ErrClosed) {
			t.Fatalf("Record after Close = %v; want an error wrapping ErrClosed", err)
		}
	}
}
