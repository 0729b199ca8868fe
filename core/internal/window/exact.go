package window

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

// minRing is the smallest capacity of an exact log's ring, in entries.
const minRing = 4

// ends is how many entries each end of a narrow ring keeps in its
// exactLog (first, last), a power of two: four, half a cache line each,
// measured as fast as eight on BenchmarkAdmitWithHistory in a smaller
// log (docs/benchmarks.md).
const ends = 4

// wideWords is how many words an entry takes in the wide form.
const wideWords = 3

// exactLog is the exact model: one entry per admission in a ring buffer,
// oldest first, positions counted from the log's creation so that cursors
// stay valid as the ring wraps and grows.
//
// An entry is an admission's time, its request ID and its cost, and the
// ring (buf) holds the entries in one of two forms, told apart by the
// ring's length:
//
//   - narrow, a power of two of words (or none): one word per entry, its
//     time. Every entry costs 1, and the entries' IDs are the log's latest
//     IDs in order: the newest entry's is the last ID the log gave
//     (Log.newID), the one before it that ID less one, and so on. An
//     admission of cost 1 decided on the log appends so, with the next ID
//     of the log: the common case, which keeps a third of the memory of
//     the wide form and touches fewer lines of it.
//   - wide, three times a power of two of words: three words per entry,
//     its time, its ID (0 for an entry seeded from buckets) and the running
//     sum of costs up to and including it (wrapping), so that its cost is
//     its sum less the sum of the entry before it.
//
// A narrow log turns wide (widen) before an entry the narrow form cannot
// hold (a cost other than 1, an ID the log did not give in turn, an entry
// out of time order) and before a removal; it turns narrow again on an
// admission that finds it empty.
//
// The fields a decision reads come first (see Log). Whether it is in
// use is its Log's exactLive.
type exactLog struct {
	head, tail int   // entries occupy positions [head, tail)
	base       int64 // units recorded before head: the sum of the last evicted entry
	// total is the units recorded up to the newest entry (base when there
	// is none) and newest its time: kept here so that a decision reads
	// neither from the ring, whose newest line is then only written.
	total, newest int64
	// retain is the longest exact window a limiter of this log needs,
	// until retainUntil.
	retain, retainUntil int64
	buf                 []int64 // the ring, in either form; nil until first use
	// The ends of a narrow ring, kept here so that a steady admission,
	// which evicts the oldest entry and appends one, touches the ring's
	// lines once every ends admissions instead of two lines each:
	// first[fi:nFirst] copies the entries at positions head on, which buf
	// holds too (only evictNarrow, which alone moves head on a narrow
	// ring, reads it); last[:nLast] holds the newest entries, positions
	// [tail-nLast, tail), whose slots in buf are not written yet (at reads
	// them there; flush writes them when they end a group of ends slots,
	// and resize moves them). Both are empty while the ring is wide.
	fi, nFirst, nLast uint8
	next              uint8 // cursor slot to replace next
	first, last       [ends]int64
	cursors           []cursor
}

// narrow reports whether the ring is in the narrow form.
func (x *exactLog) narrow() bool { n := len(x.buf); return n&(n-1) == 0 }

// size returns how many entries the ring has room for.
func (x *exactLog) size() int {
	if x.narrow() {
		return len(x.buf)
	}
	return len(x.buf) / wideWords
}

// wide returns the index in a wide ring of the first word of the entry at
// pos.
func (x *exactLog) wide(pos int) int { return wideWords * (pos & (len(x.buf)/wideWords - 1)) }

// at returns the time of the entry at pos.
func (x *exactLog) at(pos int) int64 {
	if n := len(x.buf); n&(n-1) == 0 {
		if i := pos - (x.tail - int(x.nLast)); i >= 0 {
			return x.last[i&(ends-1)]
		}
		return x.buf[pos&(n-1)]
	}
	return x.buf[x.wide(pos)]
}

// cumBefore returns the units recorded before position pos.
func (x *exactLog) cumBefore(pos int) int64 {
	switch {
	case pos <= x.head:
		return x.base
	case pos >= x.tail:
		return x.total
	case x.narrow():
		return x.base + int64(pos-x.head)
	}
	return x.buf[x.wide(pos-1)+2]
}

func (x *exactLog) len() int { return x.tail - x.head }

// costAt returns the cost of the entry at pos.
func (x *exactLog) costAt(pos int) int64 {
	if x.narrow() {
		return 1
	}
	return x.buf[x.wide(pos)+2] - x.cumBefore(pos)
}

