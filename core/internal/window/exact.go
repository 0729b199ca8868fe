package window

// entry is one admission in the exact log. Its cost is not stored: it is
// cum minus the previous entry's cum.
type entry struct {
	at  int64  // microseconds
	id  uint64 // request ID; 0 for an entry seeded from buckets
	cum int64  // units recorded up to and including this entry (wrapping)
}

// cursor remembers, for one window length, the position of the oldest
// entry still in that window, so that counting moves it forward a little
// per decision instead of searching.
type cursor struct {
	window int64
	pos    int
}

// maxCursors bounds the windows an exact log keeps a cursor for; a
// further window takes the place of one in turn.
const maxCursors = 8

// minRing is the smallest capacity of an exact log's ring.
const minRing = 4

// exactLog is the exact model: one entry per admission in a ring buffer,
// oldest first, positions counted from the log's creation so that cursors
// stay valid as the ring wraps and grows.
//
// The fields a decision reads come first (see Log). Whether it is in
// use is its Log's exactLive.
type exactLog struct {
	ring       []entry // capacity a power of two; nil until first use
	head, tail int     // entries occupy positions [head, tail)
	base       int64   // cum before head: the cum of the last evicted entry
	// total is the cum of the newest entry (base when there is none) and
	// newest its time: kept here so that a decision reads neither from
	// the ring, whose newest line is then only written.
	total, newest int64
	// retain is the longest exact window a limiter of this log needs,
	// until retainUntil.
	retain, retainUntil int64
	cursors             []cursor
	next                int // cursor slot to replace next
}

func (x *exactLog) get(pos int) *entry { return &x.ring[pos&(len(x.ring)-1)] }

// cumBefore returns the units recorded before position pos.
func (x *exactLog) cumBefore(pos int) int64 {
	switch {
	case pos <= x.head:
		return x.base
	case pos >= x.tail:
		return x.total
	}
	return x.get(pos - 1).cum
}

func (x *exactLog) len() int { return x.tail - x.head }

// costAt returns the cost of the entry at pos.
func (x *exactLog) costAt(pos int) int64 { return x.get(pos).cum - x.cumBefore(pos) }

// evict drops the entries stamped at or before cutoff.
func (x *exactLog) evict(cutoff int64) {
	for x.head < x.tail {
		e := x.get(x.head)
		if e.at > cutoff {
			return
		}
		x.base = e.cum
		x.head++
	}
}

// search returns the first position in [lo, hi) whose entry is stamped
// after cutoff, or hi.
func (x *exactLog) search(lo, hi int, cutoff int64) int {
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if x.get(m).at > cutoff {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo
}

// seek returns the position of the oldest entry stamped after now-w,
// moving w's cursor there: amortised O(1) while time moves forward.
func (x *exactLog) seek(w, cutoff int64) int {
	for i := range x.cursors {
		c := &x.cursors[i]
		if c.window != w {
			continue
		}
		pos := min(max(c.pos, x.head), x.tail)
		for pos < x.tail && x.get(pos).at <= cutoff {
			pos++
		}
		for pos > x.head && x.get(pos-1).at > cutoff {
			pos--
		}
		c.pos = pos
		return pos
	}
	pos := x.search(x.head, x.tail, cutoff)
	if len(x.cursors) < maxCursors {
		x.cursors = append(x.cursors, cursor{w, pos})
	} else {
		x.cursors[x.next] = cursor{w, pos}
		x.next = (x.next + 1) % maxCursors
	}
	return pos
}

// grow makes room for one more entry.
func (x *exactLog) grow() {
	if x.len() < len(x.ring) {
		return
	}
	n := max(minRing, 2*len(x.ring))
	ring := make([]entry, n)
	for p := x.head; p < x.tail; p++ {
		ring[p&(n-1)] = *x.get(p)
	}
	x.ring = ring
}

// insert records an admission in time order (after entries of the same
// time): an append unless at is older than the newest entry.
func (x *exactLog) insert(at int64, id uint64, cost int64) {
	x.grow()
	x.total += cost
	if x.head == x.tail || x.newest <= at {
		*x.get(x.tail) = entry{at: at, id: id, cum: x.total}
		x.tail++
		x.newest = at
		return
	}
	i := x.search(x.head, x.tail, at)
	for p := x.tail; p > i; p-- {
		e := *x.get(p - 1)
		e.cum += cost
		*x.get(p) = e
	}
	*x.get(i) = entry{at: at, id: id, cum: x.cumBefore(i) + cost}
	x.tail++ // the newest entry stays the newest
	for k := range x.cursors {
		if x.cursors[k].pos > i {
			x.cursors[k].pos++
		}
	}
}

// find returns the position of request id's entry, or -1. ID 0 is never
// found: seeded entries carry it.
func (x *exactLog) find(id uint64) int {
	if id == 0 {
		return -1
	}
	for p := x.head; p < x.tail; p++ {
		if x.get(p).id == id {
			return p
		}
	}
	return -1
}

// remove deletes the entry at pos.
func (x *exactLog) remove(pos int) {
	cost := x.costAt(pos)
	for p := pos; p+1 < x.tail; p++ {
		e := *x.get(p + 1)
		e.cum -= cost
		*x.get(p) = e
	}
	x.tail--
	x.total -= cost
	if pos == x.tail && x.tail > x.head {
		x.newest = x.get(x.tail - 1).at
	}
	for k := range x.cursors {
		if x.cursors[k].pos > pos {
			x.cursors[k].pos--
		}
	}
}

// nth returns the position of the entry holding the k-th unit (k >= 1)
// counted from position from: the entry whose leaving frees k units. As
// every entry costs at least 1, it is within k positions of from.
func (x *exactLog) nth(from int, k int64) int {
	base := x.cumBefore(from)
	lo, hi := from, x.tail
	if k < int64(hi-lo) {
		hi = lo + int(k)
	}
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if x.get(m).cum-base >= k {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return min(lo, x.tail-1)
}

// reset forgets every entry and cursor but keeps the ring's memory.
func (x *exactLog) reset() {
	ring := x.ring
	cursors := x.cursors[:0]
	*x = exactLog{ring: ring, cursors: cursors}
}

// bytes is the memory the exact log holds beyond its own struct.
func (x *exactLog) bytes() int { return cap(x.ring)*24 + cap(x.cursors)*16 }
