// Package writeback is the one journal of admissions that a store must
// hold before their key's next decision: a limiter's fallback admissions,
// made while the store could not decide, and a Redis store's admissions
// that no replica acknowledged (redisstore.WithReplicaAck). Both are kept
// the same way, bounded the same way, and leave the same way: once they
// are written where they must be, or once they left their longest window.
//
// An entry is never taken out of the journal to be written: a writer
// reads a copy of a key's entries (Pending), writes them, and only then
// settles them (Settle). Every decision of the key that starts meanwhile
// finds them still pending and writes them too (writes are idempotent by
// request ID), so no decision of a key runs before its entries are in the
// store.
package writeback

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slidelog/slidelog/core/internal/ratelog"
)

// MaxEntries bounds the entries of one journal; beyond it new entries are
// not kept and count in Dropped.
const MaxEntries = 100_000

// Server identities an Entry can carry besides a server's own (which is
// positive).
const (
	// Unwritten marks an entry no server is known to hold: an admission
	// of a limiter's fallback.
	Unwritten int64 = 0
	// Unknown marks an entry written to a server whose identity is not
	// known: it is written again, idempotently, with the key's next
	// decision, which learns the identity.
	Unknown int64 = -1
)

// Entry is one admission to hold. R is what the writer needs to write it
// again (a slidelog.Request).
type Entry[R any] struct {
	Req     R
	ID      uint64    // the request ID: writes are idempotent by it
	At      time.Time // when it was admitted
	Expires time.Time // when it has left its longest window
	// Server is the identity of the server last known to hold it
	// (positive), Unwritten or Unknown.
	Server int64
	Wrote  time.Time // when it was last written to Server
	Writes int       // writes to Server so far
}

// shards is how many parts a journal's keys are spread over, each with
// its own lock. A limiter's fallback keeps every admission it makes while
// a node is down, from every caller at once: one lock would make them
// queue, and a holder the scheduler preempts (a CPU-bound process takes
// its goroutines off the CPU every 10 ms) would hold them all for as long
// as it waits for a CPU again.
const shards = 64

// shard holds the entries of the keys that hash to it.
type shard[R any] struct {
	mu    sync.Mutex
	byKey map[string][]Entry[R]
	_     [48]byte // a cache line of its own
}

// Journal holds entries by key. It is safe for concurrent use; its zero
// value is not: use New.
type Journal[R any] struct {
	seed    maphash.Seed
	shards  [shards]shard[R]
	count   atomic.Int64 // the entries held
	unwrit  atomic.Int64 // the entries held that are Unwritten
	dropped atomic.Uint64

	// OnDrop, when set before the journal is used, is told of the
	// entries Add could not keep: at the first one, then at most every
	// DropReportEvery, with how many were dropped since it was last told.
	OnDrop func(dropped uint64)
	drops  ratelog.Every // the drops, and when OnDrop was last told
}

// DropReportEvery is how often, at most, a journal tells its OnDrop of
// the entries it dropped.
const DropReportEvery = 10 * time.Second

// New returns an empty journal.
func New[R any]() *Journal[R] {
	j := &Journal[R]{seed: maphash.MakeSeed()}
	for i := range j.shards {
		j.shards[i].byKey = make(map[string][]Entry[R])
	}
	return j
}

// shard returns the shard of key, locked.
func (j *Journal[R]) shard(key string) *shard[R] {
	sh := &j.shards[maphash.String(j.seed, key)%shards]
	sh.mu.Lock()
	return sh
}

// Len is how many entries the journal holds; it takes no lock, for the
// decision path's check.
func (j *Journal[R]) Len() int {
	if j == nil {
		return 0
	}
	return int(j.count.Load())
}

// Unwritten is how many entries no server is known to hold.
func (j *Journal[R]) Unwritten() int {
	if j == nil {
		return 0
	}
	return int(j.unwrit.Load())
}

// Dropped counts the entries not kept because the journal was full.
func (j *Journal[R]) Dropped() uint64 { return j.dropped.Load() }

// Add keeps e under key; it reports false, counting it in Dropped and
// telling OnDrop as it says, when the journal holds MaxEntries already.
// An entry of the same ID under key is replaced.
func (j *Journal[R]) Add(key string, e Entry[R]) bool {
	if j.add(key, e) {
		return true
	}
	if j.OnDrop != nil {
		if n, ok := j.drops.Note(time.Now(), DropReportEvery); ok {
			j.OnDrop(uint64(n))
		}
	}
	return false
}

