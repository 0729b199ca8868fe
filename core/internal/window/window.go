// Package window holds the per-identity state of slidelog's in-memory
// store and of the limiter's local fallback: a [Log] per identity decides
// requests against one or more rolling-window policies at a cost per
// decision that does not grow with the number of admissions in the window.
//
// Times and durations are microseconds, as the stores keep them. A Log is
// not safe for concurrent use: the store locks per key.
//
// Two models share a Log, chosen per policy by [Policy.Precision]:
//
//   - Exact (Precision 0): one entry per admission (time, request ID,
//     cost) in a ring buffer, oldest first: one word per entry while every
//     admission costs 1 and carries the log's next ID (as a request given
//     no ID of its own does), three otherwise (see exactLog). Each window
//     length keeps a cursor on its oldest entry, moved forward as time
//     passes, so a decision against k policies costs O(k) amortised. The
//     ring holds the entries of the longest exact window, which admissions
//     keep within that window's limit (Record, which checks nothing, may
//     exceed it).
//   - Bucketed (Precision P > 0): admissions are counted in buckets of
//     width P aligned to the Unix epoch (bucket floor(t/P)), and a bucket
//     counts while its end, (b+1)·P, is after now-W. The count is never
//     below the exact one, so no rolling window ever admits more than the
//     limit. Counters are kept as running sums in a ring of about W/P+1
//     buckets per precision, whatever the limit.
//
// A request may mix both models; every admission is recorded in every
// structure the Log holds, and a request is admitted only if every policy
// has room (all or nothing).
//
// Take does not detect replays: a Take with an ID already recorded is
// decided and recorded again. Retries only happen across a network, so a
// memory store need not look for them; [Log.Recorded] tells, by a scan,
// when a caller must know. Record and Refund find admissions by ID: in the
// exact ring by its position when the log gave the IDs in turn, otherwise
// by a scan, and for the bucketed model in a set of the last [RecentIDs]
// admissions (see Refund for what that bounds). A request of ID 0 is
// given the log's next ID on admission ([Decision].ID).
package window

import (
	"math/rand/v2"
	"slices"
	"unsafe"
)

// Policy is one rolling-window limit: at most Limit units in any window of
// Window microseconds. Precision is 0 for the exact model, otherwise the
// bucket width in microseconds. The caller validates policies: Limit >= 1,
// Window >= 1, 0 <= Precision <= Window.
type Policy struct {
	Limit     int64
	Window    int64
	Precision int64
}

// State is one policy's state after a decision, durations in microseconds.
type State struct {
	// Allowed reports whether the policy had room for the request's cost.
	Allowed bool
	// Remaining is the units still free after the decision (before it, on
	// a denial, since a denial records nothing), at least 0.
	Remaining int64
	// RetryAfter is, when the policy had no room, exactly how long until
	// enough units leave the window for the cost to fit; otherwise 0.
	RetryAfter int64
	// ResetAfter is how long until the window holds nothing, at least 0.
	ResetAfter int64
}

// Decision is the outcome of Take.
type Decision struct {
	// Allowed reports whether every policy had room and the request was
	// recorded.
	Allowed bool
	// Steady is, on a denial, how long until the first admission (or
	// bucket) leaves any policy's window: until then every State of the
	// denial holds but for the elapsed time. Zero when allowed.
	Steady int64
	// ID is, on an admission, the request ID it was recorded under: the
	// request's, or, for a request of ID 0, the log's next (newID).
	ID uint64
}

// newID returns a request ID for an admission on l, which the caller
// records at once (the narrow exact log names its entries by the log's
// last IDs: see exactLog): unique among the IDs l has given, never 0. A
// log's IDs run on from a random start, so that those of two logs
// (another identity's, or the next log of the same identity once this
// one is dropped) coincide only by a chance of about one in 2^64 per pair
// of ranges; a copy made by CopyFrom draws its own. It costs an addition
// where a random draw per request costs a draw.
func (l *Log) newID() uint64 {
	if l.ids+1 > 1 { // neither the first ID nor a wrap: small enough to inline
		l.ids++
		return l.ids
	}
	return l.newIDSlow()
}

