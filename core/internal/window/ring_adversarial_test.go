package window

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// ringModel is a brute-force bucketRing: the units of each bucket, the
// floor (the oldest bucket the ring may hold) and the range of buckets
// held, as bucket.go's comments specify them.
type ringModel struct {
	units       map[int64]int64
	floor       int64
	first, last int64 // last < first: none held
}

func (m *ringModel) through(b int64) int64 {
	var s int64
	for k, v := range m.units {
		if k <= b {
			s += v
		}
	}
	return s
}

// sums returns through for the buckets lo to hi, each sum computed once,
// and m.through itself for the others.
func (m *ringModel) sums(lo, hi int64) func(b int64) int64 {
	if hi < lo {
		return m.through
	}
	s := make([]int64, hi-lo+1)
	s[0] = m.through(lo)
	for b := lo + 1; b <= hi; b++ {
		s[b-lo] = s[b-lo-1] + m.units[b]
	}
	return func(b int64) int64 {
		if b < lo || b > hi {
			return m.through(b)
		}
		return s[b-lo]
	}
}

// add records cost in bucket b, or in the floor when b is older.
func (m *ringModel) add(b, cost int64) int64 {
	b = max(b, m.floor)
	if m.last < m.first {
		m.first, m.last = b, b
	} else {
		m.first, m.last = min(m.first, b), max(m.last, b)
	}
	m.units[b] += cost
	return b
}

func (m *ringModel) trim(lo int64) {
	m.floor = max(m.floor, lo)
	// The buckets before the floor are one sum from now on.
	for k, v := range m.units {
		if k < m.floor-1 {
			m.units[m.floor-1] += v
			delete(m.units, k)
		}
	}
	switch {
	case lo > m.last:
		m.first, m.last = lo, lo-1
	case lo > m.first:
		m.first = lo
	}
}

// TestRingAgainstModel drives a bucketRing with random adds (late ones
// among them, into the buckets between floor and first, and older than
// the floor), trims and refunds, from memory holding stale values as a
// dropped ring's would, and compares every running sum, the buckets
// held, search and newest with the model after each step.
func TestRingAgainstModel(t *testing.T) {
	rnd := rand.New(rand.NewPCG(11, 12))
	for seq := range 600 {
		p := int64(1 + rnd.IntN(3))
		span := int64(2 + rnd.IntN(40)) // buckets of the retention
		lo := int64(rnd.IntN(1000)) - 500
		// Memory of a dropped ring: garbage everywhere, of any length.
		cum := make([]int64, 1+rnd.IntN(12))
		for i := range cum {
			cum[i] = rnd.Int64N(1000) - 500
		}
		r := bucketRing{p: p, cum: cum, first: lo, last: lo - 1, base: rnd.Int64N(100)}
		if rnd.IntN(2) == 0 {
			r.retain = span * p
		}
		m := &ringModel{units: map[int64]int64{lo - 1: r.base}, floor: lo, first: lo, last: lo - 1}
		type held struct{ b, cost int64 }
		var adds []held
		now := lo + span // the newest bucket, moving forward
		for step := range 200 {
			where := fmt.Sprintf("seq %d step %d", seq, step)
			switch op := rnd.IntN(20); {
			case op < 9: // an admission near now
				b := now - int64(rnd.IntN(3))
				c := 1 + rnd.Int64N(5)
				adds = append(adds, held{m.add(b, c), c})
				r.add(b, c)
			case op < 13: // a late one, possibly before the floor
				b := now - int64(rnd.IntN(int(span)+4))
				c := 1 + rnd.Int64N(5)
				adds = append(adds, held{m.add(b, c), c})
				r.add(b, c)
			case op < 16:
				now += int64(rnd.IntN(4))
				if rnd.IntN(10) == 0 {
					now += span * int64(rnd.IntN(3))
				}
				l := now - span
				m.trim(l)
				r.trim(l)
			case op < 19 && len(adds) > 0: // a refund of a held admission
				i := rnd.IntN(len(adds))
				a := adds[i]
				adds = append(adds[:i], adds[i+1:]...)
				if a.b >= m.first && a.b <= m.last {
					m.units[a.b] -= a.cost
				}
				r.sub(a.b, a.cost)
			default:
				if rnd.IntN(3) == 0 { // rarely: the clock went back a little
					now -= int64(rnd.IntN(int(span)))
				}
			}
			require.Equal(t, m.floor, r.floor(), where)
			if m.last < m.first {
				require.Less(t, r.last, r.first, where)
			} else {
				require.Equal(t, [2]int64{m.first, m.last}, [2]int64{r.first, r.last}, where)
				require.LessOrEqual(t, r.last-r.first+1, int64(len(r.cum)), where)
				require.GreaterOrEqual(t, r.off, int32(0), where)
				require.Less(t, int64(r.off), int64(len(r.cum)), where)
			}
			// The model's sums for this step, added up bucket by bucket
			// (through(b) is through(b-1) plus b's units) rather than over
			// the whole map per bucket: the test's hottest loops.
			through := m.sums(m.floor-2, r.last+5)
			require.Equal(t, through(r.last+5), r.top(), where)
			for b := m.floor - 1; b <= r.last+1; b++ {
				if got, want := r.through(b), through(b); got != want {
					t.Fatalf("%s bucket %d: through = %d, want %d", where, b, got, want)
				}
			}
			// search and newest against the model.
			top := through(r.last + 1)
			base := through(m.floor - 1)
			for range 3 {
				if top <= base {
					break
				}
				k := 1 + rnd.Int64N(top-base)
				want := r.last + 1
				for b := m.floor; b <= r.last; b++ {
					if through(b)-base >= k {
						want = b
						break
					}
				}
				require.Equal(t, want, r.search(m.floor, base, k), "%s k %d", where, k)
			}
			nb, ok := r.newest()
			wantOK := top != through(m.floor-1)
			require.Equal(t, wantOK, ok, where)
			if ok {
				want := r.last
				for want > m.floor && m.units[want] == 0 {
					want--
				}
				require.Equal(t, want, nb, where)
			}
		}
	}
}