func (j *Journal[R]) add(key string, e Entry[R]) bool {
	sh := j.shard(key)
	defer sh.mu.Unlock()
	es := sh.byKey[key]
	for i := range es {
		if es[i].ID == e.ID {
			j.account(es[i], -1)
			es[i] = e
			j.account(e, 1)
			return true
		}
	}
	if j.count.Add(1) > MaxEntries {
		j.count.Add(-1)
		j.dropped.Add(1)
		return false
	}
	sh.byKey[key] = append(es, e)
	if e.Server == Unwritten {
		j.unwrit.Add(1)
	}
	return true
}

// account adds d to the unwritten count for e.
func (j *Journal[R]) account(e Entry[R], d int64) {
	if e.Server == Unwritten {
		j.unwrit.Add(d)
	}
}

// Pending appends to dst a copy of the entries of key that have not left
// their window at now, dropping those that have, and returns it. The
// entries stay in the journal until settled.
func (j *Journal[R]) Pending(key string, now time.Time, dst []Entry[R]) []Entry[R] {
	if j.Len() == 0 {
		return dst
	}
	sh := j.shard(key)
	defer sh.mu.Unlock()
	es, ok := sh.byKey[key]
	if !ok {
		return dst
	}
	j.filter(sh, key, es, func(e *Entry[R]) bool {
		if !now.Before(e.Expires) {
			return false
		}
		dst = append(dst, *e)
		return true
	})
	return dst
}

// Keys returns the keys that hold entries.
func (j *Journal[R]) Keys() []string {
	var keys []string
	for i := range j.shards {
		sh := &j.shards[i]
		sh.mu.Lock()
		for k := range sh.byKey {
			keys = append(keys, k)
		}
		sh.mu.Unlock()
	}
	return keys
}

// Settle records that the entries written, from Pending, were written to
// the server of identity server (positive, or Unknown) at sent, each
// except those whose Server already was server (a writer need not write
// again what the same server holds). Entries the write made durable
// (durable: replicas acknowledged it, or none are waited for) leave the
// journal; the others now name server. Entries refunded or reset
// meanwhile stay gone.
func (j *Journal[R]) Settle(key string, written []Entry[R], server int64, durable bool, sent time.Time) {
	if len(written) == 0 {
		return
	}
	sh := j.shard(key)
	defer sh.mu.Unlock()
	es, ok := sh.byKey[key]
	if !ok {
		return
	}
	j.filter(sh, key, es, func(e *Entry[R]) bool {
		for _, w := range written {
			if w.ID != e.ID {
				continue
			}
			if durable {
				return false
			}
			if w.Server != server || server == Unknown {
				// Written again, to server.
				if e.Server == server {
					e.Writes++
				} else {
					e.Writes = 0
				}
				if e.Server == Unwritten {
					j.unwrit.Add(-1)
				}
				e.Server, e.Wrote = server, sent
			}
			return true
		}
		return true
	})
}

// Acked drops the entries of key that the server of identity server held
// before sent: a write sent to it at sent that replicas acknowledged shows
// that they hold everything it had written before.
func (j *Journal[R]) Acked(key string, server int64, sent time.Time) {
	if j.Len() == 0 || server <= 0 {
		return
	}
	sh := j.shard(key)
	defer sh.mu.Unlock()
	if es, ok := sh.byKey[key]; ok {
		j.filter(sh, key, es, func(e *Entry[R]) bool { return e.Server != server || !e.Wrote.Before(sent) })
	}
}

// Forget drops the entry of request id under key (a refund).
func (j *Journal[R]) Forget(key string, id uint64) {
	if j.Len() == 0 {
		return
	}
	sh := j.shard(key)
	defer sh.mu.Unlock()
	if es, ok := sh.byKey[key]; ok {
		j.filter(sh, key, es, func(e *Entry[R]) bool { return e.ID != id })
	}
}

// ForgetKey drops every entry of key (a reset).
func (j *Journal[R]) ForgetKey(key string) {
	if j.Len() == 0 {
		return
	}
	sh := j.shard(key)
	defer sh.mu.Unlock()
	if es, ok := sh.byKey[key]; ok {
		j.filter(sh, key, es, func(*Entry[R]) bool { return false })
	}
}

// filter keeps the entries of key, in sh, for which keep returns true
// (keep may change them); sh.mu is held.
func (j *Journal[R]) filter(sh *shard[R], key string, es []Entry[R], keep func(*Entry[R]) bool) {
	out := es[:0]
	for i := range es {
		e := es[i]
		if keep(&e) {
			out = append(out, e)
		} else {
			j.count.Add(-1)
			j.account(e, -1)
		}
	}
	clear(es[len(out):])
	if len(out) == 0 {
		delete(sh.byKey, key)
	} else {
		sh.byKey[key] = out
	}
}