// newIDSlow is newID for the first ID and on a wrap.
func (l *Log) newIDSlow() uint64 {
	if l.ids == 0 {
		l.ids = rand.Uint64()
	}
	l.ids++
	if l.ids == 0 {
		l.ids = rand.Uint64() | 1 // wrapped: a fresh start
	}
	return l.ids
}

// RecentIDs is how many of its latest admissions a Log with bucketed
// policies remembers by ID, for Refund and Record's idempotency.
const RecentIDs = 16

// The recent ring's index wraps with a mask: RecentIDs is a power of two.
var _ [0]struct{} = [RecentIDs & (RecentIDs - 1)]struct{}{}

// recent is an admission remembered by ID for the bucketed model.
type recent struct {
	id   uint64
	at   int64
	cost int64 // 0 once refunded
	seq  uint64
}

// Log is one identity's state. The zero Log is empty and ready to use.
//
// A Log must not be copied once used: it keeps its first bucket ring in
// itself. Its fields are laid out for the two common decisions (takeExact,
// takeBucket): on a table of logs larger than the cache, each cache line a
// decision touches is a miss of its own, so the fields each reads lie
// together. Everything the exact decision reads comes first, in the
// Log's first ExactDecisionBytes (memlog.TestLogLayout holds them within
// its log's first 256 bytes), then the bucketed decision's fields.
type Log struct {
	_ noCopy
	// exactLive is set while the exact log is in use.
	exactLive bool
	next      uint8 // slot of recent to write next
	// bucketed tells whether the log has bucket rings (len(rings) > 0),
	// so that an exact decision reads it here, beside the fields it reads,
	// rather than from rings. setRings keeps it.
	bucketed bool
	ids      uint64 // the last ID newID returned; 0 before the first
	exact    exactLog
	// expires is when the bucket rings' admissions and the retentions
	// set by the general path lapse; Expires adds the exact log's
	// retention, which takeExact alone extends.
	expires int64
	rings   []bucketRing // ring0[:n] while it has room
	recent  []recent     // ring of up to RecentIDs, growing with the first admissions (remember)
	seq     uint64       // admissions recorded so far
	ring0   [1]bucketRing
}

// ExactDecisionBytes is how many of a Log's first bytes an exact decision
// on a log of that policy alone (takeExact) reads and writes, the ring's
// entries aside: up to and including the exact log's ends (first, last).
const ExactDecisionBytes = unsafe.Offsetof(Log{}.exact) + unsafe.Offsetof(exactLog{}.last) + unsafe.Sizeof(exactLog{}.last)

// setRings sets the log's bucket rings, and bucketed with them.
func (l *Log) setRings(rings []bucketRing) {
	l.rings, l.bucketed = rings, len(rings) > 0
}

// ring returns the bucket ring of precision p, or nil.
func (l *Log) ring(p int64) *bucketRing {
	for i := range l.rings {
		if l.rings[i].p == p {
			return &l.rings[i]
		}
	}
	return nil
}

// prepare brings the log to now for the given policies: it updates each
// structure's retention (the longest window a limiter used within that
// window wins), makes the structures the policies need, drops those no
// limiter needs any more, and evicts what left every window.
func (l *Log) prepare(now int64, policies []Policy) {
	var exactW int64
	for _, p := range policies {
		if p.Precision == 0 {
			exactW = max(exactW, p.Window)
		}
	}
	x := &l.exact
	if exactW > 0 {
		if !l.exactLive {
			l.newExact()
		}
		x.retain, x.retainUntil = retention(x.retain, x.retainUntil, exactW, now)
	} else if l.exactLive && x.retainUntil <= now {
		l.exactLive = false
		x.reset()
	}
	// Rings the policies use, then rings nobody uses any more.
	for _, p := range policies {
		if p.Precision == 0 {
			continue
		}
		w := p.Window
		for _, q := range policies {
			if q.Precision == p.Precision {
				w = max(w, q.Window)
			}
		}
		r := l.ring(p.Precision)
		if r == nil {
			r = l.newRing(now, p.Precision, w)
		}
		r.retain, r.retainUntil = retention(r.retain, r.retainUntil, w, now)
	}
	for i := 0; i < len(l.rings); i++ {
		if r := &l.rings[i]; r.retainUntil <= now && !uses(policies, r.p) {
			last := len(l.rings) - 1
			l.rings[i], l.rings[last] = l.rings[last], l.rings[i]
			l.rings[last].reset()
			l.setRings(l.rings[:last])
			i--
		}
	}
	if l.exactLive {
		x.evict(now - x.retain)
	}
	for i := range l.rings {
		r := &l.rings[i]
		r.trim(r.lowest(now, r.retain))
	}
	for _, p := range policies {
		l.expires = max(l.expires, now+p.Window)
	}
}

