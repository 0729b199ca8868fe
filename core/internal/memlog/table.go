package memlog

import (
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
)

// Table holds logs, at most max of them, and decides what happens when a
// new identity arrives at a full table:
//
//  1. A log none of whose admissions is still in its longest window (an
//     expired log, window.Log.Expires) is dropped to make room:
//     forgetting it changes no decision. Expired logs are found in order
//     of expiry, from a heap per shard, so a live log is never dropped
//     while an expired one remains in any shard.
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
//
// The logs are spread over shards by a hash of the key, each
// shard with its own lock, map and expiry heap, so decisions on different
// keys rarely meet on a lock; a decision on a tracked key takes its
// shard's read lock and its log's lock only. The bound is global (an
// atomic count), so that a table of max logs holds max logs however the
// keys hash. A new identity looks for expired logs in its own shard
// first, then in the shards whose earliest expiry (kept in an atomic) has
// passed, one shard lock at a time.
type Table struct {
	max    int64
	n      atomic.Int64 // logs in all shards
	seed   maphash.Seed
	cursor atomic.Uint32 // where the next search of other shards starts
	shards [numShards]shard

	omu      sync.Mutex
	overflow map[string]*log // by namespace
}

// numShards is how many shards a Table has: enough that two busy keys
// rarely share a lock on a machine of a few dozen cores, few enough that
// a new identity at a full table can look at every shard's earliest
// expiry.
const numShards = 64

// sweepPerAdd is how many expired logs a new identity drops at most.
const sweepPerAdd = 2

// shard is one lock's share of a table's logs.
type shard struct {
	mu     sync.RWMutex
	logs   map[logKey]*log
	expiry expiryHeap // at least one entry per log in logs, plus stale ones
	// next is the earliest expiry in the heap (MaxInt64 when empty), read
	// without the lock to skip shards with nothing to drop.
	next atomic.Int64
	_    [64]byte // keep shards' locks on separate cache lines
}

// NewTable returns a table of at most max logs (max >= 1).
func NewTable(max int) *Table {
	t := &Table{max: int64(max), seed: maphash.MakeSeed(), overflow: make(map[string]*log)}
	for i := range t.shards {
		t.shards[i].logs = make(map[logKey]*log)
		t.shards[i].next.Store(math.MaxInt64)
	}
	return t
}

// shard returns the shard of key, chosen by the identity alone: the
// namespaces of a table are few (a limiter each), so they need not spread
// the keys, and one string hashes faster than two.
func (t *Table) shard(key logKey) *shard {
	return &t.shards[maphash.String(t.seed, key.key)%numShards]
}

// expiryEntry says that log, stored under key, expired no earlier than at
// when the entry was pushed (a log's expiry only moves later while it is
// in the table).
type expiryEntry struct {
	at  int64
	key logKey
	log *log
}

// expiryHeap is a min-heap of expiry entries by at, typed so that pushes
// and pops do not box entries.
type expiryHeap []expiryEntry

func (h *expiryHeap) push(e expiryEntry) {
	*h = append(*h, e)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if s[p].at <= s[i].at {
			break
		}
		s[p], s[i] = s[i], s[p]
		i = p
	}
}

func (h *expiryHeap) pop() expiryEntry {
	s := *h
	e := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s[n] = expiryEntry{}
	s = s[:n]
	for i := 0; ; {
		c := 2*i + 1
		if c >= n {
			break
		}
		if c+1 < n && s[c+1].at < s[c].at {
			c++
		}
		if s[i].at <= s[c].at {
			break
		}
		s[i], s[c] = s[c], s[i]
		i = c
	}
	*h = s
	return e
}

// setNext publishes the shard's earliest expiry. Called with s.mu held.
func (s *shard) setNext() {
	if len(s.expiry) == 0 {
		s.next.Store(math.MaxInt64)
		return
	}
	s.next.Store(s.expiry[0].at)
}

// get returns key's log, or nil when the table has none.
func (t *Table) get(key logKey) *log {
	s := t.shard(key)
	s.mu.RLock()
	l := s.logs[key]
	s.mu.RUnlock()
	return l
}

// getOrAdd returns key's log, adding one when the table has none. It
// first drops up to sweepPerAdd expired logs; when the table is still
// full, it returns the namespace's overflow log.
func (t *Table) getOrAdd(key logKey, now int64) *log {
	s := t.shard(key)
	t.sweep(now, s, sweepPerAdd)
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.logs[key]; l != nil {
		return l
	}
	if !t.reserve() {
		return t.overflowLog(key.namespace)
	}
	l := &log{}
	s.logs[key] = l
	s.push(expiryEntry{at: 0, key: key, log: l})
	return l
}

