// Package memlog holds sliding-window logs in process memory: the
// mechanism of package memstore and of a limiter's local fallback. Times
// are microseconds; callers validate requests first.
package memlog

import (
	"sort"
	"sync"
	"sync/atomic"
)

// Policy is one window of a request: at most Limit units in any Window
// microseconds.
type Policy struct {
	Limit  int64
	Window int64
}

// Request is one call on a Table.
type Request struct {
	Namespace, Key string
	ID             uint64
	Cost           int64
	Policies       []Policy
}

// State is one policy's state after a decision; durations in
// microseconds.
type State struct {
	Allowed    bool
	Remaining  int64
	RetryAfter int64
	ResetAfter int64
}

// logKey names a log: the limiter's namespace and the identity, kept as
// two strings so that no key is concatenated per call.
type logKey struct{ namespace, key string }

// log is one identity's log: entries in time order, one per admitted
// request, with the running total of units so counts are two lookups.
type log struct {
	mu      sync.Mutex
	entries []entry
	expires int64       // when every entry has left the longest window
	dead    atomic.Bool // removed from the table; a caller holding it must look again
	// retain is the longest window a limiter of this log needs, until
	// retainUntil: a limiter with shorter windows keeps the entries it
	// needs meanwhile, as the Redis script does.
	retain, retainUntil int64
}

type entry struct {
	at   int64
	id   uint64
	cost int64
	cum  int64 // units recorded in this log up to and including this entry
}

func longestWindow(ps []Policy) int64 {
	var w int64
	for _, p := range ps {
		w = max(w, p.Window)
	}
	return w
}

// Take decides req at now: it admits the request only if every policy has
// room for its cost and then records it, and fills out (len(out) ==
// len(req.Policies)) with each policy's state. steady is, on a denial, how
// long until the first entry leaves any policy's window. Take does not
// look for an earlier call with the same ID: in one process a call is
// never sent twice.
func (t *Table) Take(now int64, req Request, out []State) (allowed bool, steady int64) {
	longest := longestWindow(req.Policies)
	l := t.lock(logKey{req.Namespace, req.Key}, true, now)
	defer l.mu.Unlock()

	retention := l.retention(now, longest)
	l.evict(now - retention)
	allowed = true
	for _, p := range req.Policies {
		if l.count(now-p.Window)+req.Cost > p.Limit {
			allowed = false
			break
		}
	}
	if allowed {
		l.add(now, req.ID, req.Cost)
	}
	l.expires = max(l.expires, now+retention)

	for i, p := range req.Policies {
		w := p.Window
		count := l.count(now - w)
		st := State{Allowed: true, Remaining: max(0, p.Limit-count)}
		if !allowed {
			if first := l.firstAfter(now - w); first >= 0 {
				if leave := l.entries[first].at + w - now; steady == 0 || leave < steady {
					steady = leave
				}
			}
			if count+req.Cost > p.Limit {
				st.Allowed = false
				st.RetryAfter = l.nthUnitAt(now-w, count+req.Cost-p.Limit) + w - now
			}
		}
		if n := len(l.entries); n > 0 && l.entries[n-1].at+w > now {
			st.ResetAfter = l.entries[n-1].at + w - now
		}
		out[i] = st
	}
	return allowed, steady
}

// Record writes an admission made elsewhere at time at, without a check:
// idempotent by ID, not written when it already left every window.
func (t *Table) Record(now, at int64, req Request) {
	longest := longestWindow(req.Policies)
	l := t.lock(logKey{req.Namespace, req.Key}, true, now)
	defer l.mu.Unlock()
	retention := l.retention(now, longest)
	l.evict(now - retention)
	l.expires = max(l.expires, now+retention)
	if l.find(req.ID) >= 0 || at <= now-longest {
		return
	}
	l.add(at, req.ID, req.Cost)
	l.expires = max(l.expires, at+longest)
}

// Refund removes the entry of req.ID with the cost recorded in it; a
// refund of an ID not in the log changes nothing.
func (t *Table) Refund(req Request) {
	l := t.lock(logKey{req.Namespace, req.Key}, false, 0)
	if l == nil {
		return
	}
	defer l.mu.Unlock()
	if i := l.find(req.ID); i >= 0 {
		cost := l.entries[i].cost
		l.entries = append(l.entries[:i], l.entries[i+1:]...)
		for j := i; j < len(l.entries); j++ {
			l.entries[j].cum -= cost
		}
	}
}

// Reset forgets the log of req's key.
func (t *Table) Reset(req Request) {
	key := logKey{req.Namespace, req.Key}
	if l := t.lock(key, false, 0); l != nil {
		l.dead.Store(true)
		t.remove(key, l)
		l.mu.Unlock()
	}
}

// retention returns how far back the log must keep entries at now for a
// limiter whose longest window is longest: a longer window some limiter
// used within that window wins.
func (l *log) retention(now, longest int64) int64 {
	if l.retain > longest && l.retainUntil > now {
		return l.retain
	}
	l.retain, l.retainUntil = longest, now+longest
	return longest
}

// firstAfter returns the index of the oldest entry stamped after cutoff,
// or -1.
func (l *log) firstAfter(cutoff int64) int {
	i := sort.Search(len(l.entries), func(i int) bool { return l.entries[i].at > cutoff })
	if i == len(l.entries) {
		return -1
	}
	return i
}

// evict drops the entries stamped at or before cutoff.
func (l *log) evict(cutoff int64) {
	i := sort.Search(len(l.entries), func(i int) bool { return l.entries[i].at > cutoff })
	if i > 0 {
		l.entries = l.entries[i:]
	}
}

// find returns the index of the entry of request id, or -1.
func (l *log) find(id uint64) int {
	for i := range l.entries {
		if l.entries[i].id == id {
			return i
		}
	}
	return -1
}

// count returns the units stamped after cutoff.
func (l *log) count(cutoff int64) int64 {
	n := len(l.entries)
	i := sort.Search(n, func(i int) bool { return l.entries[i].at > cutoff })
	if i == n {
		return 0
	}
	return l.entries[n-1].cum - (l.entries[i].cum - l.entries[i].cost)
}

// nthUnitAt returns the time of the k-th oldest unit stamped after cutoff
// (k >= 1): the entry whose leaving frees k units.
func (l *log) nthUnitAt(cutoff, k int64) int64 {
	n := len(l.entries)
	i := sort.Search(n, func(i int) bool { return l.entries[i].at > cutoff })
	if i == n {
		return cutoff
	}
	base := l.entries[i].cum - l.entries[i].cost
	j := i + sort.Search(n-i, func(j int) bool { return l.entries[i+j].cum-base >= k })
	if j == n {
		j = n - 1
	}
	return l.entries[j].at
}

// add records an entry, keeping time order even if a test clock went back.
func (l *log) add(at int64, id uint64, cost int64) {
	n := len(l.entries)
	var cum int64
	if n > 0 {
		cum = l.entries[n-1].cum
	}
	e := entry{at: at, id: id, cost: cost, cum: cum + cost}
	if n == 0 || l.entries[n-1].at <= at {
		l.entries = append(l.entries, e)
		return
	}
	i := sort.Search(n, func(i int) bool { return l.entries[i].at > at })
	l.entries = append(l.entries, entry{})
	copy(l.entries[i+1:], l.entries[i:])
	l.entries[i] = e
	for j := i; j < len(l.entries); j++ {
		prev := int64(0)
		if j > 0 {
			prev = l.entries[j-1].cum
		}
		l.entries[j].cum = prev + l.entries[j].cost
	}
}
