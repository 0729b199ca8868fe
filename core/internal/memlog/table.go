package memlog

import (
	"hash/maphash"
	"maps"
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
//  3. When room frees while the overflow log still counts admissions, a
//     new identity's log starts as a copy of it (seedFromOverflow): an
//     identity decided on the overflow log keeps its admissions counted
//     when it gets a log of its own, rather than a fresh window. The
//     other identities' admissions in the copy over-count, which denies
//     sooner but never admits more, until they leave the window.
//
// Expired logs are also dropped as new identities arrive, a few per new
// identity, so the table needs no sweeping goroutine: memory stays
// bounded by max logs plus one overflow log per namespace, and by about
// the identities active in the longest window when fewer.
//
// The logs are spread over shards by a hash of the key, each shard with
// its own lock, index and expiry heap. The key is hashed once per call:
// the hash picks the shard and the log's place in the shard's index,
// whose logs are told apart by their identity (hashes of different keys
// may collide; the same key in two namespaces always does). The index is
// read without a lock, so a decision on a tracked key takes its log's
// lock only, and decisions on different keys rarely meet on a lock. The
// bound is global (an
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

	// overflow holds the overflow logs by namespace: a map never changed
	// once published, read without a lock; omu serialises the writers,
	// which publish a new one.
	omu      sync.Mutex
	overflow atomic.Pointer[map[string]*log]
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
	mu     sync.Mutex
	idx    atomic.Pointer[index] // written with mu held, read without
	n      int                   // logs in idx
	used   int                   // slots of idx not empty: logs and tombstones
	expiry expiryHeap            // at least one entry per log in idx, plus stale ones
	// next is the earliest expiry in the heap (MaxInt64 when empty), read
	// without the lock to skip shards with nothing to drop.
	next atomic.Int64
	_    [64]byte // keep shards' locks on separate cache lines
}

// index is a shard's logs by hash: an open-addressing table, probed
// linearly from the slot of a log's hash, that lock-free readers share
// with the writer holding the shard's lock. Its slots are only ever
// written one at a time, atomically, so that a reader sees each log
// either in its place or not at all: a log is added to an empty slot or
// a tombstone, and removed by writing a tombstone (or an empty slot when
// no probe goes past it). A full enough index is not resized in place:
// the writer copies its logs to a new one and publishes that, leaving
// readers of the old one to a view of the shard as it was. At least a
// quarter of the slots stay empty, so every probe ends.
type index struct {
	slots []slot
	mask  uint64 // len(slots)-1, a power of two less one
}

// slot is one slot of an index: a log, and its hash beside it, so that a
// probe passes the slots of other hashes without reading their logs (a
// cache miss each, on a table larger than the cache). The hash is written
// before the log and read after it: a reader that sees a log sees its
// hash, or the hash of a later log in the slot, when this one has been
// removed since.
type slot struct {
	hash atomic.Uint64
	log  atomic.Pointer[log]
}

// Load returns the slot's log: nil, tombstone or a log.
func (s *slot) Load() *log { return s.log.Load() }

// Store puts l in the slot, its hash first when it is a log.
func (s *slot) Store(l *log) {
	if l != nil && l != tombstone {
		s.hash.Store(l.hash)
	}
	s.log.Store(l)
}

// tombstone marks a slot whose log was removed: probes go past it, and an
// insertion may take it.
var tombstone = new(log)

// minSlots is the size of a shard's index when it holds few logs.
const minSlots = 8

func newIndex(size int) *index {
	return &index{slots: make([]slot, size), mask: uint64(size - 1)}
}

// home is the first slot a probe for hash h looks at: the hash's bits
// above those that chose the shard.
func (x *index) home(h uint64) uint64 { return (h / numShards) & x.mask }

// NewTable returns a table of at most max logs (max >= 1).
func NewTable(max int) *Table {
	t := &Table{max: int64(max), seed: maphash.MakeSeed()}
	for i := range t.shards {
		t.shards[i].idx.Store(newIndex(minSlots))
		t.shards[i].next.Store(math.MaxInt64)
	}
	return t
}

