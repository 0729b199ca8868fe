package window

import "math"

// bucketRing is the bucketed model for one precision p: counters of the
// buckets [first, last], bucket b holding the admissions stamped in
// [b·p, (b+1)·p), kept as running sums so that the units of any range of
// buckets are one subtraction. (See floor.)
type bucketRing struct {
	p           int64   // bucket width, microseconds
	cum         []int64 // cum[b mod len] = units recorded in buckets <= b (wrapping)
	first, last int64   // buckets held; last == first-1 when none
	off         int32   // slot of bucket first
	// gap is first - floor, where floor is the oldest bucket the ring may
	// hold: the units of the buckets before floor are in base, and the
	// buckets from floor to first hold none, so that the ring keeps room
	// only for buckets it was given. floor only ever moves forward; first
	// moves back, to floor at most, for an admission recorded late. (Two
	// int32s, to keep a log's ring within the lines a decision reads: a
	// window spans at most about 10,000 buckets.)
	gap int32
	// lastSum is the running sum of bucket last, kept here rather than in
	// cum (whose slot of last is stale), so that an admission into the
	// newest bucket writes no line of cum.
	lastSum int64
	base    int64 // units recorded in buckets before first
	// retain is the longest window of precision p a limiter of this log
	// needs, until retainUntil.
	retain, retainUntil int64
	// bornSeq is the log's admission sequence number when the ring was
	// made: a refund of an admission recorded before it is not subtracted,
	// since the ring may never have counted it.
	bornSeq uint64
	// ringSeeded is set when the ring was seeded from another ring while
	// the exact log held admissions: that ring may have let go one the
	// exact log still holds (its retention was shorter when the admission
	// was recorded), so that finding an admission in the exact log does
	// not tell that this ring counts it.
	ringSeeded bool
}

// floorDiv is a/b rounded toward minus infinity (b > 0).
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// slot returns the counter of bucket b, first <= b < first+len(cum),
// without a division.
func (r *bucketRing) slot(b int64) *int64 {
	if b == r.last {
		return &r.lastSum
	}
	return &r.cum[r.index(b)]
}

// floor returns the oldest bucket the ring may hold (see gap).
func (r *bucketRing) floor() int64 { return r.first - int64(r.gap) }

// setFloor makes f, at most first, the oldest bucket the ring may hold;
// a floor further back than an int32 reaches is moved up, which only
// places a late admission in a later bucket.
func (r *bucketRing) setFloor(f int64) {
	r.gap = int32(min(r.first-f, math.MaxInt32))
}

func (r *bucketRing) index(b int64) int64 {
	i := b - r.first + int64(r.off)
	if n := int64(len(r.cum)); i >= n {
		i -= n
	}
	return i
}

// top is the units recorded in every bucket held.
func (r *bucketRing) top() int64 {
	if r.last < r.first {
		return r.base
	}
	return r.lastSum
}

// through returns the units recorded in buckets <= b.
func (r *bucketRing) through(b int64) int64 {
	switch {
	case b < r.first:
		return r.base
	case b >= r.last:
		return r.top()
	}
	return *r.slot(b)
}

// lowest is the oldest bucket that counts at now for window w: the first
// whose end, (b+1)·p, is after now-w.
func (r *bucketRing) lowest(now, w int64) int64 { return floorDiv(now-w, r.p) }

// trim forgets the buckets before lo.
func (r *bucketRing) trim(lo int64) {
	if lo <= r.floor() {
		return
	}
	if lo <= r.first {
		r.setFloor(lo) // the buckets forgotten held nothing
		return
	}
	if lo > r.last {
		r.base = r.top()
		r.first, r.last, r.off, r.gap = lo, lo-1, 0, 0
		return
	}
	r.base = *r.slot(lo - 1)
	r.off = int32(r.index(lo))
	r.first, r.gap = lo, 0
}

// minBuckets is how many buckets a new ring has room for.
const minBuckets = 4

