package slidelog

import (
	"sync"
	"sync/atomic"
	"time"
)

// journalMaxEntries bounds the fallback admissions a limiter keeps to
// write back into its store after an outage (see journal).
const journalMaxEntries = 100_000

// journal keeps the admissions a limiter's fallback made while the store
// was failing, so that they are written into the store's log when it
// answers again: the windows after recovery then count them instead of
// opening fresh. Entries leave when written back, refunded, reset, or when
// they have left the longest window; beyond journalMaxEntries new
// admissions are not kept (and count in dropped).
type journal struct {
	mu      sync.Mutex
	byKey   map[journalKey][]journalEntry
	size    int
	pending atomic.Int64
	dropped atomic.Int64
}

type journalKey struct{ namespace, key string }

// journalEntry is one fallback admission: the request as the limiter saw
// it (its policies and cost, not the fallback's) and when it was made.
type journalEntry struct {
	req Request
	at  time.Time
}

func newJournal() *journal { return &journal{byKey: make(map[journalKey][]journalEntry)} }

func (j *journal) add(req Request, at time.Time) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.size >= journalMaxEntries {
		j.dropped.Add(1)
		return
	}
	k := journalKey{req.Namespace, req.Key}
	j.byKey[k] = append(j.byKey[k], journalEntry{req: req, at: at})
	j.size++
	j.pending.Store(int64(j.size))
}

// hasPending is the fast check of the decision path.
func (j *journal) hasPending() bool { return j != nil && j.pending.Load() > 0 }

// takeKey removes and returns the entries of one key.
func (j *journal) takeKey(namespace, key string) []journalEntry {
	j.mu.Lock()
	defer j.mu.Unlock()
	k := journalKey{namespace, key}
	es := j.byKey[k]
	delete(j.byKey, k)
	j.size -= len(es)
	j.pending.Store(int64(j.size))
	return es
}

// takeAll removes and returns every entry.
func (j *journal) takeAll() []journalEntry {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []journalEntry
	for k, es := range j.byKey {
		out = append(out, es...)
		delete(j.byKey, k)
	}
	j.size = 0
	j.pending.Store(0)
	return out
}

// putBack returns entries that could not be written, but those that left
// their longest window by now.
func (j *journal) putBack(es []journalEntry, now time.Time) {
	for _, e := range es {
		if now.Sub(e.at) >= longestWindow(e.req.Policies) {
			continue
		}
		j.mu.Lock()
		k := journalKey{e.req.Namespace, e.req.Key}
		j.byKey[k] = append(j.byKey[k], e)
		j.size++
		j.pending.Store(int64(j.size))
		j.mu.Unlock()
	}
}

// remove drops the entry of one request (a refund).
func (j *journal) remove(req Request) {
	j.mu.Lock()
	defer j.mu.Unlock()
	k := journalKey{req.Namespace, req.Key}
	es := j.byKey[k]
	for i, e := range es {
		if e.req.ID == req.ID {
			es = append(es[:i], es[i+1:]...)
			j.size--
			break
		}
	}
	if len(es) == 0 {
		delete(j.byKey, k)
	} else {
		j.byKey[k] = es
	}
	j.pending.Store(int64(j.size))
}

func longestWindow(ps []Policy) time.Duration {
	var w time.Duration
	for _, p := range ps {
		w = max(w, p.Window)
	}
	return w
}
