package memlog

import (
	"container/heap"
	"sync"
)

// Table holds logs, at most max of them, and decides what happens when a
// new identity arrives at a full table:
//
//  1. A log none of whose entries is still in its longest window (an
//     expired log) is dropped to make room: forgetting it changes no
//     decision. Expired logs are found in order of expiry, from a heap, so
//     a live log is never dropped while an expired one remains.
//  2. When every log is live, no log is dropped, since dropping one would
//     hand its identity a fresh window. The new identity is decided on its
//     namespace's overflow log instead, which every identity that finds
//     the table full shares until room frees. A flood of minted
//     identities thus gets one identity's budget in total, and the
//     identities already tracked keep their windows.
//
// Expired logs are also dropped as new identities arrive, a few per new
// identity, so the table needs no sweeping goroutine: memory stays
// bounded by max logs plus one overflow log per namespace, and by about
// the identities active in the longest window when fewer.
type Table struct {
	mu       sync.RWMutex
	max      int
	logs     map[logKey]*log
	expiry   expiryHeap      // at least one entry per log in logs, plus stale ones
	overflow map[string]*log // by namespace
}

// sweepPerAdd is how many expired logs a new identity drops at most.
const sweepPerAdd = 2

// NewTable returns a table of at most max logs (max >= 1).
func NewTable(max int) *Table {
	return &Table{max: max, logs: make(map[logKey]*log), overflow: make(map[string]*log)}
}

// expiryEntry says that log, stored under key, expired no earlier than at
// when the entry was pushed (a log's expiry only moves later while it is
// in the table).
type expiryEntry struct {
	at  int64
	key logKey
	log *log
}

// expiryHeap is a min-heap of expiry entries by at.
type expiryHeap []expiryEntry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(expiryEntry)) }
func (h *expiryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// get returns key's log, or nil when the table has none.
func (t *Table) get(key logKey) *log {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.logs[key]
}

// getOrAdd returns key's log, adding one when the table has none. It
// first drops up to sweepPerAdd expired logs; when the table is still
// full, it returns the namespace's overflow log.
func (t *Table) getOrAdd(key logKey, now int64) *log {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l := t.logs[key]; l != nil {
		return l
	}
	for range sweepPerAdd {
		if !t.dropExpired(now) {
			break
		}
	}
	if len(t.logs) >= t.max {
		l := t.overflow[key.namespace]
		if l == nil {
			l = &log{}
			t.overflow[key.namespace] = l
		}
		return l
	}
	l := &log{}
	t.logs[key] = l
	t.push(expiryEntry{at: 0, key: key, log: l})
	return l
}

// dropExpired removes one expired log and reports whether it found one.
// It pops the heap in order of expiry: entries of logs no longer in the
// table are discarded, a live log is pushed back with its current
// expiry, and it stops at the first entry not yet due. A log another
// goroutine holds is in use, so live: it is pushed back one microsecond
// later. Every entry is popped at most once per call, and each push
// back follows an admission, so the work is amortized O(log n) per
// decision. Called with t.mu held.
func (t *Table) dropExpired(now int64) bool {
	for t.expiry.Len() > 0 && t.expiry[0].at <= now {
		e := heap.Pop(&t.expiry).(expiryEntry)
		if t.logs[e.key] != e.log {
			continue // removed (reset) or replaced since
		}
		l := e.log
		if !l.mu.TryLock() {
			heap.Push(&t.expiry, expiryEntry{at: now + 1, key: e.key, log: l})
			continue
		}
		if l.expires > now && len(l.entries) > 0 {
			heap.Push(&t.expiry, expiryEntry{at: l.expires, key: e.key, log: l})
			l.mu.Unlock()
			continue
		}
		l.dead.Store(true)
		delete(t.logs, e.key)
		l.mu.Unlock()
		return true
	}
	return false
}

// push adds e to the heap, first rebuilding the heap from the table when
// stale entries (of logs reset) make up more than half of it.
func (t *Table) push(e expiryEntry) {
	if len(t.expiry) > 2*len(t.logs)+64 {
		t.expiry = t.expiry[:0]
		for k, l := range t.logs {
			t.expiry = append(t.expiry, expiryEntry{at: 0, key: k, log: l})
		}
		heap.Init(&t.expiry)
	}
	heap.Push(&t.expiry, e)
}

// remove drops key's log if it is still l.
func (t *Table) remove(key logKey, l *log) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.logs[key] == l {
		delete(t.logs, key)
	}
}

// Len returns how many identities have their own log.
func (t *Table) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.logs)
}

// Sweep drops every log, and every overflow log, whose entries have all
// left their windows at now.
func (t *Table) Sweep(now int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for t.dropExpired(now) {
	}
	for ns, l := range t.overflow {
		if l.mu.TryLock() {
			if l.expires <= now {
				l.dead.Store(true)
				delete(t.overflow, ns)
			}
			l.mu.Unlock()
		}
	}
}

// Purge forgets every log.
func (t *Table) Purge() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, l := range t.logs {
		l.dead.Store(true)
	}
	for _, l := range t.overflow {
		l.dead.Store(true)
	}
	clear(t.logs)
	clear(t.overflow)
	t.expiry = nil
}

// lock returns key's log, locked, creating it when create is set (at a
// full table of live logs, the namespace's overflow log). It returns nil
// when the key has no log and create is not set.
func (t *Table) lock(key logKey, create bool, now int64) *log {
	for {
		l := t.get(key)
		if l == nil {
			if !create {
				return nil
			}
			l = t.getOrAdd(key, now)
		}
		l.mu.Lock()
		if !l.dead.Load() {
			return l
		}
		l.mu.Unlock()
	}
}
