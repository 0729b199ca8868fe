package slidelogtest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
)

// NewStoreFunc builds the store under test. Its decisions must take the
// time from clock (memstore.WithClock(clock), redisstore.WithClock(clock)),
// and it must be empty of the keys the suite uses. The suite closes it.
type NewStoreFunc func(t *testing.T, clock func() time.Time) slidelog.Store

// suiteStart is where every suite clock starts: a fixed instant, so
// expected durations are exact.
var suiteStart = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// RunStoreSuite runs the store conformance suite: every Store must pass it
// with the same results, the memory store, a standalone Redis and a Redis
// Cluster alike, bucketed policies (Policy.Precision) included.
//
// It asks of a store only the four methods of slidelog.Store, and tests
// an optional capability only where the store has it: Record where it is
// a slidelog.Recorder; Keep, Forget and WriteBack where it is a
// slidelog.Keeper; Peek where it is a slidelog.Peeker; a retried Take
// unless it describes itself as local (StoreInfo.Local), a store without
// a slidelog.Describer being remote; the deny cache where it tells its
// clock (slidelog.Describer), since a deny cache measures elapsed time by
// the store's clock and the suite moves its own. A decision of the store
// may carry any store Source (slidelog.Source.FromStore); every other
// field of its Result is checked.
//
// A store whose backend can stop answering (a server, a network between)
// should be run WithStall, to check that a call ends when its context
// does, however long the backend stays silent; without it the Stalled
// cases are not run. A store that describes itself as local cannot
// stall, and fails them.
func RunStoreSuite(t *testing.T, newStore NewStoreFunc, opts ...StoreSuiteOption) {
	var suite storeSuite
	for _, o := range opts {
		o(&suite)
	}
	run := func(name string, start time.Time, f func(t *testing.T, e *storeEnv)) {
		t.Run(name, func(t *testing.T) {
			clock := NewClock(start)
			store := newStore(t, clock.Now)
			t.Cleanup(func() { _ = store.Close() })
			f(t, &storeEnv{store: store, clock: clock})
		})
	}
	for _, tc := range storeCases {
		run(tc.name, suiteStart, tc.run)
	}
	for _, tc := range bucketedCases {
		run("Bucketed/"+tc.name, suiteStart, tc.run)
	}
	// A store started 30 ms past a whole second: buckets aligned to the
	// store's start, or to a key's first admission, instead of the Unix
	// epoch, pass the cases above.
	run("Bucketed/AlignedToTheEpoch", suiteStart.Add(30*time.Millisecond), testBucketsAlignToTheEpoch)
	for _, tc := range peekCases {
		run("Peek/"+tc.name, suiteStart, tc.run)
	}
	if suite.stall != nil {
		for _, tc := range stalledCases {
			run("Stalled/ContextEnds"+tc.method, suiteStart, func(t *testing.T, e *storeEnv) {
				if tc.has != nil {
					tc.has(t, e) // skips a store without the method
				}
				testContextEndsOnStall(t, e, suite.stall, tc.method, tc.call, tc.after)
			})
		}
	}
}

type storeEnv struct {
	store slidelog.Store
	clock *Clock
}

// info is what the store says of itself (the zero StoreInfo when it does
// not).
func (e *storeEnv) info() slidelog.StoreInfo {
	if d, ok := e.store.(slidelog.Describer); ok {
		return d.Describe()
	}
	return slidelog.StoreInfo{}
}

// clocked reports whether the store tells its clock, so that a deny cache
// can follow the suite's.
func (e *storeEnv) clocked() bool { return e.info().Clock != nil }