// TestAgainstModelLateRecords is TestAgainstModel with the operations the
// growing ring must get right weighted up: Records stamped anywhere in the
// retention (late ones extend a ring backwards), refunds of them, windows
// of up to a few hundred buckets (rings grow and wrap), Reset (whose rings
// reuse the dropped ones' memory) and CopyFrom mid-growth.
func TestAgainstModelLateRecords(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	precs := []int64{0, 1_000, 1_000, 3_000, 7_000}
	for seq := range 300 {
		policies := randomPoliciesOf(r, precs, 5_000, 300_000, 40)
		minLimit, maxW := policies[0].Limit, int64(0)
		for _, p := range policies {
			minLimit, maxW = min(minLimit, p.Limit), max(maxW, p.Window)
		}
		m := newModel(policies)
		l := new(Log)
		out := make([]State, 3)
		now := int64(1_700_000_000_000_000) + r.Int64N(1_000_000)
		ids := &idSource{r: r}
		for step := range 400 {
			where := fmt.Sprintf("sequence %d step %d policies %+v", seq, step, policies)
			now = advance(r, now, 10, maxW, 3, 5_000)
			switch op := r.IntN(20); {
			case op < 9:
				cost := 1 + r.Int64N(minLimit)
				checkTake(t, m, l, now, ids.fresh(), cost, policies, out, where)
			case op < 14:
				id := ids.fresh()
				if r.IntN(4) == 0 {
					id = ids.recent()
				}
				at := now - r.Int64N(maxW+maxW/8)
				cost := 1 + r.Int64N(minLimit)
				require.Equal(t, m.record(now, at, id, cost), l.Record(now, at, id, cost, policies), where)
			case op < 18:
				checkRefund(t, m, l, ids.recent(), where)
			case op == 18:
				c := new(Log)
				c.CopyFrom(l)
				if r.IntN(2) == 0 { // the source must not share memory with its copy
					c.Take(now, 0, 1, []Policy{{Limit: 1 << 40, Window: maxW, Precision: precs[1+r.IntN(4)]}}, out)
					c.Reset()
				} else {
					l = c
				}
			default:
				if r.IntN(4) == 0 {
					l.Reset()
					m = newModel(policies)
				}
			}
		}
	}
}

