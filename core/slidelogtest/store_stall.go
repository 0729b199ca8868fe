package slidelogtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
)

// StallFunc makes the backend of the stores a NewStoreFunc builds stop
// answering (a Redis server sent SIGSTOP, a link that drops every packet)
// until resume is called: calls then wait on it, as on a server that
// hangs. The suite calls it inside a test, on a store newStore built for
// that test, and resumes the backend before the test ends.
type StallFunc func(t *testing.T) (resume func())

// StoreSuiteOption changes what RunStoreSuite checks.
type StoreSuiteOption func(*storeSuite)

type storeSuite struct {
	stall StallFunc
}

// WithStall hands RunStoreSuite a way to stall the store's backend, and
// adds the cases Stalled/ContextEndsTake, Stalled/ContextEndsRefund and
// Stalled/ContextEndsReset, and Stalled/ContextEndsPeek and
// Stalled/ContextEndsRecord, which skip a store that is not a
// slidelog.Peeker or a slidelog.Recorder. With the backend stalled, a call whose
// context is cancelled 40 ms in, and one whose deadline is 40 ms away,
// must each return within a second of the context's end (room for a busy
// machine: a store that honours the context returns at once) with an
// error wrapping the context's error or slidelog.ErrUnavailable (the
// store may end the call itself first, as redisstore does after its stall
// timeout). Once the backend is resumed, the store must decide correctly
// again within 10 s: a new key admitted up to its limit, a refund and a
// reset of it taking effect; then a Peek reporting what the stalled
// Peeks left uncounted, and a Record counted by the next Take. A store that ignores a context ending while
// it waits hangs Limiter.Allow on a stalled backend, and only these cases
// find it.
func WithStall(stall StallFunc) StoreSuiteOption {
	return func(s *storeSuite) { s.stall = stall }
}

const (
	// stallContextAfter is how long a call of the Stalled cases waits on
	// the stalled backend before its context ends: shorter than a
	// store's own stall timeout (redisstore.DefaultStallTimeout), so that
	// the cases check the store's care of the context.
	stallContextAfter = 40 * time.Millisecond
	// stallReturnBound is how soon after its context ends a call on a
	// stalled backend must have returned: a store that honours the
	// context returns at once, and the rest is room for a busy machine.
	stallReturnBound = time.Second
	// stallRecovery is how long the store may take to decide again once
	// the backend is resumed.
	stallRecovery = 10 * time.Second
)

// stalledCases check that a call on a stalled backend ends with its
// context, for each method that may wait on the backend. A case whose
// has is set runs only on a store that has its method (storeAs skips
// the others); one whose after is set checks, once the backend is
// resumed and the store decides again, that the method works again.
var stalledCases = []struct {
	method string
	has    func(t *testing.T, e *storeEnv)
	call   func(ctx context.Context, e *storeEnv, req slidelog.Request) error
	after  func(t *testing.T, e *storeEnv, stalled, after slidelog.Request)
}{
	{method: "Take", call: func(ctx context.Context, e *storeEnv, req slidelog.Request) error {
		_, err := e.store.Take(ctx, req)
		return err
	}},
	{method: "Refund", call: func(ctx context.Context, e *storeEnv, req slidelog.Request) error {
		return e.store.Refund(ctx, req)
	}},
	{method: "Reset", call: func(ctx context.Context, e *storeEnv, req slidelog.Request) error {
		return e.store.Reset(ctx, req)
	}},
	{
		method: "Peek",
		has:    func(t *testing.T, e *storeEnv) { e.peeker(t) },
		call: func(ctx context.Context, e *storeEnv, req slidelog.Request) error {
			_, err := e.store.(slidelog.Peeker).Peek(ctx, req)
			return err
		},
		after: func(t *testing.T, e *storeEnv, stalled, after slidelog.Request) {
			// The stalled Peeks counted nothing, and after holds one
			// entry of its limit of 2.
			type st = slidelog.PolicyResult
			e.peek(t, stalled, st{Allowed: true, Remaining: 2})
			e.peek(t, after, st{Allowed: true, Remaining: 1, ResetAfter: time.Minute})
		},
	},
	{
		method: "Record",
		has:    func(t *testing.T, e *storeEnv) { e.recorder(t) },
		call: func(ctx context.Context, e *storeEnv, req slidelog.Request) error {
			return e.store.(slidelog.Recorder).Record(ctx, req, e.clock.Now())
		},
		after: func(t *testing.T, e *storeEnv, _, after slidelog.Request) {
			// after holds one entry of its limit of 2: a Record of a new
			// ID fills it, and the next Take is denied.
			after.ID = 100
			if err := e.recorder(t).Record(t.Context(), after, e.clock.Now()); err != nil {
				t.Fatalf("Record(%q, ID %d) after the backend was resumed: %v", after.Key, after.ID, err)
			}
			after.ID = 101
			e.take(t, after, want{remaining: 0, retryAfter: time.Minute, resetAfter: time.Minute})
		},
	},
}