// retention returns a structure's retention once a limiter used window w
// at now, when it kept retain microseconds until the time until: w from
// now on, unless a longer retention is in force, which then lasts at
// least until w from now. Every window a limiter used thus keeps its
// history until it has passed, however the limiters' windows alternate
// (a longer one may outlast the shorter one it covers: keeping more is
// safe).
func retention(retain, until, w, now int64) (int64, int64) {
	if longerKept(retain, until, w, now) {
		return retain, max(until, now+w)
	}
	return w, now + w
}

// longerKept reports whether a structure kept for retain microseconds
// until the time until keeps more than window w at now: a longer
// retention, set by another limiter, that is still in force.
func longerKept(retain, until, w, now int64) bool { return retain > w && until > now }

// noCopy makes go vet's copylocks check report a copied Log.
type noCopy struct{}

func (*noCopy) Lock()   {}
func (*noCopy) Unlock() {}

func uses(policies []Policy, precision int64) bool {
	for _, p := range policies {
		if p.Precision == precision {
			return true
		}
	}
	return false
}

// newExact starts the exact log, seeded from the bucket ring that keeps
// the longest history, if there is one: each bucket's units become one
// entry stamped at the bucket's last microsecond, which counts at least as
// long as the admissions it stands for. That is so even for a bucket
// after now, which a Record stamped ahead of the log's clock made (a
// remote clock ahead of this one, or a clock set back): stamped at now,
// its entry would leave the window before the admissions it stands for.
func (l *Log) newExact() {
	x := &l.exact
	l.exactLive = true
	r := longestRing(l.rings)
	if r == nil {
		return
	}
	prev := r.base
	for b := r.first; b <= r.last; b++ {
		c := *r.slot(b)
		if c-prev > 0 {
			x.insert((b+1)*r.p-1, 0, c-prev, l.ids, l.ids)
		}
		prev = c
	}
}

// longestRing returns the ring of rings that keeps the longest history,
// or nil when there is none.
func longestRing(rings []bucketRing) *bucketRing {
	var r *bucketRing
	for i := range rings {
		if r == nil || rings[i].retain > r.retain {
			r = &rings[i]
		}
	}
	return r
}

// newRing adds a bucket ring of precision p for windows up to w, seeded
// from whichever of the exact log (if live) and the other rings keeps the
// longest history: each admission of the exact log, or each bucket's
// units placed in the bucket holding its last microsecond.
func (l *Log) newRing(now, p, w int64) *bucketRing {
	lo := floorDiv(now-w, p)
	// The ring starts with room for a few buckets and grows to the
	// window's (span) as buckets are used: most identities are seen for
	// less than a window, and a ring of W/P buckets each would hold
	// their memory for nothing.
	n := min((w+p-1)/p+1, minBuckets)
	var cum []int64
	if cap(l.rings) > len(l.rings) {
		cum = l.rings[:len(l.rings)+1][len(l.rings)].cum // memory of a dropped ring
	}
	if int64(cap(cum)) >= n {
		cum = cum[:cap(cum)]
		clear(cum)
	} else {
		cum = make([]int64, n)
	}
	if l.rings == nil {
		l.rings = l.ring0[:0]
	}
	l.setRings(append(l.rings, bucketRing{p: p, cum: cum, first: lo, last: lo - 1, bornSeq: l.seq}))
	if &l.rings[0] != &l.ring0[0] {
		l.ring0[0] = bucketRing{} // moved out: hold no counters the rings no longer use
	}
	r := &l.rings[len(l.rings)-1]
	o := longestRing(l.rings[:len(l.rings)-1])
	if x := &l.exact; l.exactLive && (o == nil || x.retain >= o.retain) {
		for pos := x.head; pos < x.tail; pos++ {
			// No further ahead than now+w, as record places it.
			if b := floorDiv(min(x.at(pos), now+w), p); b >= lo {
				r.add(b, x.costAt(pos))
			}
		}
	} else if o != nil {
		// An admission the exact log holds now may be missing from o
		// (see Refund); those it records from now on are not.
		r.ringSeeded = l.exactLive && x.tail > x.head
		prev := o.base
		for b := o.first; b <= o.last; b++ {
			c := *o.slot(b)
			if c-prev > 0 {
				if nb := floorDiv((b+1)*o.p-1, p); nb >= lo {
					r.add(nb, c-prev)
				}
			}
			prev = c
		}
	}
	return r
}

