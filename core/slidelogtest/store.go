package slidelogtest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
)

// NewStoreFunc builds the store under test. Its decisions must take the
// time from clock (slidelog.WithClock(clock)), and it must be empty of the
// keys the suite uses. The suite closes it.
type NewStoreFunc func(t *testing.T, clock func() time.Time) slidelog.Store

// suiteStart is where every suite clock starts: a fixed instant, so
// expected durations are exact.
var suiteStart = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// RunStoreSuite runs the store conformance suite: every Store must pass it
// with the same results, the memory store, a standalone Redis and a Redis
// Cluster alike.
func RunStoreSuite(t *testing.T, newStore NewStoreFunc) {
	for _, tc := range storeCases {
		t.Run(tc.name, func(t *testing.T) {
			clock := NewClock(suiteStart)
			store := newStore(t, clock.Now)
			t.Cleanup(func() { _ = store.Close() })
			tc.run(t, &storeEnv{store: store, clock: clock})
		})
	}
}

type storeEnv struct {
	store slidelog.Store
	clock *Clock
}

// limiter returns a limiter on the store under test with the default
// options, as users get it: on a healthy store every decision comes from
// the store, however slow the machine.
func (e *storeEnv) limiter(t *testing.T, p slidelog.Policy, opts ...slidelog.Option) *slidelog.Limiter {
	t.Helper()
	l, err := slidelog.New(e.store, p, opts...)
	if err != nil {
		t.Fatalf("New(%+v): %v", p, err)
	}
	return l
}

// want is what a test expects of a Result; zero fields are checked too.
type want struct {
	allowed    bool
	remaining  int
	retryAfter time.Duration
	resetAfter time.Duration
}

func check(t *testing.T, l *slidelog.Limiter, key string, cost int, w want) slidelog.Result {
	t.Helper()
	res, err := l.AllowN(t.Context(), key, cost)
	if err != nil {
		t.Fatalf("AllowN(%q, %d): unexpected error %v", key, cost, err)
	}
	if res.Allowed != w.allowed || res.Remaining != w.remaining || res.RetryAfter != w.retryAfter || res.ResetAfter != w.resetAfter {
		t.Fatalf("AllowN(%q, %d) = allowed %v remaining %d retryAfter %v resetAfter %v; want allowed %v remaining %d retryAfter %v resetAfter %v",
			key, cost, res.Allowed, res.Remaining, res.RetryAfter, res.ResetAfter, w.allowed, w.remaining, w.retryAfter, w.resetAfter)
	}
	return res
}

