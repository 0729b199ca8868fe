package slidelogtest

import (
	"testing"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
)

// peeker returns the store as a Peeker, and skips the test of a store
// that is not one.
func (e *storeEnv) peeker(t *testing.T) slidelog.Peeker {
	t.Helper()
	return storeAs[slidelog.Peeker](t, e.store, "Peeker")
}

// peek calls the store's Peek and fails the test unless each policy's
// state is the one in states and the Result is well formed.
func (e *storeEnv) peek(t *testing.T, req slidelog.Request, states ...slidelog.PolicyResult) {
	t.Helper()
	res, err := e.peeker(t).Peek(t.Context(), req)
	if err != nil {
		t.Fatalf("Peek(%q, cost %d): %v", req.Key, req.Cost, err)
	}
	got := res.States()
	for i := range states {
		states[i].Policy = req.Policies[i]
		if i >= len(got) || got[i] != states[i] {
			t.Fatalf("Peek(%q, cost %d) = %+v; want %+v", req.Key, req.Cost, got, states)
		}
	}
	e.checkResult(t, "Peek", req.Policies, res)
}

// peekCases check Peek (slidelog.Peeker) where the store has it.
var peekCases = []struct {
	name string
	run  func(t *testing.T, e *storeEnv)
}{
	{"IsTakeRecordingNothing", func(t *testing.T, e *storeEnv) {
		// Per policy: what is free before the request, whether its cost
		// fits, and when it would; on an exact and a bucketed policy.
		short := slidelog.Policy{Name: "short", Limit: 3, Window: time.Second}
		long := slidelog.Policy{Name: "long", Limit: 5, Window: 10 * time.Second, Precision: time.Second}
		ps := []slidelog.Policy{short, long}
		req := func(cost int) slidelog.Request {
			return slidelog.Request{Key: "k", Cost: cost, Policies: ps}
		}
		type st = slidelog.PolicyResult
		e.peek(t, req(1), st{Allowed: true, Remaining: 3}, st{Allowed: true, Remaining: 5})
		e.take(t, slidelog.Request{Key: "k", Cost: 2, Policies: ps, ID: 1}, want{allowed: true, remaining: 1, resetAfter: time.Second})
		for range 2 {
			e.peek(t, req(1), st{Allowed: true, Remaining: 1, ResetAfter: time.Second}, st{Allowed: true, Remaining: 3, ResetAfter: 11 * time.Second})
			e.peek(t, req(2), st{Remaining: 1, RetryAfter: time.Second, ResetAfter: time.Second}, st{Allowed: true, Remaining: 3, ResetAfter: 11 * time.Second})
		}
		// Nothing was recorded: one unit is still free.
		e.take(t, slidelog.Request{Key: "k", Cost: 1, Policies: ps, ID: 2}, want{allowed: true, remaining: 0, resetAfter: time.Second})
		e.clock.Advance(time.Second)
		// short is empty; long holds 3 in the bucket of 0 s, until 11 s.
		e.peek(t, req(3), st{Allowed: true, Remaining: 3}, st{Remaining: 2, RetryAfter: 10 * time.Second, ResetAfter: 10 * time.Second})
		e.take(t, slidelog.Request{Key: "k", Cost: 2, Policies: ps, ID: 3}, want{allowed: true, remaining: 0, resetAfter: 11 * time.Second})
		e.peek(t, req(1), st{Allowed: true, Remaining: 1, ResetAfter: time.Second}, st{Remaining: 0, RetryAfter: 10 * time.Second, ResetAfter: 11 * time.Second})
	}},
}