// record writes an admission into every structure the log holds: into
// the exact log unless at has left its retention, into each ring unless
// its bucket has left the ring's. It reports whether anything was written.
func (l *Log) record(now, at int64, id uint64, cost int64, prev uint64) bool {
	wrote := false
	if x := &l.exact; l.exactLive && at > now-x.retain {
		x.insert(at, id, cost, prev, l.ids)
		wrote = true
	}
	// An admission stamped after now plus a ring's retention (a store
	// whose clock is behind the recorder's) counts in the rings from that
	// bucket: it still counts for a window and more, and no ring makes
	// room for every bucket up to a stamp any distance ahead.
	ringAt := at
	for i := range l.rings {
		ringAt = min(ringAt, now+l.rings[i].retain)
	}
	inRing := false
	for i := range l.rings {
		r := &l.rings[i]
		if b := floorDiv(ringAt, r.p); b >= r.lowest(now, r.retain) {
			r.add(b, cost)
			inRing = true
		}
	}
	if inRing {
		l.seq++
		l.remember(recent{id: id, at: ringAt, cost: cost, seq: l.seq})
		wrote = true
	}
	if wrote {
		for _, r := range l.rings {
			l.expires = max(l.expires, (floorDiv(at, r.p)+1)*r.p+r.retain)
		}
		if l.exactLive {
			l.expires = max(l.expires, at+l.exact.retain)
		}
	}
	return wrote
}

// count returns the units counted against policy p at now, and for the
// exact model the position of the oldest entry in its window, for the
// bucketed model the oldest bucket that counts.
func (l *Log) count(now int64, p Policy) (units int64, from int64) {
	if p.Precision == 0 {
		x := &l.exact
		pos := x.seek(p.Window, now-p.Window)
		return x.cumBefore(x.tail) - x.cumBefore(pos), int64(pos)
	}
	r := l.ring(p.Precision)
	lo := r.lowest(now, p.Window)
	return r.top() - r.through(lo-1), lo
}

// Take decides a request of cost units (1 <= cost <= every limit) at now
// against policies, recording it under id when every policy has room.
// It writes the state of policies[i] to out[i]; out must be at least as
// long as policies. On a warm log it allocates nothing.
func (l *Log) Take(now int64, id uint64, cost int64, policies []Policy, out []State) Decision {
	return l.take(now, id, cost, policies, out, true)
}

// Peek is Take without recording: the states a request of cost would get
// now, Remaining being the units free before it. It evicts what left the
// windows, as Take does, and changes no count.
func (l *Log) Peek(now int64, cost int64, policies []Policy, out []State) Decision {
	return l.take(now, 0, cost, policies, out, false)
}

// TakeOne is Take on the one policy p for a request of ID 0 (an
// admission is given the log's next ID, Decision.ID): it returns p's
// state and the decision. A caller deciding on one policy uses it, so
// that neither the policy nor its state goes through a slice.
func (l *Log) TakeOne(now int64, cost int64, p Policy) (out State, d Decision) {
	if l.exactOnly(now, p) {
		d = l.takeExact(now, 0, cost, p, &out)
		return out, d
	}
	ps := [1]Policy{p}
	d = l.take(now, 0, cost, ps[:], unsafe.Slice(&out, 1), true)
	return out, d
}

// exactOnly reports whether a decision on the one exact policy p at now
// may go to takeExact: the log holds the exact model only, whose
// retention is p's window.
func (l *Log) exactOnly(now int64, p Policy) bool {
	x := &l.exact
	return p.Precision == 0 && l.exactLive && !l.bucketed && !longerKept(x.retain, x.retainUntil, p.Window, now)
}