// size is the room a ring grows to when it needs need buckets: a
// quarter more, but no more than its retention spans.
func (r *bucketRing) size(need int64) int64 {
	size := need + need/4 + 1
	if r.retain > 0 {
		size = min(size, max(need, (r.retain+r.p-1)/r.p+1))
	}
	return size
}

// span makes the ring hold buckets first..b.
func (r *bucketRing) span(b int64) {
	need := b - r.first + 1
	if need <= int64(len(r.cum)) {
		return
	}
	cum := make([]int64, r.size(need))
	old := *r
	r.cum, r.off = cum, 0
	for j := old.first; j <= old.last; j++ {
		*r.slot(j) = *old.slot(j)
	}
}

// extend makes a ring holding buckets start at b, floor <= b < first:
// the buckets it gains hold nothing, their running sums base.
func (r *bucketRing) extend(b int64) {
	old := *r
	floor := r.floor()
	if need := r.last - b + 1; need > int64(len(r.cum)) {
		r.cum, r.off, r.first = make([]int64, r.size(need)), 0, b
		for j := old.first; j < old.last; j++ { // last's sum is lastSum
			*r.slot(j) = *old.slot(j)
		}
	} else {
		n := int64(len(r.cum))
		r.off = int32((int64(r.off) - (old.first - b) + n) % n)
		r.first = b
	}
	r.setFloor(floor)
	for j := b; j < old.first; j++ {
		*r.slot(j) = old.base
	}
}

// add records cost units in bucket b, or in first when b is older (a
// later bucket counts longer, so this only over-counts). The caller has
// trimmed the ring to the retention, so b >= first for any admission
// still inside it unless the clock went back.
func (r *bucketRing) add(b, cost int64) {
	floor := r.floor()
	b = max(b, floor)
	switch {
	case r.last < r.first:
		// Empty: the ring starts at b, with no room for the buckets
		// before it, which hold nothing.
		r.first, r.last, r.off = b, b-1, 0
		r.setFloor(floor)
	case b < r.first:
		r.extend(b)
	}
	if b > r.last {
		r.span(b)
		t := r.top()
		if r.last >= r.first {
			r.cum[r.index(r.last)] = r.lastSum // its slot from now on
		}
		for j := r.last + 1; j < b; j++ {
			r.cum[r.index(j)] = t
		}
		r.last, r.lastSum = b, t
	}
	for j := b; j <= r.last; j++ {
		*r.slot(j) += cost
	}
}

// sub removes cost units recorded in bucket b, if the ring still holds it.
func (r *bucketRing) sub(b, cost int64) {
	if b < r.first || b > r.last {
		return
	}
	for j := b; j <= r.last; j++ {
		*r.slot(j) -= cost
	}
}

// search returns the first bucket in [lo, r.last] whose running sum
// minus base reaches k (k >= 1), or r.last+1.
func (r *bucketRing) search(lo int64, base, k int64) int64 {
	lo = max(lo, r.first)
	hi := r.last + 1
	if lo < hi && *r.slot(lo)-base >= k {
		return lo // the usual case when the oldest bucket is full
	}
	for lo < hi {
		m := lo + (hi-lo)/2
		if *r.slot(m)-base >= k {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo
}

// newest returns the newest nonempty bucket, or ok == false: the last
// bucket, or when it is empty the first whose running sum reaches the top.
func (r *bucketRing) newest() (int64, bool) {
	t := r.top()
	if t == r.base {
		return 0, false
	}
	if r.last == r.first || *r.slot(r.last - 1) != t {
		return r.last, true
	}
	return r.search(r.first, r.base, t-r.base), true
}

// reset forgets every bucket but keeps the ring's memory.
func (r *bucketRing) reset() {
	cum := r.cum
	*r = bucketRing{cum: cum}
}

func (r *bucketRing) bytes() int { return cap(r.cum) * 8 }
