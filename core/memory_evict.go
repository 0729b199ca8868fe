package slidelog

import (
	"container/heap"
	"sync"
)

// logTable holds a MemoryStore's logs, at most max of them, and decides
// what happens when a new identity arrives at a full table:
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
// Memory stays bounded by max logs plus one overflow log per namespace.
type logTable struct {
	mu       sync.RWMutex
	max      int
	logs     map[logKey]*memoryLog
	expiry   expiryHeap            // at least one entry per log in logs, plus stale ones
	overflow map[string]*memoryLog // by namespace
}

func newLogTable(max int) *logTable {
	return &logTable{max: max, logs: make(map[logKey]*memoryLog), overflow: make(map[string]*memoryLog)}
}

// expiryEntry says that log, stored under key, expired no earlier than at
// when the entry was pushed (a log's expiry only moves later while it is
// in the table).
type expiryEntry struct {
	at  int64
	key logKey
	log *memoryLog
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
func (t *logTable) get(key logKey) *memoryLog {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.logs[key]
}

// getOrAdd returns key's log, adding one when the table has none. At a
// full table it first drops an expired log; when every log is live, it
// returns the namespace's overflow log. now is the store's time.
func (t *logTable) getOrAdd(key logKey, now int64) *memoryLog {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l := t.logs[key]; l != nil {
		return l
	}
	if len(t.logs) >= t.max && !t.dropExpired(now) {
		l := t.overflow[key.namespace]
		if l == nil {
			l = &memoryLog{}
			t.overflow[key.namespace] = l
		}
		return l
	}
	l := &memoryLog{}
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
func (t *logTable) dropExpired(now int64) bool {
	for t.expiry.Len() > 0 && t.expiry[0].at <= now {
		e := heap.Pop(&t.expiry).(expiryEntry)
		if t.logs[e.key] != e.log {
			continue // removed (swept, reset) or replaced since
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
// stale entries (of logs swept or reset) make up more than half of it.
func (t *logTable) push(e expiryEntry) {
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
func (t *logTable) remove(key logKey, l *memoryLog) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.logs[key] == l {
		delete(t.logs, key)
	}
}

// removeOverflow drops namespace's overflow log if it is still l.
func (t *logTable) removeOverflow(namespace string, l *memoryLog) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.overflow[namespace] == l {
		delete(t.overflow, namespace)
	}
}

// len returns how many identities have their own log.
func (t *logTable) len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.logs)
}

// snapshot returns the table's logs and overflow logs, for the sweeper.
func (t *logTable) snapshot() (map[logKey]*memoryLog, map[string]*memoryLog) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	logs := make(map[logKey]*memoryLog, len(t.logs))
	for k, l := range t.logs {
		logs[k] = l
	}
	overflow := make(map[string]*memoryLog, len(t.overflow))
	for ns, l := range t.overflow {
		overflow[ns] = l
	}
	return logs, overflow
}

// purge forgets every log.
func (t *logTable) purge() {
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
// full table of live logs, the namespace's overflow log: see logTable).
// It returns nil when the key has no log and create is not set.
func (s *MemoryStore) lock(key logKey, create bool) *memoryLog {
	for {
		l := s.logs.get(key)
		if l == nil {
			if !create {
				return nil
			}
			l = s.logs.getOrAdd(key, s.now())
		}
		l.mu.Lock()
		if !l.dead.Load() {
			return l
		}
		l.mu.Unlock()
	}
}

// sweepOnce removes the logs, and the overflow logs, whose entries have
// all expired.
func (s *MemoryStore) sweepOnce() {
	now := s.now()
	logs, overflow := s.logs.snapshot()
	for key, l := range logs {
		l.mu.Lock()
		if !l.dead.Load() && l.expires <= now {
			l.dead.Store(true)
			s.logs.remove(key, l)
		}
		l.mu.Unlock()
	}
	for ns, l := range overflow {
		l.mu.Lock()
		if !l.dead.Load() && l.expires <= now {
			l.dead.Store(true)
			s.logs.removeOverflow(ns, l)
		}
		l.mu.Unlock()
	}
}
