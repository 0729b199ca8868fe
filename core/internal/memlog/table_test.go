package memlog

import (
	"strconv"
	"sync"
	"testing"

	"github.com/slidelog/slidelog/core/internal/window"
)

var onePerSecond = []window.Policy{{Limit: 1, Window: 1_000_000}}

// fixed is a Clock that always reads one time.
type fixed int64

func (f fixed) Now() int64 { return int64(f) }

func take(t *Table, now int64, ns, key string, id uint64) bool {
	var out [1]window.State
	d, _ := t.Take(fixed(now), &Request{Namespace: ns, Key: key, ID: id, Cost: 1}, onePerSecond, out[:])
	return d.Allowed
}

// The same key in several namespaces has one hash, so its logs share a
// probe sequence in one shard's index: each must stay its own log through
// takes, resets (which leave tombstones) and expiry.
func TestChainedLogsStayApart(t *testing.T) {
	tb := NewTable(3)
	nss := []string{"a", "b", "c"}
	for i, ns := range nss {
		if !take(tb, 1, ns, "k", uint64(i+1)) {
			t.Fatalf("%s: first request denied", ns)
		}
	}
	if tb.Len() != 3 {
		t.Fatalf("Len = %d, want 3", tb.Len())
	}
	for _, ns := range nss {
		if take(tb, 2, ns, "k", 9) {
			t.Fatalf("%s: second request admitted", ns)
		}
	}
	// Reset the middle of the sequence: only that log starts over.
	tb.Reset(Request{Namespace: "b", Key: "k"})
	if tb.Len() != 2 {
		t.Fatalf("Len after reset = %d, want 2", tb.Len())
	}
	for _, c := range []struct {
		ns   string
		want bool
	}{{"a", false}, {"b", true}, {"c", false}} {
		if got := take(tb, 3, c.ns, "k", 10); got != c.want {
			t.Fatalf("%s after reset of b: allowed = %v, want %v", c.ns, got, c.want)
		}
	}
	// Refund finds the admission in its own log only.
	tb.Refund(Request{Namespace: "b", Key: "k", ID: 10})
	if take(tb, 4, "a", "k", 11) || !take(tb, 4, "b", "k", 12) {
		t.Fatal("refund of b's admission reached another log or missed b's")
	}
	// Once every log expired, new identities at the full table drop them,
	// all of them, and the old identities start over.
	later := int64(10_000_000)
	for i, key := range []string{"x", "y", "z"} {
		if !take(tb, later, "a", key, uint64(100+i)) {
			t.Fatalf("new key %s denied", key)
		}
	}
	if tb.Len() != 3 {
		t.Fatalf("Len = %d, want 3", tb.Len())
	}
	for i, key := range []string{"x", "y", "z"} {
		if take(tb, later+1, "a", key, uint64(200+i)) {
			t.Fatalf("key %s shares a log: second request admitted", key)
		}
	}
	tb.Purge()
	if tb.Len() != 0 || !take(tb, later+2, "a", "k", 300) || take(tb, later+2, "b", "k", 301) != true {
		t.Fatal("after Purge the logs are not fresh")
	}
}

// A shard's index keeps every log it holds findable, without a lock,
// while other logs come and go: through tombstones, emptied slots and
// rebuilds. Logs that stay are always found by readers running beside the
// writer; logs removed are no longer found; churn does not grow the index.
func TestIndexFindsWhatStays(t *testing.T) {
	var s shard
	s.idx.Store(newIndex(minSlots))
	logOf := func(i int) *log {
		// Few hash values, so that probe sequences overlap and cross
		// tombstones; the key tells logs of one hash apart.
		return newLog(logKey{"n", strconv.Itoa(i)}, uint64(i%5)*numShards)
	}
	// The logs that stay come after others in their probe sequences,
	// which then leave.
	stay := make([]*log, 20)
	s.mu.Lock()
	var before []*log
	for i := range stay {
		before = append(before, logOf(500+i))
		s.insert(before[i])
		stay[i] = logOf(i)
		s.insert(stay[i])
	}
	for _, l := range before {
		s.unlink(l)
	}
	s.mu.Unlock()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, l := range stay {
					if s.find(l.hash, &l.key) != l {
						t.Errorf("log %q not found while others churn", l.key.key)
						return
					}
				}
			}
		})
	}
	var churn []*log
	for round := range 2000 {
		s.mu.Lock()
		// Logs of this round come in before those of the last leave.
		last := churn
		churn = make([]*log, 10)
		for i := range churn {
			churn[i] = logOf(1000 + round*10 + i)
			s.insert(churn[i])
		}
		for _, l := range last {
			if !s.unlink(l) {
				t.Fatalf("log %q not unlinked", l.key.key)
			}
			if s.find(l.hash, &l.key) != nil {
				t.Fatalf("log %q found after unlink", l.key.key)
			}
		}
		s.mu.Unlock()
	}
	close(stop)
	wg.Wait()
	for _, l := range churn {
		s.unlink(l)
	}
	if s.n != len(stay) {
		t.Errorf("n = %d, want %d", s.n, len(stay))
	}
	if got := len(s.idx.Load().slots); got > 128 {
		t.Errorf("index of %d logs grew to %d slots under churn", s.n, got)
	}
}