var storeCases = []struct {
	name string
	run  func(t *testing.T, e *storeEnv)
}{
	{"LimitReachedExactly", func(t *testing.T, e *storeEnv) {
		l := e.limiter(t, slidelog.Policy{Name: "p", Limit: 5, Window: time.Second})
		for i := range 5 {
			check(t, l, "k", 1, want{allowed: true, remaining: 4 - i, resetAfter: time.Second})
		}
		check(t, l, "k", 1, want{remaining: 0, retryAfter: time.Second, resetAfter: time.Second})
		e.clock.Advance(250 * time.Millisecond)
		check(t, l, "k", 1, want{remaining: 0, retryAfter: 750 * time.Millisecond, resetAfter: 750 * time.Millisecond})
	}},
	{"RejectionsAreNotLogged", func(t *testing.T, e *storeEnv) {
		l := e.limiter(t, slidelog.Policy{Name: "p", Limit: 2, Window: time.Second})
		check(t, l, "k", 1, want{allowed: true, remaining: 1, resetAfter: time.Second})
		check(t, l, "k", 1, want{allowed: true, remaining: 0, resetAfter: time.Second})
		for range 20 {
			e.clock.Advance(40 * time.Millisecond)
			if res, err := l.Allow(t.Context(), "k"); err != nil || res.Allowed {
				t.Fatalf("Allow over the limit = %+v, %v; want a denial", res, err)
			}
		}
		e.clock.Advance(200 * time.Millisecond) // exactly one window after the admissions
		check(t, l, "k", 1, want{allowed: true, remaining: 1, resetAfter: time.Second})
	}},
	{"EntryFreesItsSlotExactlyWhenItAgesOut", func(t *testing.T, e *storeEnv) {
		l := e.limiter(t, slidelog.Policy{Name: "p", Limit: 3, Window: time.Second})
		check(t, l, "k", 1, want{allowed: true, remaining: 2, resetAfter: time.Second})
		e.clock.Advance(100 * time.Millisecond)
		check(t, l, "k", 1, want{allowed: true, remaining: 1, resetAfter: time.Second})
		e.clock.Advance(100 * time.Millisecond)
		check(t, l, "k", 1, want{allowed: true, remaining: 0, resetAfter: time.Second})
		e.clock.Advance(800*time.Millisecond - time.Microsecond) // one microsecond before the first entry leaves
		check(t, l, "k", 1, want{remaining: 0, retryAfter: time.Microsecond, resetAfter: 200*time.Millisecond + time.Microsecond})
		e.clock.Advance(time.Microsecond)
		check(t, l, "k", 1, want{allowed: true, remaining: 0, resetAfter: time.Second})
		check(t, l, "k", 1, want{remaining: 0, retryAfter: 100 * time.Millisecond, resetAfter: time.Second})
	}},
	{"Cost", func(t *testing.T, e *storeEnv) {
		l := e.limiter(t, slidelog.Policy{Name: "p", Limit: 10, Window: time.Second})
		check(t, l, "k", 4, want{allowed: true, remaining: 6, resetAfter: time.Second})
		e.clock.Advance(300 * time.Millisecond)
		check(t, l, "k", 7, want{remaining: 6, retryAfter: 700 * time.Millisecond, resetAfter: 700 * time.Millisecond})
		check(t, l, "k", 6, want{allowed: true, remaining: 0, resetAfter: time.Second})
		e.clock.Advance(200 * time.Millisecond)
		// 10 units held: 4 stamped at 0 ms, 6 at 300 ms. Cost 5 needs the
		// 4 oldest and one of the 300 ms units gone: at 1300 ms.
		check(t, l, "k", 5, want{remaining: 0, retryAfter: 800 * time.Millisecond, resetAfter: 800 * time.Millisecond})
		e.clock.Advance(500 * time.Millisecond)
		check(t, l, "k", 5, want{remaining: 4, retryAfter: 300 * time.Millisecond, resetAfter: 300 * time.Millisecond})
		check(t, l, "k", 4, want{allowed: true, remaining: 0, resetAfter: time.Second})
	}},
	{"PoliciesAreAllOrNothing", func(t *testing.T, e *storeEnv) {
		short := slidelog.Policy{Name: "short", Limit: 3, Window: time.Second}
		long := slidelog.Policy{Name: "long", Limit: 5, Window: 10 * time.Second}
		l := e.limiter(t, short, slidelog.WithPolicy(long))
		for i := range 3 { // short binds: it has fewer units left than long
			check(t, l, "k", 1, want{allowed: true, remaining: 2 - i, resetAfter: time.Second})
		}
		res := check(t, l, "k", 1, want{remaining: 0, retryAfter: time.Second, resetAfter: time.Second})
		if got := res.Violated(); len(got) != 1 || got[0] != "short" {
			t.Fatalf("Violated() = %v, want [short]", got)
		}
		if got := res.Policies[1]; !got.Allowed || got.Remaining != 2 {
			t.Fatalf("long policy after a denial by short = %+v; want allowed with 2 remaining (the denial recorded nowhere)", got)
		}
		e.clock.Advance(time.Second)
		check(t, l, "k", 1, want{allowed: true, remaining: 1, resetAfter: 10 * time.Second})
		check(t, l, "k", 1, want{allowed: true, remaining: 0, resetAfter: 10 * time.Second})
		res = check(t, l, "k", 1, want{remaining: 0, retryAfter: 9 * time.Second, resetAfter: 10 * time.Second})
		if got := res.Violated(); len(got) != 1 || got[0] != "long" {
			t.Fatalf("Violated() = %v, want [long]", got)
		}
		if got := res.Policies[0]; !got.Allowed || got.Remaining != 1 {
			t.Fatalf("short policy after a denial by long = %+v; want allowed with 1 remaining", got)
		}
	}},
	{"LimitersKeepTheirLogsApart", func(t *testing.T, e *storeEnv) {
		// Two limiters with different policies on one store and one key:
		// neither counts the other's requests, nor evicts the entries the
		// other still needs (the short window would drop them otherwise).
		short := e.limiter(t, slidelog.Policy{Name: "short", Limit: 2, Window: time.Second})
		long := e.limiter(t, slidelog.Policy{Name: "long", Limit: 3, Window: time.Minute})
		check(t, long, "k", 3, want{allowed: true, remaining: 0, resetAfter: time.Minute})
		check(t, short, "k", 2, want{allowed: true, remaining: 0, resetAfter: time.Second})
		e.clock.Advance(2 * time.Second)
		check(t, short, "k", 2, want{allowed: true, remaining: 0, resetAfter: time.Second})
		check(t, long, "k", 1, want{remaining: 0, retryAfter: 58 * time.Second, resetAfter: 58 * time.Second})
		// Identical policies share the key's log.
		twin := e.limiter(t, slidelog.Policy{Name: "long", Limit: 3, Window: time.Minute})
		check(t, twin, "k", 1, want{remaining: 0, retryAfter: 58 * time.Second, resetAfter: 58 * time.Second})
		if err := twin.Reset(t.Context(), "k"); err != nil {
			t.Fatalf("Reset: %v", err)
		}
		check(t, twin, "k", 1, want{allowed: true, remaining: 2, resetAfter: time.Minute})
		check(t, short, "k", 1, want{remaining: 0, retryAfter: time.Second, resetAfter: time.Second})
	}},
	{"Reset", func(t *testing.T, e *storeEnv) {
		l := e.limiter(t, slidelog.Policy{Name: "p", Limit: 2, Window: time.Minute})
		check(t, l, "k", 2, want{allowed: true, remaining: 0, resetAfter: time.Minute})
		check(t, l, "k", 1, want{remaining: 0, retryAfter: time.Minute, resetAfter: time.Minute})
		if err := l.Reset(t.Context(), "k"); err != nil {
			t.Fatalf("Reset: %v", err)
		}
		check(t, l, "k", 1, want{allowed: true, remaining: 1, resetAfter: time.Minute})
	}},
	{"Refund", func(t *testing.T, e *storeEnv) {
		l := e.limiter(t, slidelog.Policy{Name: "p", Limit: 3, Window: time.Minute})
		check(t, l, "k", 1, want{allowed: true, remaining: 2, resetAfter: time.Minute})
		e.clock.Advance(time.Second)
		res := check(t, l, "k", 2, want{allowed: true, remaining: 0, resetAfter: time.Minute})
		if err := l.Refund(t.Context(), res); err != nil {
			t.Fatalf("Refund: %v", err)
		}
		check(t, l, "k", 2, want{allowed: true, remaining: 0, resetAfter: time.Minute})
		denied := check(t, l, "k", 1, want{remaining: 0, retryAfter: 59 * time.Second, resetAfter: time.Minute})
		if err := l.Refund(t.Context(), denied); !errors.Is(err, slidelog.ErrNotRefundable) {
			t.Fatalf("Refund(denial) = %v, want ErrNotRefundable", err)
		}
	}},
	{"RetriedCallIsCountedOnce", func(t *testing.T, e *storeEnv) {
		policies := []slidelog.Policy{{Name: "p", Limit: 3, Window: time.Second}}
		req := slidelog.Request{Key: "k", Cost: 2, Policies: policies, ID: 0x0102030405060708}
		for i := range 3 {
			res, err := e.store.Take(t.Context(), req)
			if err != nil || !res.Allowed || res.Remaining != 1 {
				t.Fatalf("Take #%d of one request = %+v, %v; want allowed with 1 remaining every time", i+1, res, err)
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
			check(t, l, k, 1, want{allowed: true, remaining: 0, resetAfter: time.Minute})
		}
		for _, k := range keys {
			check(t, l, k, 1, want{remaining: 0, retryAfter: time.Minute, resetAfter: time.Minute})
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
		for _, k := range []string{"", strings.Repeat("x", slidelog.DefaultMaxKeyLength+1), strings.Repeat("y", 10<<10)} {
			if _, err := l.Allow(t.Context(), k); !errors.Is(err, slidelog.ErrInvalidKey) {
				t.Errorf("Allow(key of %d bytes) error = %v, want ErrInvalidKey", len(k), err)
			}
		}
		check(t, l, "k", 2, want{allowed: true, remaining: 0, resetAfter: time.Minute})
	}},
	{"CancelledContext", func(t *testing.T, e *storeEnv) {
		l := e.limiter(t, slidelog.Policy{Name: "p", Limit: 3, Window: time.Second})
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := l.Allow(ctx, "k"); !errors.Is(err, context.Canceled) {
			t.Fatalf("Allow(cancelled) error = %v, want context.Canceled", err)
		}
		check(t, l, "k", 1, want{allowed: true, remaining: 2, resetAfter: time.Second})
	}},
	{"ConcurrentCallsSameInstant", func(t *testing.T, e *storeEnv) {
		const limit, callers = 25, 200
		l := e.limiter(t, slidelog.Policy{Name: "p", Limit: limit, Window: time.Second})
		var admitted, failed int
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range callers {
			wg.Go(func() {
				res, err := l.Allow(context.Background(), "k")
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed++
				} else if res.Allowed {
					admitted++
				}
			})
		}
		wg.Wait()
		if admitted != limit || failed != 0 {
			t.Fatalf("%d concurrent calls: admitted %d, errors %d; want %d admitted, 0 errors", callers, admitted, failed, limit)
		}
	}},
}