// idAt returns the request ID of the entry at pos, ids being the last ID
// the log gave.
func (x *exactLog) idAt(pos int, ids uint64) uint64 {
	if x.narrow() {
		return ids - uint64(x.tail-1-pos)
	}
	return uint64(x.buf[x.wide(pos)+1])
}

// evict drops the entries stamped at or before cutoff.
func (x *exactLog) evict(cutoff int64) {
	if x.narrow() {
		x.evictNarrow(cutoff)
	} else {
		x.evictWide(cutoff)
	}
}

// evictNarrow is evict on a narrow ring: it reads the oldest entries
// from first, filling it from the ring as it empties, and the newest from
// last.
func (x *exactLog) evictNarrow(cutoff int64) {
	for x.head < x.tail {
		var t int64
		if x.fi < x.nFirst {
			t = x.first[x.fi&(ends-1)]
		} else if j := x.head - (x.tail - int(x.nLast)); j >= 0 {
			t = x.last[j&(ends-1)]
		} else {
			t = x.fill()
		}
		if t > cutoff {
			return
		}
		x.head++
		x.base++
		if x.fi < x.nFirst {
			x.fi++
		}
	}
}

// fill copies to first the entries of the ring from head on, up to ends
// of them and no further than the end of head's group of ends slots, and
// returns the oldest. Called on a narrow ring whose head is in buf. A
// group lies within one cache line while the ring's memory is aligned to
// ends words, as Go's allocator aligns the blocks a ring takes (a power
// of two of words, or three times one for a wide ring narrowed in place);
// were it not, a fill would read two lines, and be as correct.
func (x *exactLog) fill() int64 {
	n := len(x.buf)
	k := min(x.tail-int(x.nLast)-x.head, ends-x.head&(ends-1))
	for j := range k {
		x.first[j] = x.buf[(x.head+j)&(n-1)]
	}
	x.fi, x.nFirst = 0, uint8(k)
	return x.first[0]
}

// appendNarrow appends at to a narrow ring with room for it, in last,
// and writes last to the ring when the entries there end a group of ends
// slots.
func (x *exactLog) appendNarrow(at int64) {
	x.last[x.nLast&(ends-1)] = at
	x.nLast++
	x.tail++
	if x.tail&(ends-1) == 0 || x.nLast == ends {
		x.flush()
	}
}

// flush writes last's entries to their slots in a narrow ring.
func (x *exactLog) flush() {
	n := len(x.buf)
	from := x.tail - int(x.nLast)
	for j := range int(x.nLast) {
		x.buf[(from+j)&(n-1)] = x.last[j]
	}
	x.nLast = 0
}

// evictWide is evict on a wide ring.
func (x *exactLog) evictWide(cutoff int64) {
	for x.head < x.tail {
		i := x.wide(x.head)
		if x.buf[i] > cutoff {
			return
		}
		x.base = x.buf[i+2]
		x.head++
	}
}