// testContextEndsOnStall stalls the backend and makes two calls of call
// on it, one cancelled and one with a deadline, each of which must end
// with its context; then resumes the backend and checks that the store
// decides again: a fresh key admits up to its limit, and a refund and a
// reset of it take effect; and then check, if not nil, on the key of
// the stalled calls and that fresh key, holding one entry of 2.
func testContextEndsOnStall(t *testing.T, e *storeEnv, stall StallFunc, name string, call func(context.Context, *storeEnv, slidelog.Request) error, check func(t *testing.T, e *storeEnv, stalled, after slidelog.Request)) {
	if e.info().Local {
		t.Fatalf("%T describes itself as local (slidelog.StoreInfo.Local: it cannot fail, stall or be slow), yet the suite was given WithStall to stall it", e.store)
	}
	p := slidelog.Policy{Name: "p", Limit: 2, Window: time.Minute}
	ps := []slidelog.Policy{p}
	// The store answers before the stall.
	before := slidelog.Request{Key: "before", Cost: 1, Policies: ps, ID: 1}
	e.take(t, before, want{allowed: true, remaining: 1, resetAfter: time.Minute})

	// Calls left waiting on the backend are waited for once it is
	// resumed (cleanups run last first), so none outlives the test.
	var calls sync.WaitGroup
	t.Cleanup(func() {
		done := make(chan struct{})
		go func() { calls.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(stallRecovery):
			t.Errorf("%s calls made on the stalled backend had not returned %v after it was resumed", name, stallRecovery)
		}
	})
	var once sync.Once
	resumeFunc := stall(t)
	if resumeFunc == nil {
		t.Fatalf("the StallFunc given to WithStall returned a nil resume")
	}
	resume := func() { once.Do(resumeFunc) }
	t.Cleanup(resume)

	stalled := slidelog.Request{Key: "stalled", Cost: 1, Policies: ps, ID: 2}
	for _, how := range []string{"cancelled", "deadline"} {
		checkEndsWithContext(t, name, how, &calls, func(ctx context.Context) error { return call(ctx, e, stalled) })
	}

	resume()
	// The store decides again, on a key the stalled calls did not touch;
	// a remote store counts the retries of one request once.
	after := slidelog.Request{Key: "after", Cost: 1, Policies: ps, ID: 3}
	deadline := time.Now().Add(stallRecovery)
	var res slidelog.Result
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		var err error
		res, err = e.store.Take(ctx, after)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Take %v after the backend was resumed: %v; want the store to decide again", stallRecovery, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.wantTaken(t, after, res, want{allowed: true, remaining: 1, resetAfter: time.Minute})
	e.refund(t, after)
	after.ID = 4
	e.take(t, after, want{allowed: true, remaining: 1, resetAfter: time.Minute})
	after.ID = 5
	e.take(t, after, want{allowed: true, remaining: 0, resetAfter: time.Minute})
	if err := e.store.Reset(t.Context(), after); err != nil {
		t.Fatalf("Reset after the backend was resumed: %v", err)
	}
	after.ID = 6
	e.take(t, after, want{allowed: true, remaining: 1, resetAfter: time.Minute})
	if check != nil {
		check(t, e, stalled, after)
	}
}

// checkEndsWithContext runs call on a context that ends stallContextAfter
// in (cancelled, or by its deadline) and fails the test unless it
// returns within stallReturnBound of the context's end with an error that
// wraps the context's error or slidelog.ErrUnavailable. The call runs on
// a goroutine of calls, so that a call that never returns fails the test
// instead of hanging it.
func checkEndsWithContext(t *testing.T, name, how string, calls *sync.WaitGroup, call func(context.Context) error) {
	t.Helper()
	start := time.Now()
	var ctx context.Context
	var cancel context.CancelFunc
	ends := make(chan time.Time, 1) // when the context ended
	if how == "deadline" {
		ctx, cancel = context.WithTimeout(context.Background(), stallContextAfter)
		deadline, _ := ctx.Deadline()
		ends <- deadline
	} else {
		ctx, cancel = context.WithCancel(context.Background())
		stop := time.AfterFunc(stallContextAfter, func() {
			ends <- time.Now()
			cancel()
		})
		defer stop.Stop()
	}
	defer cancel()
	type reply struct {
		err error
		at  time.Time
	}
	got := make(chan reply, 1)
	calls.Go(func() {
		err := call(ctx)
		got <- reply{err, time.Now()}
	})
	what := fmt.Sprintf("%s on a stalled backend, context %s %v in", name, how, stallContextAfter)
	giveUp := time.NewTimer(stallContextAfter + stallReturnBound)
	defer giveUp.Stop()
	var r reply
	select {
	case r = <-got:
	case <-giveUp.C:
		// The context ended stallContextAfter in, or later if this
		// process was slow to cancel it: wait for the bound after that.
		ended := <-ends
		ends <- ended
		select {
		case r = <-got:
		case <-time.After(time.Until(ended.Add(stallReturnBound))):
			t.Fatalf("%s: still waiting %v after the context ended; a call must return soon after its context ends, with an error (slidelog.Store)", what, stallReturnBound)
		}
	}
	var late time.Duration // after the context's end; negative if before
	select {
	case ended := <-ends:
		late = r.at.Sub(ended)
	default: // returned before the context was cancelled
		late = r.at.Sub(start.Add(stallContextAfter))
	}
	if late < 0 { // the store ended the call itself
		t.Logf("%s: returned %v before the context's end: %v", what, (-late).Round(time.Microsecond), r.err)
	} else {
		t.Logf("%s: returned %v after the context's end: %v", what, late.Round(time.Microsecond), r.err)
	}
	switch {
	case r.err == nil:
		t.Fatalf("%s: no error after %v; want an error (an error means no decision). Does the StallFunc stop the backend?", what, r.at.Sub(start).Round(time.Microsecond))
	case late > stallReturnBound:
		t.Fatalf("%s: returned %v after the context's end, want within %v", what, late, stallReturnBound)
	case !errors.Is(r.err, context.Canceled) && !errors.Is(r.err, context.DeadlineExceeded) && !errors.Is(r.err, slidelog.ErrUnavailable):
		t.Fatalf("%s: error %v, want one wrapping the context's error (or slidelog.ErrUnavailable, when the store ended the call itself)", what, r.err)
	}
}