// hash returns the hash of key, of the identity alone: the namespaces of
// a table are few (a limiter each), so they need not spread the keys, and
// one string hashes faster than two. The same key in two namespaces
// shares a probe sequence.
func (t *Table) hash(key *logKey) uint64 { return maphash.String(t.seed, key.key) }

// shardOf returns the shard of hash h.
func (t *Table) shardOf(h uint64) *shard { return &t.shards[h%numShards] }

// find returns key's log in s, or nil. It takes no lock: a log added or
// removed while it looks may be found or not.
func (s *shard) find(h uint64, key *logKey) *log {
	x := s.idx.Load()
	for i := x.home(h); ; i = (i + 1) & x.mask {
		sl := &x.slots[i]
		l := sl.Load()
		if l == nil {
			return nil
		}
		if l != tombstone && sl.hash.Load() == h && l.is(key) {
			return l
		}
	}
}

// insert adds l, not in s, to s's index, first moving the index to a
// new one when this would leave less than a quarter of its slots empty.
// Called with s.mu held.
func (s *shard) insert(l *log) {
	x := s.idx.Load()
	if 4*(s.used+1) > 3*len(x.slots) {
		x = s.rebuild(s.n + 1)
	}
	for i := x.home(l.hash); ; i = (i + 1) & x.mask {
		p := x.slots[i].Load()
		if p == nil || p == tombstone {
			if p == nil {
				s.used++
			}
			x.slots[i].Store(l)
			break
		}
	}
	l.in = true
	s.n++
}

// rebuild publishes a new index of s's logs, sized for n logs at most
// half its slots, without tombstones, and returns it. Called with s.mu
// held.
func (s *shard) rebuild(n int) *index {
	size := minSlots
	for size < 2*n {
		size *= 2
	}
	x := newIndex(size)
	s.each(func(l *log) {
		i := x.home(l.hash)
		for x.slots[i].Load() != nil {
			i = (i + 1) & x.mask
		}
		x.slots[i].Store(l)
	})
	s.used = s.n
	s.idx.Store(x)
	return x
}

// unlink removes l from s and reports whether it was there. Called with
// s.mu held.
func (s *shard) unlink(l *log) bool {
	if !l.in {
		return false
	}
	x := s.idx.Load()
	i := x.home(l.hash)
	for x.slots[i].Load() != l {
		i = (i + 1) & x.mask
	}
	if x.slots[(i+1)&x.mask].Load() == nil {
		// No probe goes past an empty slot, so none needs this one.
		x.slots[i].Store(nil)
		s.used--
	} else {
		x.slots[i].Store(tombstone)
	}
	l.in = false
	s.n--
	return true
}

// each calls f for every log in s. Called with s.mu held.
func (s *shard) each(f func(*log)) {
	x := s.idx.Load()
	for i := range x.slots {
		if l := x.slots[i].Load(); l != nil && l != tombstone {
			f(l)
		}
	}
}

