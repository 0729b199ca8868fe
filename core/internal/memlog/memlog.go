// Package memlog holds sliding-window logs in process memory: the
// mechanism of package memstore and of a limiter's local fallback. Each
// identity's state is a window.Log (O(1) per decision, exact or bucketed
// per policy); a Table bounds how many identities it tracks and drops
// expired ones. Times are microseconds; callers validate requests first.
package memlog

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/slidelog/slidelog/core/internal/window"
)

// Request names one call on a Table: the log (Namespace, Key), the
// request's ID and its cost. The policies are a separate argument, which
// the Table only reads: a caller may pass a slice of an array on its
// stack (the key's strings may be kept, so a Request escapes).
type Request struct {
	Namespace, Key string
	ID             uint64
	Cost           int64
}

// logKey names a log: the limiter's namespace and the identity, kept as
// two strings so that no key is concatenated per call.
type logKey struct{ namespace, key string }

// log is one identity's log and the lock that guards it.
//
// The fields a decision reads come first, in the order it reads them: a
// lookup compares the key, whose bytes, when few, are kept here too; then
// it takes mu and reads the window's leading fields, those of an exact
// decision first (window.ExactDecisionBytes), within the log's first 256
// bytes (TestLogLayout). On a table larger than the cache each cache line
// a decision touches is a miss of its own. A log takes a block of 448
// bytes, seven cache lines, so that every log starts a line and its first
// 256 bytes are four lines. A block of 512, aligned to its size, would put
// every log's leading lines in half the cache's sets: it measured slower
// (docs/benchmarks.md). A log is never copied (its window points into
// itself).
type log struct {
	mu sync.Mutex
	// Set when the log is made, before its shard's index publishes it:
	// the identity, and the key's first len(kbuf) bytes (all of any
	// identity ByClientIP makes with its default /64 grouping), for is;
	// and, after the window, the hash under which the shard keeps it,
	// which the shard's slot holds too.
	key  logKey
	kbuf [32]byte
	dead atomic.Bool // removed from the table; a caller holding it must look again
	// in tells whether the log is in its shard. Guarded by the shard's
	// lock.
	in   bool
	w    window.Log
	hash uint64
}

// newLog returns an empty log of key, whose hash is h.
func newLog(key logKey, h uint64) *log {
	l := &log{key: key, hash: h}
	copy(l.kbuf[:], key.key)
	return l
}

// is reports whether the log is key's. The key's bytes are read from the
// caller's string and, when they fit, from kbuf, which shares the log's
// first line, rather than from the string the log was made with, which
// is a miss of its own once it has left the cache; a caller passing that
// very string compares no bytes at all.
func (l *log) is(key *logKey) bool {
	k := key.key
	switch {
	case len(k) != len(l.key.key) || l.key.namespace != key.namespace:
		return false
	case unsafe.StringData(k) == unsafe.StringData(l.key.key):
		return true
	case len(k) <= len(l.kbuf):
		return string(l.kbuf[:len(k)]) == k
	}
	return l.key.key == k
}

// Clock is the time of a Table's caller, in microseconds.
type Clock interface{ Now() int64 }

// Take decides req against policies at the time clock gives while the
// key's lock is held, so that decisions on one key follow each other in
// time however long a caller waited for the lock: it admits the request
// only if every policy has room for its cost and then records it, and
// writes each policy's state to out (len(out) >= len(policies)). It
// returns the decision and its time. Take does not look for an earlier
// call with the same ID: in one process a call is never sent twice. On a
// key the table already tracks it allocates nothing. The request is taken
// by pointer: a caller builds it field by field, and a copy of it made at
// once, to pass it, would read it back at another width and stall. An
// admitted request of ID 0 is given the log's next ID (Decision.ID),
// written to req.ID, which a refund then names.
func (t *Table) Take(clock Clock, req *Request, policies []window.Policy, out []window.State) (window.Decision, int64) {
	l := t.lockOrAdd(&logKey{req.Namespace, req.Key}, clock)
	now := clock.Now()
	d := l.w.Take(now, req.ID, req.Cost, policies, out)
	l.mu.Unlock()
	if d.Allowed {
		req.ID = d.ID
	}
	return d, now
}

// TakeOne is Take on the one policy p, for a request of ID 0 and cost by
// key in namespace (an admission is given the log's next ID,
// Decision.ID): it returns p's state, the decision and its time. A
// limiter deciding on one policy calls it, so that neither the request,
// the policy nor the state goes through memory of its own.
func (t *Table) TakeOne(clock *StoreClock, namespace, key string, cost int64, p window.Policy) (window.State, window.Decision, int64) {
	l := t.lockOrAdd(&logKey{namespace, key}, clock)
	now := clock.Now()
	st, d := l.w.TakeOne(now, cost, p)
	l.mu.Unlock()
	return st, d, now
}

// Record writes an admission made elsewhere at time at, without a check:
// idempotent by ID as far as window.Log.Record tells, not written when it
// already left every window at the time clock gives while the key's lock
// is held. policies are the limiter's, for retention.
func (t *Table) Record(clock Clock, at int64, req Request, policies []window.Policy) {
	l := t.lockOrAdd(&logKey{req.Namespace, req.Key}, clock)
	l.w.Record(clock.Now(), at, req.ID, req.Cost, policies)
	l.mu.Unlock()
}

// Refund removes the admission of req.ID with the cost recorded with it,
// from the key's log or, when the key has none, from its namespace's
// overflow log (IDs are unique, so this finds only that admission). A
// refund of an ID not found changes nothing.
func (t *Table) Refund(req Request) {
	key := logKey{req.Namespace, req.Key}
	if l := t.lock(&key); l != nil {
		found := l.w.Refund(req.ID)
		l.mu.Unlock()
		if found {
			return
		}
	}
	if l := t.lockOverflow(req.Namespace); l != nil {
		l.w.Refund(req.ID)
		l.mu.Unlock()
	}
}

// Reset forgets the log of req's key.
func (t *Table) Reset(req Request) {
	key := logKey{req.Namespace, req.Key}
	if l := t.lock(&key); l != nil {
		l.dead.Store(true)
		t.remove(l)
		l.mu.Unlock()
	}
}
