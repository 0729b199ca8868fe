package memstore_test

import (
	"strconv"
	"sync"
	"testing"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/slidelogtest"
)

func newClockedMemory(t *testing.T, opts ...memstore.Option) (*memstore.Store, *slidelogtest.Clock) {
	t.Helper()
	clock := slidelogtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	store := memstore.New(append(opts, memstore.WithClock(clock.Now))...)
	t.Cleanup(func() { _ = store.Close() })
	return store, clock
}

func allow(t *testing.T, l *slidelog.Limiter, key string) bool {
	t.Helper()
	res, err := l.Allow(t.Context(), key)
	if err != nil {
		t.Fatalf("Allow(%q): %v", key, err)
	}
	return res.Allowed
}

// Minted identities must not evict and so reset an exhausted victim: with
// the default 100,000 keys, 100,001 fresh identities later the victim is
// still denied, and the fresh identities got no more than the table holds.
func TestMemoryStoreMintedIdentitiesKeepVictimsWindow(t *testing.T) {
	store, _ := newClockedMemory(t)
	l := slidelogtest.NewLimiter(t, store, slidelog.PerHour(1))
	if !allow(t, l, "victim") || allow(t, l, "victim") {
		t.Fatal("victim: want one admission, then a denial")
	}
	admitted := 0
	for i := range memstore.DefaultMaxKeys + 1 {
		if allow(t, l, "minted-"+strconv.Itoa(i)) {
			admitted++
		}
	}
	if allow(t, l, "victim") {
		t.Error("victim admitted again after 100,001 minted identities: its window was reset")
	}
	// 99,999 fill the table beside the victim; the other 2 share one
	// overflow budget of 1.
	if admitted != memstore.DefaultMaxKeys {
		t.Errorf("minted identities admitted: got %d, want %d", admitted, memstore.DefaultMaxKeys)
	}
	if got := store.Len(); got != memstore.DefaultMaxKeys {
		t.Errorf("Len: got %d, want %d", got, memstore.DefaultMaxKeys)
	}
}

// Cycling through more identities than the store tracks gives no fresh
// windows: 3 rounds over 1,001 identities at 1 per hour admit 1,001, not
// 3,003.
func TestMemoryStoreCyclingIdentitiesGetNoFreshWindows(t *testing.T) {
	store, clock := newClockedMemory(t, memstore.WithMaxKeys(1000))
	l := slidelogtest.NewLimiter(t, store, slidelog.PerHour(1))
	admitted := 0
	for range 3 {
		for i := range 1001 {
			if allow(t, l, "id-"+strconv.Itoa(i)) {
				admitted++
			}
			clock.Advance(time.Millisecond)
		}
	}
	if admitted != 1001 {
		t.Errorf("admitted: got %d of 3003, want 1001", admitted)
	}
}

// A live log is never dropped while an expired one remains, however
// recently either was used: here the victim's hour-long log is the least
// recently used, and the minute-long logs used after it have expired.
func TestMemoryStoreDropsExpiredLogsFirst(t *testing.T) {
	store, clock := newClockedMemory(t, memstore.WithMaxKeys(100))
	hourly := slidelogtest.NewLimiter(t, store, slidelog.PerHour(1))
	minutely := slidelogtest.NewLimiter(t, store, slidelog.PerMinute(1))
	if !allow(t, hourly, "victim") {
		t.Fatal("victim's first request denied")
	}
	for i := range 99 {
		clock.Advance(time.Millisecond)
		if !allow(t, minutely, "old-"+strconv.Itoa(i)) {
			t.Fatalf("old-%d denied", i)
		}
	}
	clock.Advance(2 * time.Minute) // every minute-long log has expired
	for i := range 99 {
		if !allow(t, minutely, "new-"+strconv.Itoa(i)) {
			t.Fatalf("new-%d denied: it should have taken an expired log's place", i)
		}
	}
	if allow(t, hourly, "victim") {
		t.Fatal("victim admitted twice within the hour: its live log was dropped")
	}
	// Now every log is live: new identities share one overflow budget.
	if !allow(t, minutely, "overflow-1") {
		t.Error("overflow-1: want the shared budget's one admission")
	}
	if allow(t, minutely, "overflow-2") {
		t.Error("overflow-2: admitted on a spent shared budget")
	}
	// A minute later the shared budget and the tracked logs have expired:
	// a new identity gets its own log again, dropping two expired logs
	// on its way in (sweepPerAdd), so the victim, 97 of the new logs and
	// later's remain.
	clock.Advance(2 * time.Minute)
	if !allow(t, minutely, "later") || allow(t, minutely, "later") {
		t.Error("later: want its own window of 1")
	}
	// A new identity drops up to two expired logs, then takes a place.
	if got := store.Len(); got != 99 {
		t.Errorf("Len: got %d, want 99 (100 - 2 expired + 1)", got)
	}
}

// Concurrent minting keeps the bound and never lets an identity past its
// limit.
func TestMemoryStoreMintingConcurrently(t *testing.T) {
	store, _ := newClockedMemory(t, memstore.WithMaxKeys(200))
	l := slidelogtest.NewLimiter(t, store, slidelog.PerHour(1))
	var mu sync.Mutex
	admitted := map[string]int{}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				key := "id-" + strconv.Itoa((i*8+w)%500)
				if allow(t, l, key) {
					mu.Lock()
					admitted[key]++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	total := 0
	for key, n := range admitted {
		total += n
		if n > 1 {
			t.Errorf("%s admitted %d times at 1 per hour", key, n)
		}
	}
	if total > 201 {
		t.Errorf("admitted: got %d, want at most 201 (200 tracked + 1 shared)", total)
	}
	if got := store.Len(); got > 200 {
		t.Errorf("Len: got %d, want at most 200", got)
	}
}

// A refund names its admission by an ID the key's log gave it. When that
// log has been dropped and the identity has a new one, the refund of an
// admission of the old log finds nothing in the new one: it must not
// take back one of the new log's admissions (which would let a third
// request into a window of limit 2), whichever policy model decides.
func TestRefundOfADroppedLogsAdmission(t *testing.T) {
	for _, p := range []slidelog.Policy{
		{Name: "exact", Limit: 2, Window: time.Minute},
		{Name: "bucketed", Limit: 2, Window: time.Minute, Precision: time.Second},
	} {
		t.Run(p.Name, func(t *testing.T) {
			store, clock := newClockedMemory(t, memstore.WithMaxKeys(1))
			l := slidelogtest.NewLimiter(t, store, p)
			old, err := l.Allow(t.Context(), "k")
			if err != nil || !old.Allowed {
				t.Fatalf("first admission: %+v, %v", old, err)
			}
			clock.Advance(2 * time.Minute)
			if !allow(t, l, "x") { // drops k's expired log for x's
				t.Fatal("x denied")
			}
			clock.Advance(2 * time.Minute)
			for range 2 { // k's new log, dropping x's
				if !allow(t, l, "k") {
					t.Fatal("k denied in its new log")
				}
			}
			if store.Len() != 1 {
				t.Fatalf("the store holds %d logs, want 1", store.Len())
			}
			err = l.Refund(t.Context(), old)
			t.Logf("refund of the old log's admission: %v", err)
			if allow(t, l, "k") {
				t.Fatal("a refund of the dropped log's admission took back one of the new log's: 3 admitted in a window of 2")
			}
		})
	}
}
