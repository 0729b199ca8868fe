// Package memlog holds sliding-window logs in process memory: the
// mechanism of package memstore and of a limiter's local fallback. Each
// identity's state is a window.Log (O(1) per decision, exact or bucketed
// per policy); a Table bounds how many identities it tracks and drops
// expired ones. Times are microseconds; callers validate requests first.
package memlog

import (
	"sync"
	"sync/atomic"

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
type log struct {
	mu   sync.Mutex
	w    window.Log
	dead atomic.Bool // removed from the table; a caller holding it must look again

	// Set when the log is made, before its shard's index publishes it:
	// the identity, and its hash, under which the shard keeps it.
	key  logKey
	hash uint64
	// in tells whether the log is in its shard. Guarded by the shard's
	// lock.
	in bool
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
// once, to pass it, would read it back at another width and stall.
func (t *Table) Take(clock Clock, req *Request, policies []window.Policy, out []window.State) (window.Decision, int64) {
	l := t.lockOrAdd(&logKey{req.Namespace, req.Key}, clock)
	now := clock.Now()
	d := l.w.Take(now, req.ID, req.Cost, policies, out)
	l.mu.Unlock()
	return d, now
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