// search returns the first position in [lo, hi) whose entry is stamped
// after cutoff, or hi.
func (x *exactLog) search(lo, hi int, cutoff int64) int {
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if x.at(m) > cutoff {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo
}

// seek returns the position of the oldest entry stamped after now-w,
// moving w's cursor there: amortised O(1) while time moves forward.
//
// A window whose oldest entry is the log's oldest (the longest, once the
// log was evicted to its retention, as Log.prepare does) needs no cursor:
// a log decided on that one window never makes one.
func (x *exactLog) seek(w, cutoff int64) int {
	if x.head == x.tail || x.at(x.head) > cutoff {
		return x.head // entries are in time order: all are in the window
	}
	for i := range x.cursors {
		c := &x.cursors[i]
		if c.window != w {
			continue
		}
		pos := min(max(c.pos, x.head), x.tail)
		for pos < x.tail && x.at(pos) <= cutoff {
			pos++
		}
		for pos > x.head && x.at(pos-1) > cutoff {
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

// grow makes room for one more entry, in the ring's form.
func (x *exactLog) grow() {
	if x.len() < x.size() {
		return
	}
	x.resize(max(minRing, 2*x.size()), x.narrow(), 0)
}

// resize moves the entries to a new ring of room for n entries (n a power
// of two, at least x.len()), narrow or wide; ids is the last ID the log
// gave, which a narrow ring turned wide needs.
func (x *exactLog) resize(n int, narrow bool, ids uint64) {
	if narrow {
		buf := make([]int64, n)
		for p := x.head; p < x.tail; p++ {
			buf[p&(n-1)] = x.at(p)
		}
		x.buf, x.nLast = buf, 0
		return
	}
	buf := make([]int64, wideWords*n)
	for p := x.head; p < x.tail; p++ {
		i := wideWords * (p & (n - 1))
		buf[i], buf[i+1], buf[i+2] = x.at(p), int64(x.idAt(p, ids)), x.cumBefore(p+1)
	}
	x.buf, x.nLast, x.fi, x.nFirst = buf, 0, 0, 0
}

// widen turns a narrow ring wide, ids being the last ID the log gave.
func (x *exactLog) widen(ids uint64) {
	if x.narrow() {
		x.resize(max(minRing, x.size()), false, ids)
	}
}

// push appends, to a narrow ring with room for it, an admission at at of
// cost 1 given the log's next ID, id, prev being the ID before it, and
// reports whether it did: the common case of insert. The caller has
// checked that id is the last ID the log gave.
func (x *exactLog) push(at int64, id, prev uint64) bool {
	n := len(x.buf)
	if n&(n-1) != 0 || x.tail-x.head >= n || id != prev+1 || (x.head < x.tail && x.newest > at) {
		return false
	}
	x.appendNarrow(at)
	x.total++
	x.newest = at
	return true
}

// insert records an admission in time order (after entries of the same
// time): an append unless at is older than the newest entry. prev is the
// last ID the log gave before this admission's, if the log gave it one
// (newID), and ids the last ID it gave now: an admission given the next
// ID appends to a narrow ring.
func (x *exactLog) insert(at int64, id uint64, cost int64, prev, ids uint64) {
	if cost == 1 && id == ids && (x.head == x.tail || (id == prev+1 && x.newest <= at)) {
		if !x.narrow() && x.head == x.tail {
			x.buf = x.buf[:len(x.buf)/wideWords] // narrow again, in the same memory, with room for as many entries
		}
		if x.narrow() {
			x.grow()
			x.appendNarrow(at)
			x.total++
			x.newest = at
			return
		}
	}
	x.widen(prev)
	x.grow()
	x.total += cost
	if x.head == x.tail || x.newest <= at {
		i := x.wide(x.tail)
		x.buf[i], x.buf[i+1], x.buf[i+2] = at, int64(id), x.total
		x.tail++
		x.newest = at
		return
	}
	pos := x.search(x.head, x.tail, at)
	for p := x.tail; p > pos; p-- {
		i, j := x.wide(p), x.wide(p-1)
		x.buf[i], x.buf[i+1], x.buf[i+2] = x.buf[j], x.buf[j+1], x.buf[j+2]+cost
	}
	i := x.wide(pos)
	x.buf[i], x.buf[i+1], x.buf[i+2] = at, int64(id), x.cumBefore(pos)+cost
	x.tail++ // the newest entry stays the newest
	for k := range x.cursors {
		if x.cursors[k].pos > pos {
			x.cursors[k].pos++
		}
	}
}

// find returns the position of request id's entry, or -1; ids is the last
// ID the log gave. ID 0 is never found: seeded entries carry it.
func (x *exactLog) find(id, ids uint64) int {
	if id == 0 {
		return -1
	}
	if x.narrow() {
		if d := ids - id; d < uint64(x.len()) {
			return x.tail - 1 - int(d)
		}
		return -1
	}
	for p := x.head; p < x.tail; p++ {
		if uint64(x.buf[x.wide(p)+1]) == id {
			return p
		}
	}
	return -1
}

// remove deletes the entry at pos, ids being the last ID the log gave.
func (x *exactLog) remove(pos int, ids uint64) {
	x.widen(ids)
	cost := x.costAt(pos)
	for p := pos; p+1 < x.tail; p++ {
		i, j := x.wide(p), x.wide(p+1)
		x.buf[i], x.buf[i+1], x.buf[i+2] = x.buf[j], x.buf[j+1], x.buf[j+2]-cost
	}
	x.tail--
	x.total -= cost
	if pos == x.tail && x.tail > x.head {
		x.newest = x.at(x.tail - 1)
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
	if x.narrow() {
		if k >= int64(x.tail-from) {
			return x.tail - 1
		}
		return from + int(k) - 1
	}
	base := x.cumBefore(from)
	lo, hi := from, x.tail
	if k < int64(hi-lo) {
		hi = lo + int(k)
	}
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if x.buf[x.wide(m)+2]-base >= k {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return min(lo, x.tail-1)
}

// reset forgets every entry and cursor but keeps the ring's memory.
func (x *exactLog) reset() {
	buf := x.buf
	cursors := x.cursors[:0]
	*x = exactLog{buf: buf, cursors: cursors} // first and last empty
}

// bytes is the memory the exact log holds beyond its own struct.
func (x *exactLog) bytes() int { return cap(x.buf)*8 + cap(x.cursors)*16 }