// reserve counts one more log, unless the table is full.
func (t *Table) reserve() bool {
	for {
		n := t.n.Load()
		if n >= t.max {
			return false
		}
		if t.n.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// sweep drops up to k expired logs: in own first, then in the other
// shards whose earliest expiry has passed. It holds one shard lock at a
// time, and none on entry.
func (t *Table) sweep(now int64, own *shard, k int) {
	dropped := own.sweep(t, now, k)
	if dropped >= k {
		return
	}
	start := t.cursor.Add(1)
	for i := range uint32(numShards) {
		s := &t.shards[(start+i)%numShards]
		if s == own || s.next.Load() > now {
			continue
		}
		if dropped += s.sweep(t, now, k-dropped); dropped >= k {
			return
		}
	}
}

// sweep drops up to k expired logs of s and returns how many it dropped.
func (s *shard) sweep(t *Table, now int64, k int) int {
	if s.next.Load() > now {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for n < k && s.dropExpired(t, now) {
		n++
	}
	return n
}

// dropExpired removes one expired log and reports whether it found one.
// It pops the heap in order of expiry: entries of logs no longer in the
// shard are discarded, a live log is pushed back with its current
// expiry, and it stops at the first entry not yet due. A log another
// goroutine holds is in use, so live: it is pushed back one microsecond
// later. Every entry is popped at most once per call, and each push
// back follows an admission, so the work is amortized O(log n) per
// decision. Called with s.mu held.
func (s *shard) dropExpired(t *Table, now int64) bool {
	defer s.setNext()
	for len(s.expiry) > 0 && s.expiry[0].at <= now {
		e := s.expiry.pop()
		if s.logs[e.key] != e.log {
			continue // removed (reset) or replaced since
		}
		l := e.log
		if !l.mu.TryLock() {
			s.expiry.push(expiryEntry{at: now + 1, key: e.key, log: l})
			continue
		}
		if exp := l.w.Expires(); exp > now {
			s.expiry.push(expiryEntry{at: exp, key: e.key, log: l})
			l.mu.Unlock()
			continue
		}
		l.dead.Store(true)
		delete(s.logs, e.key)
		t.n.Add(-1)
		l.mu.Unlock()
		return true
	}
	return false
}

// push adds e to the heap, first rebuilding the heap from the shard when
// stale entries (of logs reset) make up more than half of it. Called with
// s.mu held.
func (s *shard) push(e expiryEntry) {
	if len(s.expiry) > 2*len(s.logs)+64 {
		s.expiry = s.expiry[:0]
		for k, l := range s.logs {
			s.expiry.push(expiryEntry{at: 0, key: k, log: l})
		}
	}
	s.expiry.push(e)
	s.setNext()
}

// remove drops key's log if it is still l.
func (t *Table) remove(key logKey, l *log) {
	s := t.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.logs[key] == l {
		delete(s.logs, key)
		t.n.Add(-1)
	}
}

// overflowLog returns namespace's overflow log, creating it.
func (t *Table) overflowLog(namespace string) *log {
	t.omu.Lock()
	defer t.omu.Unlock()
	l := t.overflow[namespace]
	if l == nil {
		l = &log{}
		t.overflow[namespace] = l
	}
	return l
}

// lockOverflow returns namespace's overflow log, locked, or nil.
func (t *Table) lockOverflow(namespace string) *log {
	for {
		t.omu.Lock()
		l := t.overflow[namespace]
		t.omu.Unlock()
		if l == nil {
			return nil
		}
		l.mu.Lock()
		if !l.dead.Load() {
			return l
		}
		l.mu.Unlock()
	}
}

// Len returns how many identities have their own log.
func (t *Table) Len() int { return int(t.n.Load()) }

// Purge forgets every log.
func (t *Table) Purge() {
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		for _, l := range s.logs {
			l.dead.Store(true)
		}
		t.n.Add(-int64(len(s.logs)))
		clear(s.logs)
		s.expiry = nil
		s.setNext()
		s.mu.Unlock()
	}
	t.omu.Lock()
	defer t.omu.Unlock()
	for _, l := range t.overflow {
		l.dead.Store(true)
	}
	clear(t.overflow)
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