// expiryEntry says that log expired no earlier than at when the entry was
// pushed (a log's expiry only moves later while it is in the table).
type expiryEntry struct {
	at  int64
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

// get returns key's log, of hash h, or nil when the table has none. It
// takes no lock (see index).
func (t *Table) get(h uint64, key *logKey) *log { return t.shardOf(h).find(h, key) }

// getOrAdd returns key's log, adding one when the table has none. It
// first drops up to sweepPerAdd expired logs; when the table is still
// full, it returns the namespace's overflow log.
func (t *Table) getOrAdd(h uint64, key *logKey, now int64) *log {
	s := t.shardOf(h)
	t.sweep(now, s, sweepPerAdd)
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.find(h, key); l != nil {
		return l
	}
	if !t.reserve() {
		return t.overflowLog(key.namespace)
	}
	l := newLog(*key, h)
	t.seedFromOverflow(l, now)
	s.insert(l)
	s.push(expiryEntry{at: 0, log: l})
	return l
}

// seedFromOverflow makes l, a new log not yet in the table, a copy of its
// namespace's overflow log when that still counts admissions at now (see
// Table, rule 3). Called with the shard's lock held: the overflow log's
// lock is taken after a shard's, never before.
func (t *Table) seedFromOverflow(l *log, now int64) {
	o := t.overflowOf(l.key.namespace)
	if o == nil {
		return
	}
	o.mu.Lock()
	if !o.dead.Load() && o.w.Expires() > now {
		l.w.CopyFrom(&o.w)
	}
	o.mu.Unlock()
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
		l := e.log
		if !l.in {
			continue // removed (reset) since
		}
		if !l.mu.TryLock() {
			s.expiry.push(expiryEntry{at: now + 1, log: l})
			continue
		}
		if exp := l.w.Expires(); exp > now {
			s.expiry.push(expiryEntry{at: exp, log: l})
			l.mu.Unlock()
			continue
		}
		l.dead.Store(true)
		s.unlink(l)
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
	if len(s.expiry) > 2*s.n+64 {
		clear(s.expiry)
		s.expiry = s.expiry[:0]
		s.each(func(l *log) { s.expiry.push(expiryEntry{at: 0, log: l}) })
	}
	s.expiry.push(e)
	s.setNext()
}

// remove drops l from the table if it is still there.
func (t *Table) remove(l *log) {
	s := t.shardOf(l.hash)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unlink(l) {
		t.n.Add(-1)
	}
}

// overflowOf returns namespace's overflow log, or nil. It takes no lock.
func (t *Table) overflowOf(namespace string) *log {
	if m := t.overflow.Load(); m != nil {
		return (*m)[namespace]
	}
	return nil
}

// overflowLog returns namespace's overflow log, creating it.
func (t *Table) overflowLog(namespace string) *log {
	if l := t.overflowOf(namespace); l != nil {
		return l
	}
	t.omu.Lock()
	defer t.omu.Unlock()
	if l := t.overflowOf(namespace); l != nil {
		return l
	}
	m := make(map[string]*log)
	if old := t.overflow.Load(); old != nil {
		maps.Copy(m, *old)
	}
	l := &log{}
	m[namespace] = l
	t.overflow.Store(&m)
	return l
}

// lockOverflow returns namespace's overflow log, locked, or nil.
func (t *Table) lockOverflow(namespace string) *log {
	for {
		l := t.overflowOf(namespace)
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
		s.each(func(l *log) {
			l.dead.Store(true)
			l.in = false
		})
		t.n.Add(-int64(s.n))
		s.idx.Store(newIndex(minSlots))
		s.n, s.used = 0, 0
		s.expiry = nil
		s.setNext()
		s.mu.Unlock()
	}
	t.omu.Lock()
	defer t.omu.Unlock()
	if m := t.overflow.Swap(nil); m != nil {
		for _, l := range *m {
			l.dead.Store(true)
		}
	}
}

// lock returns key's log, locked, or nil when the table has none.
func (t *Table) lock(key *logKey) *log {
	h := t.hash(key)
	for {
		l := t.get(h, key)
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

// lockOrAdd returns key's log, locked, adding one when the table has none
// (at a full table of live logs, the namespace's overflow log). It reads
// clock only to add a log, to find the expired logs it drops: a decision
// on a tracked key reads the time once, under the key's lock.
func (t *Table) lockOrAdd(key *logKey, clock Clock) *log {
	h := t.hash(key)
	if l := t.get(h, key); l != nil {
		l.mu.Lock()
		if !l.dead.Load() {
			return l
		}
		l.mu.Unlock()
	}
	return t.lockOrAddSlow(h, key, clock)
}

// lockOrAddSlow is lockOrAdd once the first look found no live log of
// key, whose hash is h.
func (t *Table) lockOrAddSlow(h uint64, key *logKey, clock Clock) *log {
	for {
		l := t.get(h, key)
		if l == nil {
			l = t.getOrAdd(h, key, clock.Now())
		}
		l.mu.Lock()
		if !l.dead.Load() {
			return l
		}
		l.mu.Unlock()
	}
}