func (l *Log) take(now int64, id uint64, cost int64, policies []Policy, out []State, record bool) Decision {
	if record && len(policies) == 1 {
		p := &policies[0]
		if l.exactOnly(now, *p) {
			return l.takeExact(now, id, cost, *p, &out[0])
		} else if p.Precision > 0 && len(l.rings) == 1 && !l.exactLive {
			if r := &l.rings[0]; r.p == p.Precision && !longerKept(r.retain, r.retainUntil, p.Window, now) {
				return l.takeBucket(now, id, cost, *p, &out[0])
			}
		}
	}
	l.prepare(now, policies)
	out = out[:len(policies)]
	allowed := true
	var from [8]int64 // count's second result per policy, for the first 8
	for i, p := range policies {
		units, f := l.count(now, p)
		if i < len(from) {
			from[i] = f
		}
		out[i] = State{Allowed: units+cost <= p.Limit, Remaining: units}
		allowed = allowed && out[i].Allowed
	}
	var recorded uint64 // the admission's ID
	if allowed && record {
		prev := l.ids
		if id == 0 {
			id = l.newID()
		}
		l.record(now, now, id, cost, prev)
		recorded = id
	}
	var steady int64
	for i, p := range policies {
		st := &out[i]
		if allowed && record {
			st.Remaining += cost
		}
		units := st.Remaining
		st.Remaining = max(0, p.Limit-units)
		if p.Precision == 0 {
			x := &l.exact
			pos := x.seek(p.Window, now-p.Window)
			if !allowed && pos < x.tail {
				steady = minPositive(steady, x.at(pos)+p.Window-now)
				if !st.Allowed {
					st.RetryAfter = x.at(x.nth(pos, units+cost-p.Limit)) + p.Window - now
				}
			}
			if x.tail > x.head {
				st.ResetAfter = max(0, x.newest+p.Window-now)
			}
			continue
		}
		r := l.ring(p.Precision)
		lo := from[min(i, len(from)-1)]
		if i >= len(from) {
			lo = r.lowest(now, p.Window)
		}
		if !allowed && units > 0 {
			base := r.through(lo - 1)
			oldest := r.search(lo, base, 1)
			steady = minPositive(steady, (oldest+1)*r.p+p.Window-now)
			if !st.Allowed {
				if k := units + cost - p.Limit; k > 1 {
					oldest = r.search(oldest, base, k)
				}
				st.RetryAfter = (oldest+1)*r.p + p.Window - now
			}
		}
		if b, ok := r.newest(); ok {
			st.ResetAfter = max(0, (b+1)*r.p+p.Window-now)
		}
	}
	return Decision{Allowed: allowed, Steady: steady, ID: recorded}
}

// takeExact is Take for the common case: one exact policy p on a log
// holding the exact model only, whose retention is p's window (no longer
// window of another limiter is retained). It does what prepare and Take
// do then, without their loops: the eviction leaves exactly p's window,
// so the oldest entry in it is the head and no cursor is needed.
func (l *Log) takeExact(now int64, id uint64, cost int64, p Policy, out *State) Decision {
	x := &l.exact
	x.retain, x.retainUntil = p.Window, now+p.Window
	// retainUntil now counts in Expires. The eviction of a narrow ring
	// is written in line: evict, with both forms, is too large to inline.
	if cutoff := now - p.Window; x.narrow() {
		x.evictNarrow(cutoff)
	} else {
		x.evictWide(cutoff)
	}
	units := x.total - x.base
	allowed := units+cost <= p.Limit
	*out = State{Allowed: allowed}
	if !allowed {
		out.Remaining = max(0, p.Limit-units)
		if x.tail == x.head {
			return Decision{}
		}
		out.ResetAfter = max(0, x.newest+p.Window-now)
		out.RetryAfter = x.at(x.nth(x.head, units+cost-p.Limit)) + p.Window - now
		return Decision{Steady: x.at(x.head) + p.Window - now}
	}
	prev := l.ids
	if id == 0 {
		id = l.newID()
	}
	if cost != 1 || id != l.ids || !x.push(now, id, prev) {
		x.insert(now, id, cost, prev, l.ids)
	}
	out.Remaining = max(0, p.Limit-units-cost)
	out.ResetAfter = max(0, x.newest+p.Window-now)
	return Decision{Allowed: true, ID: id}
}