// TestNeverUnderCountsAcrossPolicyChanges changes a log's policies at
// random (precisions and windows, up and down, exact and bucketed), with
// late Records, refunds, Reset and CopyFrom, and
// checks after every step that each policy in use counts at least the
// admissions recorded in its window that no refund removed: the bound
// that keeps every rolling window within its limit. One policy, the
// longest window, is in every set, so that the log keeps the history any
// window needs, and each precision has one window (see pool).
func TestNeverUnderCountsAcrossPolicyChanges(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	precs := []int64{0, 1_000, 2_000, 3_000, 7_000, 10_000}
	type adm struct {
		at, cost int64
		id       uint64
		active   bool
	}
	for seq := range 400 {
		const wmax = 300_000
		anchor := Policy{Limit: 1 << 40, Window: wmax, Precision: precs[r.IntN(len(precs))]}
		// One window per precision: a window used for the first time
		// starts with the history its structure kept, and a window that
		// grows on a structure is such a window.
		var pool []Policy
		for _, p := range precs {
			if p != anchor.Precision {
				w := int64(10_000 + r.IntN(wmax-10_000))
				pool = append(pool, Policy{Limit: int64(1 + r.IntN(30)), Window: w, Precision: min(p, w/2)})
			}
		}
		randomSet := func() []Policy {
			ps := []Policy{anchor}
			for _, p := range pool {
				if r.IntN(3) == 0 && len(ps) < 4 {
					ps = append(ps, p)
				}
			}
			r.Shuffle(len(ps), func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
			return ps
		}
		policies := randomSet()
		l := new(Log)
		var adms []*adm
		out := make([]State, 4)
		now := int64(1_700_000_000_000_000) + r.Int64N(1_000_000)
		nextID := uint64(1)
		for step := range 300 {
			where := fmt.Sprintf("sequence %d step %d policies %+v", seq, step, policies)
			now = advance(r, now, 12, wmax, 3, 5_000)
			if r.IntN(8) == 0 {
				policies = randomSet()
			}
			switch op := r.IntN(20); {
			case op < 10:
				cost := int64(1 + r.IntN(3))
				id := nextID
				nextID++
				if l.Take(now, id, cost, policies, out).Allowed {
					adms = append(adms, &adm{now, cost, id, true})
				}
			case op < 14:
				at := now - r.Int64N(wmax+wmax/8)
				cost := int64(1 + r.IntN(3))
				id := nextID
				nextID++
				if l.Record(now, at, id, cost, policies) {
					adms = append(adms, &adm{at, cost, id, true})
				}
			case op < 18 && len(adms) > 0:
				a := adms[max(0, len(adms)-1-r.IntN(min(len(adms), 40)))]
				if l.Refund(a.id) {
					require.True(t, a.active, where)
					a.active = false
				}
			case op == 18:
				c := new(Log)
				c.CopyFrom(l)
				l = c
			default:
				if r.IntN(6) == 0 {
					l.Reset()
					adms = adms[:0]
				}
			}
			require.Equal(t, len(l.rings) > 0, l.bucketed, "%s: bucketed against the rings", where)
			// Each policy's count, read with a limit nothing reaches.
			big := slices.Clone(policies)
			for i := range big {
				big[i].Limit = 1 << 40
			}
			l.Peek(now, 1, big, out)
			for i, p := range policies {
				var want int64
				for _, a := range adms {
					if a.active && a.at > now-p.Window {
						want += a.cost
					}
				}
				got := big[i].Limit - out[i].Remaining
				require.GreaterOrEqual(t, got, want, "%s: policy %+v counts less than its window holds", where, p)
			}
		}
	}
}