// limiter returns a limiter on the store under test with the default
// options (and opts), closed when the test ends. check fails a decision
// that did not come from the store itself.
func (e *storeEnv) limiter(t *testing.T, p slidelog.Policy, opts ...slidelog.Option) *slidelog.Limiter {
	t.Helper()
	if !e.clocked() {
		// The limiter's deny cache would measure time by the process's
		// clock, not the suite's.
		opts = append(opts, slidelog.WithDenyCache(0))
	}
	l, err := slidelog.New(e.store, p, opts...)
	if err != nil {
		t.Fatalf("New(%+v): %v", p, err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// storeAs returns s as a T (an interface of package slidelog named
// name), and skips the test of a store that is not one.
func storeAs[T any](t *testing.T, s slidelog.Store, name string) T {
	t.Helper()
	v, ok := s.(T)
	if !ok {
		t.Skipf("%T is not a slidelog.%s", s, name)
	}
	return v
}

// recorder returns the store as a Recorder, and skips the test of a
// store that is not one.
func (e *storeEnv) recorder(t *testing.T) slidelog.Recorder {
	t.Helper()
	return storeAs[slidelog.Recorder](t, e.store, "Recorder")
}

// keeper returns the store as a Keeper, and skips the test of a store
// that is not one.
func (e *storeEnv) keeper(t *testing.T) slidelog.Keeper {
	t.Helper()
	return storeAs[slidelog.Keeper](t, e.store, "Keeper")
}

// fromStore reports whether the store (or its deny cache) decided res.
func fromStore(res slidelog.Result) bool {
	return res.Source.FromStore() || res.Source == slidelog.SourceDenyCache
}

// want is what a test expects of a Result; zero fields are checked too.
type want struct {
	allowed    bool
	remaining  int
	retryAfter time.Duration
	resetAfter time.Duration
}

// check decides a request of cost on key through l and fails the test
// unless the Result is w, comes from the store (or its deny cache) and is
// well formed (checkResult).
func (e *storeEnv) check(t *testing.T, l *slidelog.Limiter, key string, cost int, w want) slidelog.Result {
	t.Helper()
	res, err := l.AllowN(t.Context(), key, cost)
	if err != nil {
		t.Fatalf("AllowN(%q, %d): unexpected error %v", key, cost, err)
	}
	if res.Allowed != w.allowed || res.Remaining != w.remaining || res.RetryAfter != w.retryAfter || res.ResetAfter != w.resetAfter {
		t.Fatalf("AllowN(%q, %d) = allowed %v remaining %d retryAfter %v resetAfter %v (source %v); want allowed %v remaining %d retryAfter %v resetAfter %v",
			key, cost, res.Allowed, res.Remaining, res.RetryAfter, res.ResetAfter, res.Source, w.allowed, w.remaining, w.retryAfter, w.resetAfter)
	}
	if !fromStore(res) {
		t.Fatalf("AllowN(%q, %d) decided by %v, want the store (or its deny cache)", key, cost, res.Source)
	}
	e.checkResult(t, fmt.Sprintf("AllowN(%q, %d)", key, cost), l.Policies(), res)
	return res
}

// checkResult fails the test unless res, a store's answer (a decision,
// or Peek's), is well formed: one state per policy, in the request's
// order; the top-level fields those of the binding policy, as NewResult
// chooses it; per policy, a RetryAfter exactly when it had no room,
// Remaining from 0 to its limit, durations within its window (and
// precision); DecidedAt the store clock's time; and, on a denial, a
// StableFor no longer than any state shows to hold.
func (e *storeEnv) checkResult(t *testing.T, call string, policies []slidelog.Policy, res slidelog.Result) {
	t.Helper()
	states := res.States()
	if len(states) != len(policies) {
		t.Fatalf("%s: %d policy states (Limit %d, Policy %+v, Policies %d), want %d: a store fills every field of its Result but Source (slidelog.NewResult)",
			call, len(states), res.Limit, res.Policy, len(res.Policies), len(policies))
	}
	for i, st := range states {
		p := policies[i]
		span := p.Window + p.Precision
		switch {
		case st.Policy != p:
			t.Fatalf("%s: state %d is of policy %+v, want %+v (the request's order)", call, i, st.Policy, p)
		case st.Allowed == (st.RetryAfter > 0) || st.RetryAfter < 0 || st.RetryAfter > span:
			t.Fatalf("%s: policy %s allowed %v with RetryAfter %v, want RetryAfter zero when it had room, else within (0, %v]", call, p, st.Allowed, st.RetryAfter, span)
		case st.Remaining < 0 || st.Remaining > p.Limit:
			t.Fatalf("%s: policy %s Remaining %d, want 0..%d", call, p, st.Remaining, p.Limit)
		case st.ResetAfter < 0 || st.ResetAfter > span:
			t.Fatalf("%s: policy %s ResetAfter %v, want 0..%v", call, p, st.ResetAfter, span)
		}
	}
	bind := slidelog.NewResult(states, res.Source)
	if res.Allowed != bind.Allowed || res.Policy != bind.Policy || res.Limit != bind.Limit || res.Remaining != bind.Remaining ||
		res.RetryAfter != bind.RetryAfter || res.ResetAfter != bind.ResetAfter {
		t.Fatalf("%s: top-level fields allowed %v policy %s limit %d remaining %d retryAfter %v resetAfter %v; want the binding policy's, as NewResult chooses it: allowed %v policy %s limit %d remaining %d retryAfter %v resetAfter %v",
			call, res.Allowed, res.Policy, res.Limit, res.Remaining, res.RetryAfter, res.ResetAfter,
			bind.Allowed, bind.Policy, bind.Limit, bind.Remaining, bind.RetryAfter, bind.ResetAfter)
	}
	if now := e.clock.Now().Truncate(time.Microsecond); !res.DecidedAt.Equal(now) {
		t.Fatalf("%s: DecidedAt %v, want the store clock's time %v", call, res.DecidedAt, now)
	}
	if res.Allowed || res.StableFor == 0 {
		return
	}
	for _, st := range states {
		// A violated policy changes once RetryAfter has passed, and a
		// policy that counts anything once its first entry leaves, which
		// is no later than ResetAfter.
		if res.StableFor < 0 || !st.Allowed && res.StableFor > st.RetryAfter || st.Remaining < st.Policy.Limit && res.StableFor > st.ResetAfter {
			t.Fatalf("%s: StableFor %v, but policy %s (allowed %v, remaining %d, retryAfter %v, resetAfter %v) changes sooner",
				call, res.StableFor, st.Policy, st.Allowed, st.Remaining, st.RetryAfter, st.ResetAfter)
		}
	}
}

var storeCases = []struct {
	name string
	run  func(t *testing.T, e *storeEnv)
}{
	{"LimitReachedExactly", func(t *testing.T, e *storeEnv) {
		l := e.limiter(t, slidelog.Policy{Name: "p", Limit: 5, Window: time.Second})
		for i := range 5 {
			e.check(t, l, "k", 1, want{allowed: true, remaining: 4 - i, resetAfter: time.Second})
		}
		e.check(t, l, "k", 1, want{remaining: 0, retryAfter: time.Second, resetAfter: time.Second})
		e.clock.Advance(250 * time.Millisecond)
		e.check(t, l, "k", 1, want{remaining: 0, retryAfter: 750 * time.Millisecond, resetAfter: 750 * time.Millisecond})
	}},
	{"ManyEntriesInOneWindow", func(t *testing.T, e *storeEnv) {
		// Thousands of requests of cost 1 in one window, each a
		// millisecond after the last: a store must count every one, not
		// a capped number of the newest.
		const n = 3000
		l := e.limiter(t, slidelog.Policy{Name: "p", Limit: n, Window: time.Hour})
		for i := range n {
			res, err := l.Allow(t.Context(), "k")
			if err != nil || !res.Allowed || res.Remaining != n-1-i || !fromStore(res) {
				t.Fatalf("request %d of %d: %+v, %v; want admitted by the store with %d remaining", i+1, n, res, err, n-1-i)
			}
			e.clock.Advance(time.Millisecond)
		}
		e.check(t, l, "k", 1, want{remaining: 0, retryAfter: time.Hour - n*time.Millisecond, resetAfter: time.Hour - time.Millisecond})
		e.clock.Advance(time.Hour - n*time.Millisecond) // the first request leaves
		e.check(t, l, "k", 1, want{allowed: true, remaining: 0, resetAfter: time.Hour})
		e.check(t, l, "k", 1, want{remaining: 0, retryAfter: time.Millisecond, resetAfter: time.Hour})
	}},
	{"RejectionsAreNotLogged", func(t *testing.T, e *storeEnv) {
		l := e.limiter(t, slidelog.Policy{Name: "p", Limit: 2, Window: time.Second})
		e.check(t, l, "k", 1, want{allowed: true, remaining: 1, resetAfter: time.Second})
		e.check(t, l, "k", 1, want{allowed: true, remaining: 0, resetAfter: time.Second})
		for range 20 {
			e.clock.Advance(40 * time.Millisecond)
			if res, err := l.Allow(t.Context(), "k"); err != nil || res.Allowed {
				t.Fatalf("Allow over the limit = %+v, %v; want a denial", res, err)
			}
		}
		e.clock.Advance(200 * time.Millisecond) // exactly one window after the admissions
		e.check(t, l, "k", 1, want{allowed: true, remaining: 1, resetAfter: time.Second})
	}},
	{"EntryFreesItsSlotExactlyWhenItAgesOut", func(t *testing.T, e *storeEnv) {
		l := e.limiter(t, slidelog.Policy{Name: "p", Limit: 3, Window: time.Second})
		e.check(t, l, "k", 1, want{allowed: true, remaining: 2, resetAfter: time.Second})
		e.clock.Advance(100 * time.Millisecond)
		e.check(t, l, "k", 1, want{allowed: true, remaining: 1, resetAfter: time.Second})
		e.clock.Advance(100 * time.Millisecond)
		e.check(t, l, "k", 1, want{allowed: true, remaining: 0, resetAfter: time.Second})
		e.clock.Advance(800*time.Millisecond - time.Microsecond) // one microsecond before the first entry leaves
		e.check(t, l, "k", 1, want{remaining: 0, retryAfter: time.Microsecond, resetAfter: 200*time.Millisecond + time.Microsecond})
		e.clock.Advance(time.Microsecond)
		e.check(t, l, "k", 1, want{allowed: true, remaining: 0, resetAfter: time.Second})
		e.check(t, l, "k", 1, want{remaining: 0, retryAfter: 100 * time.Millisecond, resetAfter: time.Second})
	}},
	{"Cost", func(t *testing.T, e *storeEnv) {
		l := e.limiter(t, slidelog.Policy{Name: "p", Limit: 10, Window: time.Second})
		e.check(t, l, "k", 4, want{allowed: true, remaining: 6, resetAfter: time.Second})
		e.clock.Advance(300 * time.Millisecond)
		e.check(t, l, "k", 7, want{remaining: 6, retryAfter: 700 * time.Millisecond, resetAfter: 700 * time.Millisecond})
		e.check(t, l, "k", 6, want{allowed: true, remaining: 0, resetAfter: time.Second})
		e.clock.Advance(200 * time.Millisecond)
		// 10 units held: 4 stamped at 0 ms, 6 at 300 ms. Cost 5 needs the
		// 4 oldest and one of the 300 ms units gone: at 1300 ms.
		e.check(t, l, "k", 5, want{remaining: 0, retryAfter: 800 * time.Millisecond, resetAfter: 800 * time.Millisecond})
		e.clock.Advance(500 * time.Millisecond)
		e.check(t, l, "k", 5, want{remaining: 4, retryAfter: 300 * time.Millisecond, resetAfter: 300 * time.Millisecond})
		e.check(t, l, "k", 4, want{allowed: true, remaining: 0, resetAfter: time.Second})
	}},
	{"PoliciesAreAllOrNothing", func(t *testing.T, e *storeEnv) {
		short := slidelog.Policy{Name: "short", Limit: 3, Window: time.Second}
		long := slidelog.Policy{Name: "long", Limit: 5, Window: 10 * time.Second}
		l := e.limiter(t, short, slidelog.WithPolicy(long))
		for i := range 3 { // short binds: it has fewer units left than long
			e.check(t, l, "k", 1, want{allowed: true, remaining: 2 - i, resetAfter: time.Second})
		}
		res := e.check(t, l, "k", 1, want{remaining: 0, retryAfter: time.Second, resetAfter: time.Second})
		if got := res.Violated(); len(got) != 1 || got[0] != "short" {
			t.Fatalf("Violated() = %v, want [short]", got)
		}
		if got := res.Policies[1]; !got.Allowed || got.Remaining != 2 {
			t.Fatalf("long policy after a denial by short = %+v; want allowed with 2 remaining (the denial recorded nowhere)", got)
		}
		e.clock.Advance(time.Second)
		e.check(t, l, "k", 1, want{allowed: true, remaining: 1, resetAfter: 10 * time.Second})
		e.check(t, l, "k", 1, want{allowed: true, remaining: 0, resetAfter: 10 * time.Second})
		res = e.check(t, l, "k", 1, want{remaining: 0, retryAfter: 9 * time.Second, resetAfter: 10 * time.Second})
		if got := res.Violated(); len(got) != 1 || got[0] != "long" {
			t.Fatalf("Violated() = %v, want [long]", got)
		}
		if got := res.Policies[0]; !got.Allowed || got.Remaining != 1 {
			t.Fatalf("short policy after a denial by long = %+v; want allowed with 1 remaining", got)
		}
	}},
	{"EveryPolicyIsChecked", func(t *testing.T, e *storeEnv) {
		// Five policies, of which only the last binds: a store must check
		// each one, not the first two.
		ps := []slidelog.Policy{
			{Name: "a", Limit: 50, Window: time.Second},
			{Name: "b", Limit: 40, Window: 2 * time.Second},
			{Name: "c", Limit: 30, Window: 3 * time.Second},
			{Name: "d", Limit: 20, Window: 4 * time.Second},
			{Name: "e", Limit: 2, Window: time.Minute},
		}
		opts := make([]slidelog.Option, 0, len(ps)-1)
		for _, p := range ps[1:] {
			opts = append(opts, slidelog.WithPolicy(p))
		}
		l := e.limiter(t, ps[0], opts...)
		e.check(t, l, "k", 1, want{allowed: true, remaining: 1, resetAfter: time.Minute})
		e.clock.Advance(time.Second)
		e.check(t, l, "k", 1, want{allowed: true, remaining: 0, resetAfter: time.Minute})
		e.clock.Advance(time.Second)
		res := e.check(t, l, "k", 1, want{remaining: 0, retryAfter: 58 * time.Second, resetAfter: 59 * time.Second})
		if got := res.Violated(); len(got) != 1 || got[0] != "e" {
			t.Fatalf("Violated() = %v, want [e]", got)
		}
		if len(res.Policies) != len(ps) {
			t.Fatalf("%d policy results, want %d", len(res.Policies), len(ps))
		}
		for i, pr := range res.Policies[:len(ps)-1] {
			// The admissions 2 s and 1 s ago are in a window of W
			// (half-open, (now-W, now]) when W is longer than their age.
			in := 0
			for _, age := range []time.Duration{2 * time.Second, time.Second} {
				if ps[i].Window > age {
					in++
				}
			}
			if !pr.Allowed || pr.Remaining != ps[i].Limit-in {
				t.Fatalf("policy %s = %+v; want allowed with %d remaining", ps[i].Name, pr, ps[i].Limit-in)
			}
		}
	}},
	{"LimitersKeepTheirLogsApart", func(t *testing.T, e *storeEnv) {
		// Two limiters with different names on one store and one key:
		// neither counts the other's requests, nor evicts the entries the
		// other still needs (the short window would drop them otherwise).
		short := e.limiter(t, slidelog.Policy{Name: "p", Limit: 2, Window: time.Second}, slidelog.WithName("short"))
		long := e.limiter(t, slidelog.Policy{Name: "p", Limit: 3, Window: time.Minute}, slidelog.WithName("long"))
		e.check(t, long, "k", 3, want{allowed: true, remaining: 0, resetAfter: time.Minute})
		e.check(t, short, "k", 2, want{allowed: true, remaining: 0, resetAfter: time.Second})
		e.clock.Advance(2 * time.Second)
		e.check(t, short, "k", 2, want{allowed: true, remaining: 0, resetAfter: time.Second})
		e.check(t, long, "k", 1, want{remaining: 0, retryAfter: 58 * time.Second, resetAfter: 58 * time.Second})
		if err := long.Reset(t.Context(), "k"); err != nil {
			t.Fatalf("Reset: %v", err)
		}
		e.check(t, long, "k", 1, want{allowed: true, remaining: 2, resetAfter: time.Minute})
		e.check(t, short, "k", 1, want{remaining: 0, retryAfter: time.Second, resetAfter: time.Second})
	}},
	{"SameNameIsRefusedWhileOpen", func(t *testing.T, e *storeEnv) {
		// Identical policies no longer share a log by accident: the name
		// does, and a second open limiter of one name on one store is an
		// error, even with other policies.
		p := slidelog.Policy{Name: "p", Limit: 2, Window: time.Minute}
		first := e.limiter(t, p, slidelog.WithName("login"))
		for _, give := range []slidelog.Policy{p, {Name: "q", Limit: 9, Window: time.Hour}} {
			if l, err := slidelog.New(e.store, give, slidelog.WithName("login")); !errors.Is(err, slidelog.ErrNameTaken) {
				if l != nil {
					_ = l.Close()
				}
				t.Fatalf("second New named login with %+v: error %v, want ErrNameTaken (New tells stores apart by pointer: a store of type %T, not a pointer, cannot be)", give, err, e.store)
			}
		}
		other, err := slidelog.New(e.store, p)
		if err != nil {
			t.Fatalf("New with another (default) name: %v", err)
		}
		_ = other.Close()
		e.check(t, first, "k", 1, want{allowed: true, remaining: 1, resetAfter: time.Minute})
		if err := first.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		again := e.limiter(t, p, slidelog.WithName("login"))
		e.check(t, again, "k", 1, want{allowed: true, remaining: 0, resetAfter: time.Minute})
	}},
	{"LogSurvivesPolicyChange", func(t *testing.T, e *storeEnv) {
		// A deploy that changes the limit, renames the policy or adds one
		// keeps counting in the same log: it is keyed by the name.
		old := e.limiter(t, slidelog.Policy{Name: "per-minute", Limit: 3, Window: time.Minute}, slidelog.WithName("api"))
		e.check(t, old, "k", 3, want{allowed: true, remaining: 0, resetAfter: time.Minute})
		_ = old.Close()
		e.clock.Advance(time.Second)
		next := e.limiter(t, slidelog.Policy{Name: "minute", Limit: 5, Window: time.Minute}, slidelog.WithName("api"),
			slidelog.WithPolicy(slidelog.Policy{Name: "second", Limit: 5, Window: time.Second}))
		e.check(t, next, "k", 2, want{allowed: true, remaining: 0, resetAfter: time.Minute})
		e.check(t, next, "k", 1, want{remaining: 0, retryAfter: 59 * time.Second, resetAfter: time.Minute})
	}},
	{"RetentionFollowsTheLongestWindow", func(t *testing.T, e *storeEnv) {
		// Instances of one name with different windows (a rolling deploy):
		// the short one does not evict what the long one still counts.
		long := e.limiter(t, slidelog.Policy{Name: "p", Limit: 3, Window: time.Hour}, slidelog.WithName("api"))
		e.check(t, long, "k", 2, want{allowed: true, remaining: 1, resetAfter: time.Hour})
		_ = long.Close()
		short := e.limiter(t, slidelog.Policy{Name: "p", Limit: 5, Window: time.Second}, slidelog.WithName("api"))
		e.clock.Advance(2 * time.Second)
		e.check(t, short, "k", 1, want{allowed: true, remaining: 4, resetAfter: time.Second})
		e.clock.Advance(2 * time.Second)
		e.check(t, short, "k", 1, want{allowed: true, remaining: 4, resetAfter: time.Second})
		_ = short.Close()
		long = e.limiter(t, slidelog.Policy{Name: "p", Limit: 5, Window: time.Hour}, slidelog.WithName("api"))
		// 2 + 1 + 1 units in the hour.
		e.check(t, long, "k", 1, want{allowed: true, remaining: 0, resetAfter: time.Hour})
	}},
	{"CloseLeavesTheStoreOpen", func(t *testing.T, e *storeEnv) {
		p := slidelog.Policy{Name: "p", Limit: 2, Window: time.Minute}
		a := e.limiter(t, p, slidelog.WithName("a"))
		b := e.limiter(t, p, slidelog.WithName("b"))
		if err := a.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if _, err := a.Allow(t.Context(), "k"); !errors.Is(err, slidelog.ErrClosed) {
			t.Fatalf("Allow on the closed limiter: error %v, want ErrClosed", err)
		}
		e.check(t, b, "k", 1, want{allowed: true, remaining: 1, resetAfter: time.Minute})
		res, err := e.store.Take(t.Context(), slidelog.Request{Namespace: "c", Key: "k", Cost: 1, Policies: []slidelog.Policy{p}, ID: 1})
		if err != nil || !res.Allowed {
			t.Fatalf("store.Take after a limiter's Close = %+v, %v; want an admission", res, err)
		}
	}},
	{"Reset", func(t *testing.T, e *storeEnv) {
		l := e.limiter(t, slidelog.Policy{Name: "p", Limit: 2, Window: time.Minute})
		e.check(t, l, "k", 2, want{allowed: true, remaining: 0, resetAfter: time.Minute})
		e.check(t, l, "k", 1, want{remaining: 0, retryAfter: time.Minute, resetAfter: time.Minute})
		if err := l.Reset(t.Context(), "k"); err != nil {
			t.Fatalf("Reset: %v", err)
		}
		e.check(t, l, "k", 1, want{allowed: true, remaining: 1, resetAfter: time.Minute})
	}},
	{"Refund", func(t *testing.T, e *storeEnv) {
		l := e.limiter(t, slidelog.Policy{Name: "p", Limit: 3, Window: time.Minute})
		e.check(t, l, "k", 1, want{allowed: true, remaining: 2, resetAfter: time.Minute})
		e.clock.Advance(time.Second)
		res := e.check(t, l, "k", 2, want{allowed: true, remaining: 0, resetAfter: time.Minute})
		if err := l.Refund(t.Context(), res); err != nil {
			t.Fatalf("Refund: %v", err)
		}
		e.check(t, l, "k", 2, want{allowed: true, remaining: 0, resetAfter: time.Minute})
		denied := e.check(t, l, "k", 1, want{remaining: 0, retryAfter: 59 * time.Second, resetAfter: time.Minute})
		if err := l.Refund(t.Context(), denied); !errors.Is(err, slidelog.ErrNotRefundable) {
			t.Fatalf("Refund(denial) = %v, want ErrNotRefundable", err)
		}
	}},
	{"RefundRemovesTheRecordedCost", func(t *testing.T, e *storeEnv) {
		// Refund takes out the entry of the request's ID with the cost it
		// was recorded with, whatever the refund's Cost says.
		ps := []slidelog.Policy{{Name: "p", Limit: 5, Window: time.Minute}}
		take := func(id uint64, cost int) {
			t.Helper()
			if res, err := e.store.Take(t.Context(), slidelog.Request{Key: "k", Cost: cost, Policies: ps, ID: id}); err != nil || !res.Allowed {
				t.Fatalf("Take(id %d, cost %d) = %+v, %v; want an admission", id, cost, res, err)
			}
		}
		take(1, 1)
		take(2, 2)
		take(3, 2)
		if err := e.store.Refund(t.Context(), slidelog.Request{Key: "k", Cost: 4, Policies: ps, ID: 2}); err != nil {
			t.Fatalf("Refund: %v", err)
		}
		// 3 units held: 2 free, not 4 (a refund of the wrong cost 4 would
		// then admit 2 over the limit).
		res, err := e.store.Take(t.Context(), slidelog.Request{Key: "k", Cost: 3, Policies: ps, ID: 4})
		if err != nil || res.Allowed || res.Remaining != 2 {
			t.Fatalf("Take(cost 3) after a refund of a cost-2 entry with cost 4 = %+v, %v; want a denial with 2 remaining", res, err)
		}
		if err := e.store.Refund(t.Context(), slidelog.Request{Key: "k", Cost: 1, Policies: ps, ID: 3}); err != nil {
			t.Fatalf("Refund: %v", err)
		}
		// 1 unit held: 4 free, not 3 (a refund of the wrong cost 1).
		res, err = e.store.Take(t.Context(), slidelog.Request{Key: "k", Cost: 5, Policies: ps, ID: 5})
		if err != nil || res.Allowed || res.Remaining != 4 {
			t.Fatalf("Take(cost 5) after the refunds = %+v, %v; want a denial with 4 remaining", res, err)
		}
		res, err = e.store.Take(t.Context(), slidelog.Request{Key: "k", Cost: 4, Policies: ps, ID: 6})
		if err != nil || !res.Allowed || res.Remaining != 0 {
			t.Fatalf("Take(cost 4) after the refunds = %+v, %v; want an admission with 0 remaining", res, err)
		}
	}},
	{"RefundFindsOnlyItsEntry", func(t *testing.T, e *storeEnv) {
		testRefundFindsOnlyItsEntry(t, e, slidelog.Policy{Name: "p", Limit: 4, Window: time.Second})
	}},
	{"ResetForgetsOnlyItsKey", func(t *testing.T, e *storeEnv) {
		testResetForgetsOnlyItsKey(t, e, slidelog.Policy{Name: "p", Limit: 4, Window: time.Second})
	}},
	{"BindingPolicyFreesLast", testBindingPolicyFreesLast},
	{"DenialHoldsForStableFor", testDenialHoldsForStableFor},
	{"NamesAndKeysDoNotCollide", testNamesAndKeysDoNotCollide},
	{"CancelledContextDecidesNothing", testCancelledContext},
	{"CloseIsFinal", testCloseIsFinal},
	{"InvalidInputIsRefusedBeforeTheStore", func(t *testing.T, e *storeEnv) {
		// The limiter validates a request once, before the store sees
		// it: a bad policy fails New with ErrInvalidPolicy, a bad cost
		// fails AllowN with ErrInvalidCost, and nothing is recorded.
		for _, tc := range []struct {
			name string
			give []slidelog.Policy
		}{
			{"window 0", []slidelog.Policy{{Name: "p", Limit: 3}}},
			{"limit 0", []slidelog.Policy{{Name: "p", Window: time.Second}}},
			{"limit over MaxLimit", []slidelog.Policy{{Name: "p", Limit: slidelog.MaxLimit + 1, Window: time.Second}}},
			{"window over MaxWindow", []slidelog.Policy{{Name: "p", Limit: 1, Window: maxWindow + time.Microsecond}}},
		} {
			if l, err := slidelog.New(e.store, tc.give[0]); !errors.Is(err, slidelog.ErrInvalidPolicy) {
				if l != nil {
					_ = l.Close()
				}
				t.Errorf("New(%s) = %v; want error %v", tc.name, err, slidelog.ErrInvalidPolicy)
			}
		}
		l := e.limiter(t, slidelog.Policy{Name: "p", Limit: 3, Window: time.Second}, slidelog.WithPolicy(slidelog.Policy{Name: "q", Limit: 9, Window: time.Hour}))
		for _, cost := range []int{0, -1, 4} {
			if res, err := l.AllowN(t.Context(), "k", cost); !errors.Is(err, slidelog.ErrInvalidCost) {
				t.Errorf("AllowN(cost %d) = %+v, %v; want error %v", cost, res, err, slidelog.ErrInvalidCost)
			}
		}
		res, err := l.AllowN(t.Context(), "k", 3)
		if err != nil || !res.Allowed || res.Remaining != 0 {
			t.Fatalf("AllowN(cost 3) = %+v, %v; want an admission with 0 remaining", res, err)
		}
	}},
	{"HugeLimitsAndCosts", func(t *testing.T, e *storeEnv) {
		// Limits up to 2^53-1 and costs up to the limit are exact.
		l := e.limiter(t, slidelog.Policy{Name: "p", Limit: slidelog.MaxLimit, Window: time.Minute})
		e.check(t, l, "k", 1<<52, want{allowed: true, remaining: slidelog.MaxLimit - 1<<52, resetAfter: time.Minute})
		e.clock.Advance(time.Second)
		e.check(t, l, "k", 1<<52, want{remaining: slidelog.MaxLimit - 1<<52, retryAfter: 59 * time.Second, resetAfter: 59 * time.Second})
		e.check(t, l, "k", 1<<52-1, want{allowed: true, remaining: 0, resetAfter: time.Minute})
		e.check(t, l, "k", 1, want{remaining: 0, retryAfter: 59 * time.Second, resetAfter: time.Minute})
		e.clock.Advance(59 * time.Second)
		e.check(t, l, "k", 1<<52, want{allowed: true, remaining: 0, resetAfter: time.Minute})
		e.check(t, l, "other", slidelog.MaxLimit, want{allowed: true, remaining: 0, resetAfter: time.Minute})
		e.check(t, l, "other", 1, want{remaining: 0, retryAfter: time.Minute, resetAfter: time.Minute})

		// The longest window has a positive ResetAfter.
		w := e.limiter(t, slidelog.Policy{Name: "p", Limit: 1, Window: maxWindow}, slidelog.WithName("longest"))
		e.check(t, w, "k", 1, want{allowed: true, remaining: 0, resetAfter: maxWindow})
		e.check(t, w, "k", 1, want{remaining: 0, retryAfter: maxWindow, resetAfter: maxWindow})
		for _, give := range []slidelog.Policy{
			{Limit: slidelog.MaxLimit + 1, Window: time.Second},
			{Limit: math.MaxInt, Window: time.Second},
			{Limit: 1, Window: maxWindow + time.Microsecond},
			{Limit: 1, Window: math.MaxInt64},
		} {
			if _, err := slidelog.New(e.store, give, slidelog.WithName("huge")); !errors.Is(err, slidelog.ErrInvalidPolicy) {
				t.Errorf("New(%+v) error = %v, want ErrInvalidPolicy", give, err)
			}
		}
	}},
	{"CostsAcrossPoliciesAndEviction", func(t *testing.T, e *storeEnv) {
		// Running sums of two windows with costs, through eviction.
		short := slidelog.Policy{Name: "short", Limit: 10, Window: time.Second}
		long := slidelog.Policy{Name: "long", Limit: 25, Window: 5 * time.Second}
		l := e.limiter(t, short, slidelog.WithPolicy(long))
		e.check(t, l, "k", 7, want{allowed: true, remaining: 3, resetAfter: time.Second})
		e.clock.Advance(500 * time.Millisecond)
		e.check(t, l, "k", 3, want{allowed: true, remaining: 0, resetAfter: time.Second})
		e.check(t, l, "k", 1, want{remaining: 0, retryAfter: 500 * time.Millisecond, resetAfter: time.Second})
		e.clock.Advance(500 * time.Millisecond) // the 7 leave the short window
		e.check(t, l, "k", 7, want{allowed: true, remaining: 0, resetAfter: time.Second})
		e.clock.Advance(time.Second) // short: empty; long: 17 held
		e.check(t, l, "k", 9, want{remaining: 8, retryAfter: 3 * time.Second, resetAfter: 4 * time.Second})
		e.check(t, l, "k", 8, want{allowed: true, remaining: 0, resetAfter: 5 * time.Second})
		e.clock.Advance(3 * time.Second) // long: the 7 of 0 s leave
		e.check(t, l, "k", 10, want{remaining: 7, retryAfter: 500 * time.Millisecond, resetAfter: 2 * time.Second})
		e.check(t, l, "k", 7, want{allowed: true, remaining: 0, resetAfter: 5 * time.Second})
	}},
	{"RecordCountsAgainstLaterTakes", func(t *testing.T, e *storeEnv) {
		rec := e.recorder(t)
		p := slidelog.Policy{Name: "p", Limit: 5, Window: time.Minute}
		l := e.limiter(t, p, slidelog.WithName("api"))
		at := e.clock.Now().Add(-20 * time.Second) // decided by a fallback 20 s ago
		req := slidelog.Request{Namespace: l.Name(), Key: "k", Cost: 3, Policies: l.Policies(), ID: 42}
		for range 2 { // idempotent by ID
			if err := rec.Record(t.Context(), req, at); err != nil {
				t.Fatalf("Record: %v", err)
			}
		}
		e.check(t, l, "k", 2, want{allowed: true, remaining: 0, resetAfter: time.Minute})
		e.check(t, l, "k", 1, want{remaining: 0, retryAfter: 40 * time.Second, resetAfter: time.Minute})
		// A record beyond the limit is written all the same.
		e.check(t, l, "j", 2, want{allowed: true, remaining: 3, resetAfter: time.Minute})
		if err := rec.Record(t.Context(), slidelog.Request{Namespace: l.Name(), Key: "j", Cost: 4, Policies: l.Policies(), ID: 43}, e.clock.Now()); err != nil {
			t.Fatalf("Record over the limit: %v", err)
		}
		e.check(t, l, "j", 1, want{remaining: 0, retryAfter: time.Minute, resetAfter: time.Minute})

		e.clock.Advance(40*time.Second - time.Microsecond)
		e.check(t, l, "k", 1, want{remaining: 0, retryAfter: time.Microsecond, resetAfter: 20*time.Second + time.Microsecond})
		e.clock.Advance(time.Microsecond) // at + window: the record leaves
		e.check(t, l, "k", 3, want{allowed: true, remaining: 0, resetAfter: time.Minute})
	}},
	{"KeptCountsInTheKeysNextDecision", func(t *testing.T, e *storeEnv) {
		k := e.keeper(t)
		p := slidelog.Policy{Name: "p", Limit: 5, Window: time.Minute}
		l := e.limiter(t, p, slidelog.WithName("api"))
		at := e.clock.Now().Add(-20 * time.Second) // decided by a fallback 20 s ago
		for id := uint64(1); id <= 2; id++ {
			k.Keep(slidelog.Request{Namespace: l.Name(), Key: "k", Cost: 2, Policies: l.Policies(), ID: id}, at)
		}
		k.Keep(slidelog.Request{Namespace: l.Name(), Key: "k", Cost: 1, Policies: l.Policies(), ID: 3}, at)
		if got := k.Unwritten(); got != 3 {
			t.Fatalf("Unwritten() = %d after keeping 3, want 3", got)
		}
		// A refunded fallback admission is forgotten.
		k.Forget(slidelog.Request{Namespace: l.Name(), Key: "k", ID: 3})
		// The next decision of the key counts the kept admissions: 4 of 5.
		e.check(t, l, "k", 1, want{allowed: true, remaining: 0, resetAfter: time.Minute})
		e.check(t, l, "k", 1, want{remaining: 0, retryAfter: 40 * time.Second, resetAfter: time.Minute})
		if got := k.Unwritten(); got != 0 {
			t.Errorf("Unwritten() = %d after the key's decision, want 0", got)
		}
		// WriteBack writes those of keys not decided since.
		k.Keep(slidelog.Request{Namespace: l.Name(), Key: "j", Cost: 5, Policies: l.Policies(), ID: 4}, e.clock.Now())
		if written, left := k.WriteBack(t.Context()); written != 1 || left != 0 {
			t.Errorf("WriteBack() = %d, %d, want 1, 0", written, left)
		}
		e.check(t, l, "j", 1, want{remaining: 0, retryAfter: time.Minute, resetAfter: time.Minute})
		// A reset forgets what is kept.
		k.Keep(slidelog.Request{Namespace: l.Name(), Key: "r", Cost: 5, Policies: l.Policies(), ID: 5}, e.clock.Now())
		if err := l.Reset(t.Context(), "r"); err != nil {
			t.Fatalf("Reset: %v", err)
		}
		e.check(t, l, "r", 1, want{allowed: true, remaining: 4, resetAfter: time.Minute})
	}},
	{"KeptAdmissionsKeepTheirName", func(t *testing.T, e *storeEnv) {
		// A kept admission belongs to its name and key: a decision of
		// the same key under another name neither counts it nor writes
		// it, and forgetting an ID under that other name keeps it.
		k := e.keeper(t)
		p := slidelog.Policy{Name: "p", Limit: 5, Window: time.Minute}
		api := e.limiter(t, p, slidelog.WithName("api"))
		web := e.limiter(t, p, slidelog.WithName("web"))
		k.Keep(slidelog.Request{Namespace: api.Name(), Key: "k", Cost: 5, Policies: api.Policies(), ID: 7}, e.clock.Now())
		e.check(t, web, "k", 1, want{allowed: true, remaining: 4, resetAfter: time.Minute})
		k.Forget(slidelog.Request{Namespace: web.Name(), Key: "k", ID: 7})
		e.check(t, api, "k", 1, want{remaining: 0, retryAfter: time.Minute, resetAfter: time.Minute})
		e.check(t, web, "k", 4, want{allowed: true, remaining: 0, resetAfter: time.Minute})
	}},
	{"RecordIsIdempotentWithTake", func(t *testing.T, e *storeEnv) {
		rec := e.recorder(t)
		ps := []slidelog.Policy{{Name: "p", Limit: 4, Window: time.Second}}
		req := slidelog.Request{Key: "k", Cost: 2, Policies: ps, ID: 9}
		if res, err := e.store.Take(t.Context(), req); err != nil || !res.Allowed {
			t.Fatalf("Take = %+v, %v", res, err)
		}
		if err := rec.Record(t.Context(), req, e.clock.Now().Add(-time.Millisecond)); err != nil {
			t.Fatalf("Record: %v", err)
		}
		// An admission that left every window already is not written.
		if err := rec.Record(t.Context(), slidelog.Request{Key: "k", Cost: 2, Policies: ps, ID: 10}, e.clock.Now().Add(-time.Second)); err != nil {
			t.Fatalf("Record: %v", err)
		}
		res, err := e.store.Take(t.Context(), slidelog.Request{Key: "k", Cost: 2, Policies: ps, ID: 11})
		if err != nil || !res.Allowed || res.Remaining != 0 {
			t.Fatalf("Take after Record of a taken ID = %+v, %v; want an admission with 0 remaining", res, err)
		}
		for _, give := range []slidelog.Request{
			{Key: "k", Cost: 0, Policies: ps, ID: 12},
			{Key: "k", Cost: 1, ID: 12},
			{Key: "k", Cost: 1, Policies: []slidelog.Policy{{Limit: 0, Window: time.Second}}, ID: 12},
		} {
			if err := rec.Record(t.Context(), give, e.clock.Now()); err == nil {
				t.Errorf("Record(%+v): no error, want one", give)
			}
		}
	}},
	{"DenyCacheAnswersOnlyWhatTheStoreWould", func(t *testing.T, e *storeEnv) {
		// A cached denial of one cost does not answer another cost, an
		// admission drops it, and it ends when a count changes.
		if !e.clocked() {
			t.Skip("the store does not tell its clock (slidelog.StoreInfo.Clock)")
		}
		short := slidelog.Policy{Name: "short", Limit: 2, Window: time.Second}
		long := slidelog.Policy{Name: "long", Limit: 10, Window: 10 * time.Second}
		l := e.limiter(t, short, slidelog.WithPolicy(long), slidelog.WithDenyCache(100))
		e.check(t, l, "k", 1, want{allowed: true, remaining: 1, resetAfter: time.Second})
		e.clock.Advance(9500 * time.Millisecond)
		e.check(t, l, "k", 2, want{allowed: true, remaining: 0, resetAfter: time.Second})
		e.clock.Advance(100 * time.Millisecond)
		e.check(t, l, "k", 1, want{remaining: 0, retryAfter: 900 * time.Millisecond, resetAfter: 900 * time.Millisecond})
		res := e.check(t, l, "k", 2, want{remaining: 0, retryAfter: 900 * time.Millisecond, resetAfter: 900 * time.Millisecond})
		if res.Source == slidelog.SourceDenyCache || res.Policies[1].Remaining != 7 {
			t.Fatalf("cost 2 after a cost-1 denial: source %v, long remaining %d; want the store's answer, 7", res.Source, res.Policies[1].Remaining)
		}
		e.clock.Advance(400 * time.Millisecond) // the first entry left the long window
		res = e.check(t, l, "k", 1, want{remaining: 0, retryAfter: 500 * time.Millisecond, resetAfter: 500 * time.Millisecond})
		if res.Policies[1].Remaining != 8 {
			t.Fatalf("long policy remaining = %d after its oldest entry left, want 8", res.Policies[1].Remaining)
		}

		one := e.limiter(t, slidelog.Policy{Name: "p", Limit: 3, Window: time.Second}, slidelog.WithName("one"), slidelog.WithDenyCache(100))
		e.check(t, one, "k", 2, want{allowed: true, remaining: 1, resetAfter: time.Second})
		e.clock.Advance(100 * time.Millisecond)
		e.check(t, one, "k", 3, want{remaining: 1, retryAfter: 900 * time.Millisecond, resetAfter: 900 * time.Millisecond})
		e.check(t, one, "k", 1, want{allowed: true, remaining: 0, resetAfter: time.Second})
		res = e.check(t, one, "k", 3, want{remaining: 0, retryAfter: time.Second, resetAfter: time.Second})
		if res.Source == slidelog.SourceDenyCache {
			t.Fatalf("cost 3 after an admission: answered by the deny cache, want the store")
		}
	}},
	{"RetriedCallIsCountedOnce", func(t *testing.T, e *storeEnv) {
		if e.info().Local {
			// A call within one process is never sent twice; the
			// contract asks this of every store that does not say it
			// is local (StoreInfo.Local), a store without a Describer
			// among them.
			t.Skip("a store that describes itself as local")
		}
		policies := []slidelog.Policy{{Name: "p", Limit: 3, Window: time.Second}}
		req := slidelog.Request{Key: "k", Cost: 2, Policies: policies, ID: 0x0102030405060708}
		for i := range 3 {
			res, err := e.store.Take(t.Context(), req)
			if err != nil || !res.Allowed || res.Remaining != 1 {
				t.Fatalf("Take #%d of one request = %+v, %v; want allowed with 1 remaining every time (a store that does not say it is local, slidelog.StoreInfo.Local, must count a resent Take once)", i+1, res, err)
			}
		}
		req.ID++
		if res, err := e.store.Take(t.Context(), req); err != nil || res.Allowed {
			t.Fatalf("Take of another request = %+v, %v; want a denial", res, err)
		}
	}},
	{"KeysAreIndependent", func(t *testing.T, e *storeEnv) {
		l := e.limiter(t, slidelog.Policy{Name: "p", Limit: 1, Window: time.Minute})
		keys := []string{"a", "{a}", "a}", "{a", "a:b", "a:", ":a", "a\x00", "a\x00b", "\xff\xfe", "a\nb", strings.Repeat("x", 256), "ключ", "{}", "}{"}
		for _, k := range keys {
			e.check(t, l, k, 1, want{allowed: true, remaining: 0, resetAfter: time.Minute})
		}
		for _, k := range keys {
			e.check(t, l, k, 1, want{remaining: 0, retryAfter: time.Minute, resetAfter: time.Minute})
		}
	}},
	{"ValidationErrors", func(t *testing.T, e *storeEnv) {
		p := slidelog.Policy{Name: "p", Limit: 3, Window: time.Second}
		for _, tc := range []struct {
			give slidelog.Policy
			want error
		}{
			{slidelog.Policy{Limit: 0, Window: time.Second}, slidelog.ErrInvalidPolicy},
			{slidelog.Policy{Limit: -1, Window: time.Second}, slidelog.ErrInvalidPolicy},
			{slidelog.Policy{Limit: 1, Window: time.Millisecond - 1}, slidelog.ErrInvalidPolicy},
		} {
			if _, err := slidelog.New(e.store, tc.give); !errors.Is(err, tc.want) {
				t.Errorf("New(%+v) error = %v, want %v", tc.give, err, tc.want)
			}
		}
		if _, err := slidelog.New(e.store, p, slidelog.WithPolicy(p)); !errors.Is(err, slidelog.ErrInvalidPolicy) {
			t.Errorf("New with two policies named %q: error = %v, want ErrInvalidPolicy", p.Name, err)
		}
		if _, err := slidelog.New(nil, p); !errors.Is(err, slidelog.ErrNilStore) {
			t.Errorf("New(nil store) error = %v, want ErrNilStore", err)
		}
		l := e.limiter(t, p, slidelog.WithPolicy(slidelog.Policy{Name: "q", Limit: 2, Window: time.Minute}))
		for _, n := range []int{0, -1, 3} {
			if _, err := l.AllowN(t.Context(), "k", n); !errors.Is(err, slidelog.ErrInvalidCost) {
				t.Errorf("AllowN(cost %d) error = %v, want ErrInvalidCost", n, err)
			}
		}
		for _, k := range []string{"", strings.Repeat("x", defaultMaxKeyLength+1), strings.Repeat("y", 10<<10)} {
			if _, err := l.Allow(t.Context(), k); !errors.Is(err, slidelog.ErrInvalidKey) {
				t.Errorf("Allow(key of %d bytes) error = %v, want ErrInvalidKey", len(k), err)
			}
		}
		e.check(t, l, "k", 2, want{allowed: true, remaining: 0, resetAfter: time.Minute})
	}},
	{"CancelledContext", func(t *testing.T, e *storeEnv) {
		l := e.limiter(t, slidelog.Policy{Name: "p", Limit: 3, Window: time.Second})
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := l.Allow(ctx, "k"); !errors.Is(err, context.Canceled) {
			t.Fatalf("Allow(cancelled) error = %v, want context.Canceled", err)
		}
		e.check(t, l, "k", 1, want{allowed: true, remaining: 2, resetAfter: time.Second})
	}},
	{"ConcurrentCallsSameInstant", func(t *testing.T, e *storeEnv) {
		// With the default options every call waits for the store,
		// however busy the machine: exactly the limit is admitted, and
		// no call goes to the failure mode.
		const limit, callers = 25, 200
		l := e.limiter(t, slidelog.Policy{Name: "p", Limit: limit, Window: time.Second})
		var admitted, failed, elsewhere int
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range callers {
			wg.Go(func() {
				res, err := l.Allow(context.Background(), "k")
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					failed++
				case !fromStore(res):
					elsewhere++
				case res.Allowed:
					admitted++
				}
			})
		}
		wg.Wait()
		if failed != 0 || elsewhere != 0 || admitted != limit {
			t.Fatalf("%d concurrent calls: the store admitted %d, errors %d, %d decided by the failure mode; want %d admitted, 0 errors, 0 by the failure mode", callers, admitted, failed, elsewhere, limit)
		}
	}},
}

// defaultMaxKeyLength is the longest identity a limiter accepts by
// default (slidelog.WithMaxKeyLength).
const defaultMaxKeyLength = 256

// bucketedCases check the bucketed model (Policy.Precision) on the suite
// clock, which starts on a whole second, so buckets (aligned to the Unix
// epoch) start with it. A bucket b of width P holds admissions stamped in
// [b·P, (b+1)·P) and counts until its end, (b+1)·P, has left the window:
// RetryAfter and ResetAfter follow from bucket ends, not admission times.
var bucketedCases = []struct {
	name string
	run  func(t *testing.T, e *storeEnv)
}{
	{"LimitAndDurations", func(t *testing.T, e *storeEnv) {
		l := e.limiter(t, slidelog.Policy{Name: "p", Limit: 3, Window: time.Second, Precision: 100 * time.Millisecond})
		// Bucket 0 ends at 100 ms, so it counts until 1.1 s.
		e.check(t, l, "k", 1, want{allowed: true, remaining: 2, resetAfter: 1100 * time.Millisecond})
		e.clock.Advance(50 * time.Millisecond)
		e.check(t, l, "k", 1, want{allowed: true, remaining: 1, resetAfter: 1050 * time.Millisecond})
		e.clock.Advance(200 * time.Millisecond) // 250 ms: bucket 2, counting until 1.3 s
		e.check(t, l, "k", 1, want{allowed: true, remaining: 0, resetAfter: 1050 * time.Millisecond})
		// The exact log would free a unit at 1 s; bucket 0 leaves at 1.1 s.
		e.check(t, l, "k", 1, want{remaining: 0, retryAfter: 850 * time.Millisecond, resetAfter: 1050 * time.Millisecond})
		e.clock.Advance(850*time.Millisecond - time.Microsecond)
		e.check(t, l, "k", 1, want{remaining: 0, retryAfter: time.Microsecond, resetAfter: 200*time.Millisecond + time.Microsecond})
		e.clock.Advance(time.Microsecond) // 1.1 s: bucket 0's two units leave
		e.check(t, l, "k", 1, want{allowed: true, remaining: 1, resetAfter: 1100 * time.Millisecond})
		// Cost 2 needs bucket 2's unit gone too, at 1.3 s.
		e.check(t, l, "k", 2, want{remaining: 1, retryAfter: 200 * time.Millisecond, resetAfter: 1100 * time.Millisecond})
		e.clock.Advance(200 * time.Millisecond)
		e.check(t, l, "k", 2, want{allowed: true, remaining: 0, resetAfter: 1100 * time.Millisecond})
	}},
	{"MixedWithExact", func(t *testing.T, e *storeEnv) {
		// An exact short policy and a bucketed long one, all or nothing.
		short := slidelog.Policy{Name: "short", Limit: 2, Window: time.Second}
		long := slidelog.Policy{Name: "long", Limit: 4, Window: 10 * time.Second, Precision: time.Second}
		l := e.limiter(t, short, slidelog.WithPolicy(long))
		e.check(t, l, "k", 1, want{allowed: true, remaining: 1, resetAfter: time.Second})
		e.check(t, l, "k", 1, want{allowed: true, remaining: 0, resetAfter: time.Second})
		res := e.check(t, l, "k", 1, want{remaining: 0, retryAfter: time.Second, resetAfter: time.Second})
		if got := res.Violated(); len(got) != 1 || got[0] != "short" {
			t.Fatalf("Violated() = %v, want [short]", got)
		}
		if got := res.States()[1]; !got.Allowed || got.Remaining != 2 || got.ResetAfter != 11*time.Second {
			t.Fatalf("long policy after a denial by short = %+v; want allowed, 2 remaining, reset after 11s (bucket 0 ends at 1 s)", got)
		}
		e.clock.Advance(time.Second)
		e.check(t, l, "k", 1, want{allowed: true, remaining: 1, resetAfter: time.Second})
		res = e.check(t, l, "k", 1, want{allowed: true, remaining: 0, resetAfter: time.Second})
		if got := res.States()[1]; got.Remaining != 0 || got.ResetAfter != 11*time.Second {
			t.Fatalf("long policy = %+v; want 0 remaining, reset after 11s (bucket 1 ends at 2 s)", got)
		}
		e.clock.Advance(time.Second) // 2 s: short is empty, long holds 4
		res = e.check(t, l, "k", 1, want{remaining: 0, retryAfter: 9 * time.Second, resetAfter: 10 * time.Second})
		if got := res.Violated(); len(got) != 1 || got[0] != "long" {
			t.Fatalf("Violated() = %v, want [long]", got)
		}
		if got := res.States()[0]; !got.Allowed || got.Remaining != 2 {
			t.Fatalf("short policy after a denial by long = %+v; want allowed with 2 remaining", got)
		}
		e.clock.Advance(9*time.Second - time.Microsecond)
		e.check(t, l, "k", 1, want{remaining: 0, retryAfter: time.Microsecond, resetAfter: time.Second + time.Microsecond})
		e.clock.Advance(time.Microsecond) // 11 s: bucket 0's two units leave the long window
		e.check(t, l, "k", 1, want{allowed: true, remaining: 1, resetAfter: time.Second})
	}},
	{"Refund", func(t *testing.T, e *storeEnv) {
		l := e.limiter(t, slidelog.Policy{Name: "p", Limit: 3, Window: time.Second, Precision: 100 * time.Millisecond})
		e.check(t, l, "k", 1, want{allowed: true, remaining: 2, resetAfter: 1100 * time.Millisecond})
		e.clock.Advance(150 * time.Millisecond)
		res := e.check(t, l, "k", 2, want{allowed: true, remaining: 0, resetAfter: 1050 * time.Millisecond})
		if err := l.Refund(t.Context(), res); err != nil {
			t.Fatalf("Refund: %v", err)
		}
		e.check(t, l, "k", 2, want{allowed: true, remaining: 0, resetAfter: 1050 * time.Millisecond})
		e.check(t, l, "k", 1, want{remaining: 0, retryAfter: 950 * time.Millisecond, resetAfter: 1050 * time.Millisecond})

		// A refund takes out the cost recorded, whatever its Cost says.
		ps := []slidelog.Policy{{Name: "p", Limit: 3, Window: time.Second, Precision: 100 * time.Millisecond}}
		for id, cost := range map[uint64]int{1: 1, 2: 2} {
			if res, err := e.store.Take(t.Context(), slidelog.Request{Key: "j", Cost: cost, Policies: ps, ID: id}); err != nil || !res.Allowed {
				t.Fatalf("Take(id %d, cost %d) = %+v, %v; want an admission", id, cost, res, err)
			}
		}
		if err := e.store.Refund(t.Context(), slidelog.Request{Key: "j", Cost: 1, Policies: ps, ID: 2}); err != nil {
			t.Fatalf("Refund: %v", err)
		}
		for range 2 { // a second refund of the ID changes nothing
			res, err := e.store.Take(t.Context(), slidelog.Request{Key: "j", Cost: 3, Policies: ps, ID: 3})
			if err != nil || res.Allowed || res.Remaining != 2 {
				t.Fatalf("Take(cost 3) after the refund of a cost-2 admission = %+v, %v; want a denial with 2 remaining", res, err)
			}
			if err := e.store.Refund(t.Context(), slidelog.Request{Key: "j", Cost: 2, Policies: ps, ID: 2}); err != nil {
				t.Fatalf("Refund: %v", err)
			}
		}
	}},
	{"RefundFindsOnlyItsEntry", func(t *testing.T, e *storeEnv) {
		testRefundFindsOnlyItsEntry(t, e, slidelog.Policy{Name: "p", Limit: 4, Window: time.Second, Precision: 100 * time.Millisecond})
	}},
	{"ResetForgetsOnlyItsKey", func(t *testing.T, e *storeEnv) {
		testResetForgetsOnlyItsKey(t, e, slidelog.Policy{Name: "p", Limit: 4, Window: time.Second, Precision: 100 * time.Millisecond})
	}},
	{"RecordIntoItsBucket", testRecordIntoItsBucket},
}

// maxWindow is the longest window a policy may have (Policy.Validate).
const maxWindow = 100 * 365 * 24 * time.Hour