// takeBucket is Take for the other common case: one bucketed policy p on
// a log holding p's bucket ring only, whose retention is p's window. It
// does what prepare, Take and record do then, without their loops: the
// trim leaves exactly p's window in the ring, so every unit the ring
// holds counts, and an admission's bucket is the newest.
func (l *Log) takeBucket(now int64, id uint64, cost int64, p Policy, out *State) Decision {
	r := &l.rings[0]
	r.retain, r.retainUntil = p.Window, now+p.Window
	lo := r.lowest(now, p.Window)
	r.trim(lo)
	l.expires = max(l.expires, now+p.Window)
	units := r.top() - r.base
	allowed := units+cost <= p.Limit
	*out = State{Allowed: allowed}
	if allowed {
		if id == 0 {
			id = l.newID()
		}
		b := floorDiv(now, r.p)
		r.add(b, cost)
		l.seq++
		l.remember(recent{id: id, at: now, cost: cost, seq: l.seq})
		end := (b+1)*r.p + p.Window // when the admission's bucket stops counting
		l.expires = max(l.expires, end)
		out.Remaining = max(0, p.Limit-units-cost)
		out.ResetAfter = max(0, end-now)
		return Decision{Allowed: true, ID: id}
	}
	// A denial: units+cost > p.Limit while cost <= p.Limit, so units > 0.
	out.Remaining = max(0, p.Limit-units)
	oldest := r.search(lo, r.base, 1)
	steady := (oldest+1)*r.p + p.Window - now
	if k := units + cost - p.Limit; k > 1 {
		oldest = r.search(oldest, r.base, k)
	}
	out.RetryAfter = (oldest+1)*r.p + p.Window - now
	if b, ok := r.newest(); ok {
		out.ResetAfter = max(0, (b+1)*r.p+p.Window-now)
	}
	return Decision{Steady: steady}
}

func minPositive(a, b int64) int64 {
	if a == 0 || b < a {
		return b
	}
	return a
}

// remember puts an admission in the ring of recent IDs, which grows to
// RecentIDs with the first admissions, and then takes the place of the
// oldest.
func (l *Log) remember(a recent) {
	if int(l.next) < len(l.recent) {
		l.recent[l.next] = a
	} else {
		l.growRecent(a)
	}
	// RecentIDs is a power of two
	l.next = (l.next + 1) & (RecentIDs - 1)
}

// growRecent appends a to the ring of recent IDs, which has room for fewer
// than RecentIDs: a key seen a few times keeps a few.
func (l *Log) growRecent(a recent) {
	if l.recent == nil {
		l.recent = make([]recent, 0, 4)
	}
	l.recent = append(l.recent, a)
}

// Record writes an admission decided elsewhere, stamped at (microseconds),
// of cost units, without checking any limit; policies are the limiter's,
// for retention. It is idempotent by id as far as the log can tell (see
// Refund): an ID it still finds is not written again. It reports whether
// it wrote: an admission that has already left every window is not.
func (l *Log) Record(now, at int64, id uint64, cost int64, policies []Policy) bool {
	l.prepare(now, policies)
	if l.Recorded(id) {
		return false
	}
	return l.record(now, at, id, cost, l.ids)
}

// Recorded reports whether the log holds an admission of request id: in
// the exact log, or among the last RecentIDs admissions for buckets. It
// scans, so it is for rare paths.
func (l *Log) Recorded(id uint64) bool {
	if l.exact.find(id, l.ids) >= 0 {
		return true
	}
	return l.findRecent(id) >= 0
}

func (l *Log) findRecent(id uint64) int {
	if id == 0 {
		return -1
	}
	for i := range l.recent {
		if l.recent[i].id == id && l.recent[i].cost > 0 {
			return i
		}
	}
	return -1
}

