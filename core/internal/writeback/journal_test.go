package writeback

import (
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestJournal(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	entry := func(id uint64, server int64) Entry[string] {
		return Entry[string]{Req: "r", ID: id, At: t0, Expires: t0.Add(time.Minute), Server: server}
	}
	j := New[string]()
	j.Add("k", entry(1, Unwritten))
	j.Add("k", entry(2, Unknown))
	j.Add("j", entry(3, 7))
	if got, want := j.Len(), 3; got != want {
		t.Fatalf("Len() = %d, want %d", got, want)
	}
	if got, want := j.Unwritten(), 1; got != want {
		t.Fatalf("Unwritten() = %d, want %d", got, want)
	}

	// Pending copies: the entries stay until settled.
	es := j.Pending("k", t0, nil)
	if len(es) != 2 || j.Len() != 3 {
		t.Fatalf("Pending gave %d entries and left %d, want 2 and 3", len(es), j.Len())
	}
	// Written to server 9 and not acknowledged: kept, naming server 9.
	j.Settle("k", es, 9, false, t0)
	for _, e := range j.Pending("k", t0, nil) {
		if e.Server != 9 || !e.Wrote.Equal(t0) {
			t.Errorf("entry %d: server %d wrote %v, want 9 at %v", e.ID, e.Server, e.Wrote, t0)
		}
	}
	if got := j.Unwritten(); got != 0 {
		t.Errorf("Unwritten() = %d after the write, want 0", got)
	}
	// An acknowledged call on server 9 sent after their write drops them;
	// one on another server does not.
	j.Acked("k", 8, t0.Add(time.Second))
	if got := len(j.Pending("k", t0, nil)); got != 2 {
		t.Errorf("got %d entries after another server's acknowledgement, want 2", got)
	}
	j.Acked("k", 9, t0.Add(time.Second))
	if got := len(j.Pending("k", t0, nil)); got != 0 {
		t.Errorf("got %d entries after server 9's acknowledgement, want 0", got)
	}
	// Durable writes leave; so do refunds and entries past their window.
	j.Settle("j", j.Pending("j", t0, nil), 7, true, t0)
	if got := j.Len(); got != 0 {
		t.Errorf("Len() = %d after a durable write, want 0", got)
	}
	j.Add("k", entry(4, Unwritten))
	j.Add("k", entry(5, Unwritten))
	j.Forget("k", 4)
	if es := j.Pending("k", t0.Add(time.Minute), nil); len(es) != 0 || j.Len() != 0 {
		t.Errorf("got %d pending and %d kept past the window, want 0 and 0", len(es), j.Len())
	}
	if got := j.Unwritten(); got != 0 {
		t.Errorf("Unwritten() = %d, want 0", got)
	}
}

func TestJournalBound(t *testing.T) {
	j := New[struct{}]()
	for i := range MaxEntries + 3 {
		j.Add(strconv.Itoa(i%10_000), Entry[struct{}]{ID: uint64(i), Expires: time.Now().Add(time.Hour)})
	}
	if j.Len() != MaxEntries || j.Dropped() != 3 {
		t.Errorf("Len() = %d, Dropped() = %d, want %d and 3", j.Len(), j.Dropped(), MaxEntries)
	}
}

// Concurrent adders over many keys, as a limiter's fallback callers are:
// the bound and the counts stay exact across the shards.
func TestJournalConcurrent(t *testing.T) {
	j := New[struct{}]()
	const adders, each = 8, MaxEntries/8 + 100
	var wg sync.WaitGroup
	for a := range adders {
		wg.Go(func() {
			for i := range each {
				id := uint64(a*each + i)
				server := Unwritten
				if i%2 == 1 {
					server = Unknown
				}
				j.Add(strconv.Itoa(int(id%5_000)), Entry[struct{}]{ID: id, Server: server, Expires: time.Now().Add(time.Hour)})
			}
		})
	}
	wg.Wait()
	if j.Len() != MaxEntries || j.Dropped() != adders*each-MaxEntries {
		t.Fatalf("Len() = %d, Dropped() = %d, want %d and %d", j.Len(), j.Dropped(), MaxEntries, adders*each-MaxEntries)
	}
	held, unwritten := 0, 0
	for _, k := range j.Keys() {
		for _, e := range j.Pending(k, time.Now(), nil) {
			held++
			if e.Server == Unwritten {
				unwritten++
			}
		}
	}
	if held != j.Len() || unwritten != j.Unwritten() {
		t.Errorf("the keys hold %d entries, %d unwritten; Len() = %d, Unwritten() = %d", held, unwritten, j.Len(), j.Unwritten())
	}
	for _, k := range j.Keys() {
		j.ForgetKey(k)
	}
	if j.Len() != 0 || j.Unwritten() != 0 {
		t.Errorf("Len() = %d, Unwritten() = %d after forgetting every key, want 0 and 0", j.Len(), j.Unwritten())
	}
}

// A full journal tells OnDrop of what it drops, at the first drop and
// then at most every DropReportEvery with the count since: a fallback
// admission the store will never count is never dropped silently.
func TestJournalTellsDrops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var told []uint64
		j := New[string]()
		j.OnDrop = func(n uint64) { told = append(told, n) }
		for i := range MaxEntries + 3 {
			j.Add(strconv.Itoa(i), Entry[string]{ID: uint64(i)})
		}
		time.Sleep(DropReportEvery - time.Millisecond)
		j.Add("late", Entry[string]{ID: 1})
		if want := []uint64{1}; !slices.Equal(told, want) {
			t.Fatalf("OnDrop told %v within DropReportEvery, want %v", told, want)
		}
		time.Sleep(time.Millisecond)
		j.Add("later", Entry[string]{ID: 1})
		if want := []uint64{1, 4}; !slices.Equal(told, want) {
			t.Fatalf("OnDrop told %v, want %v", told, want)
		}
	})
}