// Refund removes the admission of request id with the cost it was recorded
// with, and reports whether it found it. A second refund of the same ID
// finds nothing and changes nothing.
//
// The exact log finds any admission it holds. Buckets hold no IDs: an
// admission is found in the exact log or among the last RecentIDs
// admissions, and its cost is subtracted from its bucket if that still
// counts. An admission found in neither stays counted until its bucket
// leaves the window: an over-count, which delays admissions but never
// admits more than the limit; an under-count, which would, cannot happen,
// since a refund is subtracted at most once and only from a bucket known
// to hold it. Record's idempotency is bounded alike: an ID recorded again
// after it left the recent set is counted twice, an over-count.
func (l *Log) Refund(id uint64) bool {
	if id == 0 {
		return false
	}
	var at, cost int64
	var seq uint64 // 0: not in the recent set
	inExact := false
	if pos := l.exact.find(id, l.ids); pos >= 0 {
		at, cost, inExact = l.exact.at(pos), l.exact.costAt(pos), true
		l.exact.remove(pos, l.ids)
	}
	if i := l.findRecent(id); i >= 0 {
		at, cost, seq = l.recent[i].at, l.recent[i].cost, l.recent[i].seq
		l.recent[i].cost = 0
	}
	if !inExact && seq == 0 {
		return false
	}
	// A ring holds the admission in its bucket if it was made before the
	// admission was recorded, or was seeded from the exact log holding it
	// (an entry found by ID was in the exact log all along). Otherwise it
	// may hold it elsewhere or not at all, and keeps counting it: so does
	// a ring seeded from another ring, which may have let the admission go
	// while the exact log kept it, unless the recent set tells that the
	// admission came after the ring.
	for i := range l.rings {
		if r := &l.rings[i]; seq > r.bornSeq || inExact && !r.ringSeeded {
			r.sub(floorDiv(at, r.p), cost)
		}
	}
	return true
}

// CopyFrom makes l, a Log not used yet, hold what src holds: the same
// admissions, counts, retentions and recent IDs, in memory of its own.
func (l *Log) CopyFrom(src *Log) {
	l.expires, l.exactLive, l.next, l.seq = src.expires, src.exactLive, src.next, src.seq
	l.ids = 0 // IDs of its own (newID)
	l.recent = slices.Clone(src.recent)
	x, y := &l.exact, &src.exact
	x.buf, x.cursors = slices.Clone(y.buf), slices.Clone(y.cursors)
	x.head, x.tail, x.base, x.total, x.newest = y.head, y.tail, y.base, y.total, y.newest
	x.retain, x.retainUntil, x.next = y.retain, y.retainUntil, y.next
	x.fi, x.nFirst, x.nLast, x.first, x.last = y.fi, y.nFirst, y.nLast, y.first, y.last
	x.widen(src.ids) // its entries' IDs are src's, not those l will give
	switch len(src.rings) {
	case 0:
		l.setRings(nil)
	case 1:
		l.setRings(l.ring0[:1])
	default:
		l.setRings(make([]bucketRing, len(src.rings)))
	}
	for i := range src.rings {
		l.rings[i] = src.rings[i]
		l.rings[i].cum = slices.Clone(src.rings[i].cum)
	}
}

// Expires returns when (microseconds) every admission has left the longest
// window a limiter used and that retention has lapsed: from then the log
// decides like an empty one and may be dropped.
func (l *Log) Expires() int64 {
	if l.exactLive {
		return max(l.expires, l.exact.retainUntil)
	}
	return l.expires
}

// Reset forgets every admission, keeping the memory for reuse.
func (l *Log) Reset() {
	l.exactLive = false
	l.exact.reset()
	for i := range l.rings {
		l.rings[i].reset()
	}
	l.setRings(l.rings[:0])
	clear(l.recent)
	l.next, l.seq, l.expires = 0, 0, 0
}

// Bytes returns the memory the log holds, its own struct included, for
// memory figures.
func (l *Log) Bytes() int {
	n := int(unsafe.Sizeof(*l)) + l.exact.bytes() + cap(l.recent)*int(unsafe.Sizeof(recent{}))
	if cap(l.rings) > len(l.ring0) {
		n += cap(l.rings) * int(unsafe.Sizeof(bucketRing{}))
	}
	for _, r := range l.rings[:cap(l.rings)] {
		n += r.bytes()
	}
	return n
}
