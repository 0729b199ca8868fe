package window

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// admission is one admission in the brute-force model.
type admission struct {
	at, cost int64
	id       uint64
	active   bool // not refunded
	exact    bool // written to the exact log
}

// model is the brute-force reference: a plain slice of admissions, counted
// by direct sums, exact policies by time and bucketed ones by bucket.
type model struct {
	policies []Policy
	adms     []*admission
	recent   []*admission // the last RecentIDs admissions written to buckets
	lastPrep int64        // now of the last Take or Record
	exactR   int64        // longest exact window, 0 if none
	ringR    map[int64]int64
}

func newModel(policies []Policy) *model {
	m := &model{policies: policies, ringR: map[int64]int64{}}
	for _, p := range policies {
		if p.Precision == 0 {
			m.exactR = max(m.exactR, p.Window)
		} else {
			m.ringR[p.Precision] = max(m.ringR[p.Precision], p.Window)
		}
	}
	return m
}

// counts reports whether a counts against p at now.
func counts(a *admission, p Policy, now int64) bool {
	if !a.active {
		return false
	}
	if p.Precision == 0 {
		return a.at > now-p.Window
	}
	return (floorDiv(a.at, p.Precision)+1)*p.Precision > now-p.Window
}

func (m *model) findable(id uint64) bool {
	for _, a := range m.adms {
		if a.id == id && a.active && a.exact && a.at > m.lastPrep-m.exactR {
			return true
		}
	}
	for _, a := range m.recent {
		if a.id == id && a.active {
			return true
		}
	}
	return false
}

func (m *model) write(now, at int64, id uint64, cost int64) bool {
	a := &admission{at: at, cost: cost, id: id, active: true, exact: m.exactR > 0 && at > now-m.exactR}
	inRing := false
	for p, r := range m.ringR {
		if floorDiv(at, p) >= floorDiv(now-r, p) {
			inRing = true
		}
	}
	if inRing {
		m.recent = append(m.recent, a)
		if len(m.recent) > RecentIDs {
			m.recent = m.recent[1:]
		}
	}
	if !a.exact && !inRing {
		return false
	}
	m.adms = append(m.adms, a)
	return true
}

func (m *model) take(now int64, id uint64, cost int64) (Decision, []State) {
	m.lastPrep = now
	allowed := true
	units := make([]int64, len(m.policies))
	for i, p := range m.policies {
		for _, a := range m.adms {
			if counts(a, p, now) {
				units[i] += a.cost
			}
		}
		allowed = allowed && units[i]+cost <= p.Limit
	}
	if allowed {
		m.write(now, now, id, cost)
	}
	out := make([]State, len(m.policies))
	var steady int64
	for i, p := range m.policies {
		st := State{Allowed: units[i]+cost <= p.Limit}
		u := units[i]
		if allowed {
			u += cost
		}
		st.Remaining = max(0, p.Limit-u)
		// Admissions in the window, oldest first, as units leave it.
		var in []*admission
		for _, a := range m.adms {
			if counts(a, p, now) {
				in = append(in, a)
			}
		}
		slices.SortStableFunc(in, func(a, b *admission) int { return int(a.at - b.at) })
		leaves := func(a *admission) int64 {
			if p.Precision == 0 {
				return a.at + p.Window - now
			}
			return (floorDiv(a.at, p.Precision)+1)*p.Precision + p.Window - now
		}
		if !allowed && len(in) > 0 {
			steady = minPositive(steady, leaves(in[0]))
		}
		if !st.Allowed {
			need, sum := units[i]+cost-p.Limit, int64(0)
			for _, a := range in {
				if sum += a.cost; sum >= need {
					st.RetryAfter = leaves(a)
					break
				}
			}
		}
		for _, a := range m.adms {
			if a.active {
				st.ResetAfter = max(st.ResetAfter, leaves(a))
			}
		}
		out[i] = st
	}
	d := Decision{Allowed: allowed, Steady: steady}
	if allowed {
		d.ID = id
	}
	return d, out
}

func (m *model) record(now, at int64, id uint64, cost int64) bool {
	m.lastPrep = now
	if m.findable(id) {
		return false
	}
	return m.write(now, at, id, cost)
}

// refund mirrors Log.Refund; the caller refunds only IDs with at most one
// active admission.
func (m *model) refund(id uint64) bool {
	if !m.findable(id) {
		return false
	}
	for _, a := range m.adms {
		if a.id == id && a.active {
			a.active = false
		}
	}
	return true
}

// idSource hands out random odd admission IDs and remembers them, so that
// a step can reuse one of the last few (a Record or Refund of an ID the
// log may know).
type idSource struct {
	r   *rand.Rand
	ids []uint64
}

// fresh returns a new random ID and remembers it.
func (s *idSource) fresh() uint64 {
	id := s.r.Uint64() | 1
	s.ids = append(s.ids, id)
	return id
}

// recent returns one of the last 24 IDs handed out, or a random one if
// none was.
func (s *idSource) recent() uint64 {
	if len(s.ids) == 0 {
		return s.r.Uint64() | 1
	}
	return s.ids[max(0, len(s.ids)-1-s.r.IntN(min(len(s.ids), 24)))]
}

// advance returns now moved on at random: with odds 1 in outOf by less
// than long, with odds shorts in outOf by less than short, else not at
// all.
func advance(r *rand.Rand, now int64, outOf int, long int64, shorts int, short int64) int64 {
	switch k := r.IntN(outOf); {
	case k == 0:
		return now + r.Int64N(long)
	case k <= shorts:
		return now + r.Int64N(short)
	}
	return now
}

// checkTake takes cost units for id at now on l and on the model m, and
// requires the same decision and the same state of every policy. An id of
// 0 asks the log for one: the model records the admission under the ID
// the log gave. It returns the ID an admission was recorded under, or 0.
func checkTake(t *testing.T, m *model, l *Log, now int64, id uint64, cost int64, policies []Policy, out []State, where string) uint64 {
	t.Helper()
	gotD := l.Take(now, id, cost, policies, out)
	if id == 0 && gotD.Allowed {
		require.NotZero(t, gotD.ID, where)
		id = gotD.ID
	}
	wantD, want := m.take(now, id, cost)
	require.Equal(t, wantD, gotD, where)
	require.Equal(t, want, out[:len(policies)], where)
	require.Equal(t, len(l.rings) > 0, l.bucketed, "%s: bucketed against the rings", where)
	return gotD.ID
}

// checkRefund refunds id on l and on the model m and requires the same
// result. It skips an id with more than one active admission in m:
// model.refund mirrors Log.Refund only for IDs with at most one.
func checkRefund(t *testing.T, m *model, l *Log, id uint64, where string) {
	t.Helper()
	active := 0
	for _, a := range m.adms {
		if a.id == id && a.active {
			active++
		}
	}
	if active > 1 {
		return
	}
	require.Equal(t, m.refund(id), l.Refund(id), where)
}

var precisions = []int64{0, 0, 1_000, 7_000, 50_000}

// randomPolicies returns one to three random policies, windows of 10 ms
// to 410 ms and limits of 1 to 12, with precisions from precisions.
func randomPolicies(r *rand.Rand) []Policy {
	return randomPoliciesOf(r, precisions, 10_000, 400_000, 12)
}

// randomPoliciesOf returns one to three random policies: windows of minW
// to minW+spanW-1 µs, limits of 1 to maxLimit, and precisions drawn from
// precs (exact where the drawn precision is above half the window).
func randomPoliciesOf(r *rand.Rand, precs []int64, minW, spanW, maxLimit int) []Policy {
	n := 1 + r.IntN(3)
	ps := make([]Policy, n)
	for i := range ps {
		w := int64(minW + r.IntN(spanW))
		p := precs[r.IntN(len(precs))]
		if p > w/2 {
			p = 0
		}
		ps[i] = Policy{Limit: int64(1 + r.IntN(maxLimit)), Window: w, Precision: p}
	}
	return ps
}

// startSequence returns what a random sequence on policies starts with:
// the model, the policies' smallest limit, a random time and a source of
// IDs.
func startSequence(r *rand.Rand, policies []Policy) (m *model, minLimit, now int64, ids *idSource) {
	minLimit = policies[0].Limit
	for _, p := range policies {
		minLimit = min(minLimit, p.Limit)
	}
	return newModel(policies), minLimit, int64(1_700_000_000_000_000) + r.Int64N(1_000_000), &idSource{r: r}
}

// TestAgainstModel runs random sequences of Take, Record and Refund with
// random costs, times and one to three policies, mixing exact and
// bucketed, and compares every field with the brute-force model.
func TestAgainstModel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for seq := range 400 {
		policies := randomPolicies(r)
		m, minLimit, now, ids := startSequence(r, policies)
		var l Log
		out := make([]State, 3)
		for step := range 300 {
			where := fmt.Sprintf("sequence %d step %d policies %+v", seq, step, policies)
			now = advance(r, now, 10, 300_000, 2, 3_000)
			switch op := r.IntN(10); {
			case op < 7:
				cost := 1 + r.Int64N(minLimit)
				if r.IntN(2) == 0 {
					cost = 1 // the narrow exact log's
				}
				if r.IntN(2) == 0 {
					checkTake(t, m, &l, now, ids.fresh(), cost, policies, out, where)
				} else if id := checkTake(t, m, &l, now, 0, cost, policies, out, where); id != 0 {
					ids.ids = append(ids.ids, id) // the log's, which Record and Refund may name
				}
			case op < 9:
				id := ids.fresh()
				if r.IntN(3) == 0 {
					id = ids.recent()
				}
				at := now - r.Int64N(500_000)
				cost := 1 + r.Int64N(minLimit)
				require.Equal(t, m.record(now, at, id, cost), l.Record(now, at, id, cost, policies), where)
			default:
				checkRefund(t, m, &l, ids.recent(), where)
			}
		}
	}
}

// TestNarrowAgainstModel runs random sequences on exact policies alone,
// mostly admissions of cost 1 given the log's IDs (the narrow exact log's
// appends), among them what turns the log wide (a cost of 2, a request's
// own ID, a late Record, a Refund) and what empties it (a long pause),
// and compares every field with the brute-force model. It requires that
// the sequences spend most steps narrow with entries held, and that they
// turn wide and narrow again, so that both forms and the changes between
// them are what is compared.
// checkEnds holds an exact log's ends to what they stand for: while the
// ring is narrow, first copies the ring's entries still in the log at its
// positions, and last holds fewer than ends entries (a full last is
// written to the ring); while it is wide, both are empty.
func checkEnds(t *testing.T, x *exactLog, where string) {
	t.Helper()
	if !x.narrow() {
		require.Zero(t, x.nFirst, where)
		require.Zero(t, x.nLast, where)
		return
	}
	require.Less(t, int(x.nLast), ends, where)
	require.LessOrEqual(t, x.len(), x.size(), where)
	n := len(x.buf)
	for j := int(x.fi); j < int(x.nFirst); j++ {
		p := x.head + j - int(x.fi)
		require.Less(t, p, x.tail-int(x.nLast), where)
		require.Equal(t, x.buf[p&(n-1)], x.first[j], "%s: first's copy of position %d", where, p)
	}
}

func TestNarrowAgainstModel(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var narrowSteps, steps, widenings, narrowings, pendingWidened, firstUsed int
	for seq := range 300 {
		policies := randomPoliciesOf(r, []int64{0}, 10_000, 400_000, 40)
		m, minLimit, now, ids := startSequence(r, policies)
		var l Log
		out := make([]State, 3)
		wasNarrow := true
		peak := 0 // the most entries the exact log held
		for step := range 300 {
			where := fmt.Sprintf("sequence %d step %d policies %+v", seq, step, policies)
			now = advance(r, now, 40, 500_000, 20, 3_000)
			pending := l.exact.narrow() && l.exact.nLast > 0
			switch op := r.IntN(80); {
			case op >= 4 || op < 2:
				cost := int64(1)
				if op == 0 {
					cost = min(2, minLimit)
				}
				id := uint64(0)
				if op == 1 {
					id = ids.fresh()
				}
				if got := checkTake(t, m, &l, now, id, cost, policies, out, where); got != 0 && id == 0 {
					ids.ids = append(ids.ids, got)
				}
			case op == 2:
				id := ids.recent()
				at := now - r.Int64N(100_000)
				require.Equal(t, m.record(now, at, id, 1), l.Record(now, at, id, 1, policies), where)
			default:
				checkRefund(t, m, &l, ids.recent(), where)
			}
			x := &l.exact
			narrow := x.narrow()
			steps++
			if narrow && x.len() > 1 {
				narrowSteps++
			}
			checkEnds(t, x, where)
			if x.fi < x.nFirst {
				firstUsed++
			}
			if wasNarrow && !narrow {
				widenings++
				if pending {
					pendingWidened++
				}
			} else if !wasNarrow && narrow {
				narrowings++
			}
			wasNarrow = narrow
			for p := x.head; p < x.tail; p++ {
				require.Equal(t, x.costAt(p), x.cumBefore(p+1)-x.cumBefore(p), where)
				if p > x.head {
					require.LessOrEqual(t, x.at(p-1), x.at(p), where)
				}
			}
			require.Equal(t, x.total-x.base, x.cumBefore(x.tail)-x.cumBefore(x.head), where)
			// The ring grows by doubling when full, and keeps its room as
			// it changes form: never more than twice the most it held.
			peak = max(peak, x.len())
			require.LessOrEqual(t, x.size(), max(minRing, 2*peak), where)
		}
	}
	t.Logf("%d of %d steps narrow with entries; %d widenings, %d of them with entries in last; %d narrowings; %d steps with entries in first",
		narrowSteps, steps, widenings, pendingWidened, narrowings, firstUsed)
	require.Greater(t, pendingWidened, 20, "too few narrow logs turned wide with entries not yet in the ring")
	require.Greater(t, firstUsed, steps/8, "too few steps with the oldest entries copied to first")
	require.Greater(t, narrowSteps, steps/4, "too few steps with a narrow log holding entries")
	require.Greater(t, widenings, 100, "too few narrow logs turned wide")
	require.Greater(t, narrowings, 100, "too few wide logs turned narrow again")
}

// TestBucketedNeverOverAdmits checks every rolling window of a flood
// against bucketed policies: the most units admitted in any window of
// length W stays at most the limit.
func TestBucketedNeverOverAdmits(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 50 {
		w := int64(100_000 + r.IntN(900_000))
		p := Policy{Limit: int64(1 + r.IntN(50)), Window: w, Precision: w / int64(2+r.IntN(200))}
		var l Log
		out := make([]State, 1)
		type adm struct{ at, cost int64 }
		var admitted []adm
		now := int64(1_000_000_000) + r.Int64N(1_000_000)
		for range 5_000 {
			now += r.Int64N(w / 50)
			cost := 1 + r.Int64N(min(3, p.Limit))
			if d := l.Take(now, r.Uint64()|1, cost, []Policy{p}, out); d.Allowed {
				admitted = append(admitted, adm{now, cost})
			}
		}
		// The busiest window ends at an admission.
		var most int64
		for i, end := range admitted {
			var sum int64
			for j := i; j >= 0 && admitted[j].at > end.at-w; j-- {
				sum += admitted[j].cost
			}
			most = max(most, sum)
		}
		require.LessOrEqual(t, most, p.Limit, "policy %+v", p)
		require.Greater(t, most, int64(0))
	}
}

// TestBucketedStateBounded floods a limit of 1,000,000 for several windows
// and checks the state stays at about W/P buckets.
func TestBucketedStateBounded(t *testing.T) {
	const w, prec = 60_000_000, 600_000 // one minute, 100 buckets
	p := Policy{Limit: 1_000_000, Window: w, Precision: prec}
	var l Log
	out := make([]State, 1)
	now := int64(1_700_000_000_000_000)
	var maxBytes int
	for i := range 2_000_000 {
		now += 150 // ~6.7k per second: 400k per minute, within the limit
		require.True(t, l.Take(now, uint64(i+1), 1, []Policy{p}, out).Allowed)
		maxBytes = max(maxBytes, l.Bytes())
	}
	require.Len(t, l.rings, 1)
	require.LessOrEqual(t, len(l.rings[0].cum), w/prec+1)
	require.Less(t, maxBytes, 2_000, "bytes of state")
	// And the exact log of the same flood holds one entry per admission.
	var x Log
	for i := range 500_000 {
		x.Take(int64(1_000_000_000+150*i), uint64(i+1), 1, []Policy{{Limit: 1_000_000, Window: w}}, out)
	}
	require.Greater(t, x.Bytes(), 300_000*24)
}

// TestRefundTwiceChangesNothing refunds one admission twice, in both
// models, and checks the second refund leaves the count alone.
func TestRefundTwiceChangesNothing(t *testing.T) {
	for _, prec := range []int64{0, 10_000} {
		p := []Policy{{Limit: 5, Window: 1_000_000, Precision: prec}}
		var l Log
		out := make([]State, 1)
		now := int64(1_000_000_000)
		for i := range 3 {
			require.True(t, l.Take(now, uint64(i+1), 1, p, out).Allowed)
		}
		require.True(t, l.Refund(2))
		require.False(t, l.Refund(2))
		l.Take(now, 10, 1, p, out)
		require.Equal(t, int64(2), out[0].Remaining, "precision %d", prec)
	}
}

// TestPolicyChangeKeepsCount switches a log between exact and bucketed
// policies and checks that the admissions made under the first keep
// counting under the second, at least as much as exactly.
func TestPolicyChangeKeepsCount(t *testing.T) {
	exact := []Policy{{Limit: 10, Window: 1_000_000}}
	bucketed := []Policy{{Limit: 10, Window: 1_000_000, Precision: 100_000}}
	for _, order := range [][2][]Policy{{exact, bucketed}, {bucketed, exact}} {
		var l Log
		out := make([]State, 1)
		now := int64(1_000_000_000)
		for i := range 6 {
			require.True(t, l.Take(now+int64(i)*1_000, uint64(i+1), 1, order[0], out).Allowed)
		}
		l.Take(now+10_000, 100, 1, order[1], out)
		require.Equal(t, int64(3), out[0].Remaining)
		// A refund of an admission made before the switch may stay counted
		// in the new structure, but never counts less.
		l.Refund(3)
		l.Take(now+11_000, 101, 1, order[1], out)
		require.LessOrEqual(t, out[0].Remaining, int64(3))
	}
}

// TestRefundBeforeRingBirth refunds an admission recorded before a ring
// of a new precision was made. The new ring is seeded from the hour ring,
// the longest history the log keeps, so it counts the admission, but it
// cannot tell it apart from the others of its bucket: it keeps counting
// it after the refund (an over-count), while the hour ring, which
// recorded it, subtracts it.
func TestRefundBeforeRingBirth(t *testing.T) {
	const second, hour = 1_000_000, 3_600_000_000
	before := []Policy{{Limit: 5, Window: second}, {Limit: 50, Window: hour, Precision: hour / 100}}
	after := append(slices.Clone(before), Policy{Limit: 5, Window: 600 * second, Precision: 6 * second})
	var l Log
	out := make([]State, 3)
	now := int64(1_700_000_000_000_000)
	require.True(t, l.Take(now, 1, 2, before, out).Allowed) // X, cost 2
	now += 5 * second
	require.True(t, l.Take(now, 2, 1, before, out).Allowed) // W; the exact log lets X go
	now += 5 * second
	require.True(t, l.Take(now, 3, 1, after, out).Allowed) // Y: the new ring is seeded from the hour ring, with X and W
	require.Equal(t, int64(1), out[2].Remaining)
	require.True(t, l.Refund(1))
	require.True(t, l.Take(now, 4, 1, after, out).Allowed) // Z
	require.Equal(t, int64(0), out[2].Remaining, "the new ring counts X, W, Y and Z")
	require.Equal(t, int64(47), out[1].Remaining, "the hour ring counts W, Y and Z, X refunded")
}

// TestRefundBeforeRingBirthUnseeded refunds an admission that every
// structure of the log had let go when a ring of a new precision was
// made: the new ring was not seeded with it and must not subtract it.
func TestRefundBeforeRingBirthUnseeded(t *testing.T) {
	const second = 1_000_000
	before := []Policy{{Limit: 5, Window: second}, {Limit: 50, Window: 10 * second, Precision: second}}
	after := append(slices.Clone(before), Policy{Limit: 5, Window: 600 * second, Precision: 6 * second})
	var l Log
	out := make([]State, 3)
	now := int64(1_700_000_000_000_000)
	require.True(t, l.Take(now, 1, 2, before, out).Allowed) // X, cost 2
	now += 12 * second
	require.True(t, l.Take(now, 2, 1, before, out).Allowed) // W; both structures let X go
	require.True(t, l.Take(now, 3, 1, after, out).Allowed)  // Y: the new ring is seeded with W alone
	require.Equal(t, int64(3), out[2].Remaining)
	require.True(t, l.Refund(1), "X is among the recent admissions")
	require.True(t, l.Take(now, 4, 1, after, out).Allowed) // Z
	require.Equal(t, int64(2), out[2].Remaining, "the new ring counts W, Y and Z")
	require.Equal(t, int64(47), out[1].Remaining, "the 10-second ring counts W, Y and Z")
}

// TestRefundPastRecentSetStaysCounted refunds, on a bucketed-only log, an
// admission older than the last RecentIDs: it is not found and stays
// counted (an over-count, never an under-count).
func TestRefundPastRecentSetStaysCounted(t *testing.T) {
	p := []Policy{{Limit: 100, Window: 1_000_000, Precision: 10_000}}
	var l Log
	out := make([]State, 1)
	for i := range RecentIDs + 1 {
		require.True(t, l.Take(1_000_000_000, uint64(i+1), 1, p, out).Allowed)
	}
	require.False(t, l.Refund(1))
	require.True(t, l.Refund(2))
	l.Take(1_000_000_000, 99, 1, p, out)
	require.Equal(t, int64(100-RecentIDs-1), out[0].Remaining)
}

// TestFastPathsMatchGeneral holds Take's one-policy paths (takeExact,
// takeBucket) to the general one: a log decided on one policy and a log
// decided on the same policy twice (which takes the general path) see the
// same requests and must give the same decisions and states, admissions,
// denials and evictions alike.
func TestFastPathsMatchGeneral(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for seq := range 300 {
		p := Policy{Limit: int64(1 + r.IntN(12)), Window: int64(10_000 + r.IntN(400_000))}
		if seq%2 == 1 {
			p.Precision = []int64{1_000, 7_000, 50_000}[r.IntN(3)]
			p.Precision = min(p.Precision, p.Window)
		}
		var fast, general, single Log
		one, two := []Policy{p}, []Policy{p, p}
		outF, outG := make([]State, 1), make([]State, 2)
		now := int64(1_700_000_000_000_000) + r.Int64N(1_000_000)
		for step := range 200 {
			switch r.IntN(6) {
			case 0:
				now += r.Int64N(2 * p.Window)
			case 1, 2:
				now += r.Int64N(3_000)
			}
			// Half the requests have an ID of their own, half take the
			// log's: each log gives its own, so the IDs are compared
			// apart from the rest of the decision.
			id, cost := uint64(seq*1000+step+1), 1+r.Int64N(p.Limit)
			if step%2 == 1 {
				id = 0
				if r.IntN(2) == 0 {
					cost = 1
				}
			}
			dF := fast.Take(now, id, cost, one, outF)
			dG := general.Take(now, id, cost, two, outG)
			where := fmt.Sprintf("sequence %d step %d policy %+v", seq, step, p)
			if id == 0 {
				stS, dS := single.TakeOne(now, cost, p)
				require.Equal(t, dF.Allowed, dS.Allowed, where)
				require.Equal(t, outF[0], stS, where)
				for _, d := range []*Decision{&dF, &dG, &dS} {
					require.Equal(t, d.Allowed, d.ID != 0, where)
					d.ID = 0
				}
				require.Equal(t, dF, dS, where)
			} else {
				outS := make([]State, 1)
				require.Equal(t, dF, single.Take(now, id, cost, one, outS), where)
				require.Equal(t, outF[0], outS[0], where)
			}
			require.Equal(t, dG, dF, where)
			require.Equal(t, outG[0], outF[0], where)
			require.Equal(t, general.Expires(), fast.Expires(), where)
		}
	}
}

// TestShorterWindowKeptUnderLongerRetention uses a middle window while a
// longer one's retention is in force, then a short one once that
// retention has lapsed: the middle window's admissions must stay counted
// until they leave it, so that it never admits more than its limit.
func TestShorterWindowKeptUnderLongerRetention(t *testing.T) {
	const second = 1_000_000
	long := []Policy{{Limit: 1, Window: 10 * second}}
	mid := []Policy{{Limit: 3, Window: 5 * second}}
	short := []Policy{{Limit: 1, Window: second}}
	for _, precision := range []int64{0, second / 10} {
		for _, ps := range [][]Policy{long, mid, short} {
			ps[0].Precision = precision
		}
		var l Log
		out := make([]State, 1)
		l.Take(0, 1, 1, long, out)
		admitted := 0
		for id := uint64(10); id < 13; id++ {
			if l.Take(9*second, id, 1, mid, out).Allowed {
				admitted++
			}
		}
		l.Take(11*second, 20, 1, short, out)
		for id := uint64(30); id < 33; id++ {
			if l.Take(11*second, id, 1, mid, out).Allowed {
				admitted++
			}
		}
		require.Equal(t, 3, admitted, "precision %d: 3 per 5 s admitted within (6 s, 11 s]", precision)
	}
}

// TestNewStructureSeededFromLongestHistory starts an exact log, and then a
// ring of a new precision, on a log whose first ring keeps less history
// than its second: each must be seeded from the ring that still counts
// the oldest admissions.
func TestNewStructureSeededFromLongestHistory(t *testing.T) {
	const second = 1_000_000
	bucketed := []Policy{{Limit: 100, Window: 5 * second, Precision: second}, {Limit: 2, Window: 50 * second, Precision: 2 * second}}
	for _, next := range [][]Policy{
		{{Limit: 2, Window: 50 * second}},
		{{Limit: 2, Window: 50 * second, Precision: 5 * second}},
	} {
		var l Log
		out := make([]State, 2)
		n := 0
		for id := uint64(1); id <= 3; id++ {
			if l.Take(0, id, 1, bucketed, out).Allowed {
				n++
			}
		}
		l.Take(9*second, 9, 1, bucketed, out) // denied; trims the 5-second ring
		for id := uint64(10); id <= 12; id++ {
			if l.Take(10*second, id, 1, next, out).Allowed {
				n++
			}
		}
		require.Equal(t, 2, n, "%+v: 2 per 50 s admitted within 10 s", next)
	}
}

// TestCopyFromIsDeep copies logs built by random sequences (exact and
// bucketed, one ring or several) and checks that the copy decides as the
// original does, and that deciding on either leaves the other as it was.
func TestCopyFromIsDeep(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for seq := range 200 {
		policies := randomPolicies(r)
		now := int64(1_700_000_000_000_000)
		var orig Log
		out := make([]State, 3)
		id := uint64(1)
		for range 40 {
			now += r.Int64N(20_000)
			orig.Take(now, id, 1, policies, out)
			id++
		}
		var cp, witness Log
		cp.CopyFrom(&orig)
		witness.CopyFrom(&orig)
		got := make([]State, 3)
		for step := range 40 {
			now += r.Int64N(20_000)
			d := cp.Take(now, id, 1, policies, got)
			want := witness.Take(now, id, 1, policies, out)
			require.Equal(t, want, d, "sequence %d step %d", seq, step)
			require.Equal(t, out, got, "sequence %d step %d", seq, step)
			id++
		}
		// orig was left alone: a copy of it decides as the first copy
		// did, from the start.
		var again Log
		again.CopyFrom(&orig)
		require.Equal(t, orig.Expires(), again.Expires())
		d1 := again.Peek(now, 1, policies, out)
		d2 := orig.Peek(now, 1, policies, got)
		require.Equal(t, d1, d2)
		require.Equal(t, out, got)
	}
}

// newID: never 0, distinct on one log, a random start per log (so two
// logs' first IDs differ), a fresh start when the IDs wrap, and a copy
// that does not go on with its source's IDs.
func TestNewID(t *testing.T) {
	var a, b Log
	seen := map[uint64]bool{}
	var first uint64
	for i := range 1000 {
		id := a.newID()
		require.NotZero(t, id)
		require.False(t, seen[id], "ID %d given twice", id)
		seen[id] = true
		if i == 0 {
			first = id
		}
	}
	require.NotEqual(t, first, b.newID(), "a second log's IDs start where the first's did")
	a.ids = ^uint64(0)
	require.NotZero(t, a.newID(), "a wrapped ID")
	var c Log
	c.CopyFrom(&a)
	last := a.ids
	require.NotEqual(t, last+1, c.newID(), "a copy goes on with its source's IDs")
}

// TestBriefIdentitySmall: an identity seen once holds a ring of a few
// buckets, not one of its window's W/P, and one seen for the whole
// window grows to that and no further.
func TestBriefIdentitySmall(t *testing.T) {
	const w = 3_600_000_000 // an hour
	p := []Policy{{Limit: 1_000_000, Window: w, Precision: w / 1000}}
	out := make([]State, 1)
	var l Log
	now := int64(1_700_000_000_000_000)
	require.True(t, l.Take(now, 1, 1, p, out).Allowed)
	require.LessOrEqual(t, len(l.rings[0].cum), minBuckets)
	brief := l.Bytes()
	for i := range int64(3000) {
		require.True(t, l.Take(now+i*(w/1000), uint64(i+2), 1, p, out).Allowed)
	}
	require.LessOrEqual(t, len(l.rings[0].cum), 1000+1)
	require.Greater(t, l.Bytes(), brief+900*8)
	t.Logf("bytes: seen once %d, over the window %d", brief, l.Bytes())
}

// TestRingFloorClamp: a floor further back than a ring's gap reaches is
// moved up to the farthest it reaches, never below.
func TestRingFloorClamp(t *testing.T) {
	r := bucketRing{p: 1, first: 1 << 40, last: 1<<40 - 1}
	r.setFloor(0)
	require.Equal(t, int64(1<<40-math.MaxInt32), r.floor())
	r.setFloor(1<<40 - 5)
	require.Equal(t, int64(1<<40-5), r.floor())
}

// TestRefundInExactNotInSeedingRing refunds an admission that the exact
// log holds but that a ring seeded from another ring never counted: the
// other ring had let it go (its retention was shorter when the admission
// was recorded), and its retention grew, in the very decision that made
// the new ring, past the exact log's, so the new ring was seeded from it.
// The refund must not take the admission's cost off the new ring, which
// would then count less than the admissions it holds.
func TestRefundInExactNotInSeedingRing(t *testing.T) {
	const second = 1_000_000
	before := []Policy{{Limit: 100, Window: 100 * second}, {Limit: 100, Window: 10 * second, Precision: second}}
	after := []Policy{
		{Limit: 100, Window: 100 * second},
		{Limit: 100, Window: 1000 * second, Precision: second},
		{Limit: 6, Window: 1000 * second, Precision: 2 * second},
	}
	var l Log
	out := make([]State, 3)
	now := int64(1_700_000_000_000_000)
	require.True(t, l.Take(now, 1, 1, before, out).Allowed)
	// X, decided elsewhere 50 s ago: in the exact log, not in the 1 s ring.
	require.True(t, l.Record(now, now-50*second, 2, 5, before))
	// The 1 s ring's retention grows to 1000 s; the 2 s ring is seeded
	// from it, with admission 1 alone.
	require.True(t, l.Take(now, 3, 1, after, out).Allowed)
	require.Equal(t, int64(4), out[2].Remaining)
	// A late admission extends the 2 s ring back past X's bucket.
	require.True(t, l.Record(now, now-60*second, 4, 4, after))
	require.True(t, l.Refund(2))
	// The 2 s ring holds 1, 3 and 4: 6 units, its limit.
	d := l.Take(now, 5, 1, after, out)
	require.False(t, d.Allowed, "the 2 s ring's window holds 6 units of 6: %+v", out)
	require.Equal(t, int64(0), out[2].Remaining)
}

// TestFarFutureRecordBounded: an admission recorded any distance after
// the log's clock (a store whose clock is behind the recorder's) still
// counts, and the rings, written directly or seeded from the exact log,
// make room for about two windows of buckets, not for every bucket up to
// the stamp; the decisions that follow stay quick.
func TestFarFutureRecordBounded(t *testing.T) {
	const w, prec = 10_000_000, 1_000 // 10 s in 10,000 buckets
	now := int64(1_700_000_000_000_000)
	far := now + 100*365*24*3600*1_000_000
	bucketed := []Policy{{Limit: 100, Window: w, Precision: prec}}
	exact := []Policy{{Limit: 100, Window: w}}
	out := make([]State, 1)
	for _, tc := range []struct {
		name          string
		record, after []Policy
	}{
		{"ring", bucketed, bucketed},
		{"seeded from the exact log", exact, bucketed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l Log
			require.True(t, l.Record(now, far, 7, 1, tc.record))
			d := l.Take(now, 8, 1, tc.after, out)
			require.True(t, d.Allowed)
			require.Equal(t, int64(98), out[0].Remaining, "the recorded admission counts")
			require.Less(t, l.Bytes(), 3*(w/prec)*8, "bytes of state")
			for i := range int64(1000) {
				l.Take(now+i*w/100, uint64(9+i), 1, tc.after, out)
			}
			require.Less(t, l.Bytes(), 3*(w/prec)*8, "bytes of state")
		})
	}
}

// TestExactSeededFromRingAhead records admissions stamped after the log's
// clock (as a Redis clock ahead of the process's hands them over, or a
// test clock set back), then starts an exact policy, whose log is seeded
// from the bucket ring: the seeded entries must count as long as the
// admissions they stand for, so that no window of the exact policy holds
// more than its limit.
func TestExactSeededFromRingAhead(t *testing.T) {
	const second = 1_000_000
	now := int64(1_700_000_000) * second
	for _, ahead := range []int64{1, 500_000, 3 * second, 9 * second} {
		bucketed := []Policy{{Limit: 5, Window: 10 * second, Precision: second}}
		exact := []Policy{{Limit: 5, Window: 10 * second}}
		var l Log
		var admitted []int64
		for id := range uint64(5) {
			require.True(t, l.Record(now, now+ahead, id+1, 1, bucketed))
			admitted = append(admitted, now+ahead)
		}
		out := make([]State, 1)
		for i := range int64(300) {
			at := now + i*50_000
			if l.Take(at, uint64(100+i), 1, exact, out).Allowed {
				admitted = append(admitted, at)
			}
		}
		for _, end := range admitted {
			n := 0
			for _, a := range admitted {
				if a > end-10*second && a <= end {
					n++
				}
			}
			require.LessOrEqual(t, n, 5, "ahead %d µs: admissions in the window ending at +%d µs", ahead, end-now)
		}
	}
}

// TestCutoffLeavesEveryWindow holds each exact window to its bound: an
// admission stamped exactly at now-W has left a window of W, in a
// shorter window of a log decided on two as in the longest.
func TestCutoffLeavesEveryWindow(t *testing.T) {
	const s = int64(1_000_000)
	policies := []Policy{{Limit: 1, Window: 5 * s}, {Limit: 10, Window: 10 * s}}
	var l Log
	out := make([]State, 2)
	for _, now := range []int64{0, 5 * s, 10 * s, 15 * s} {
		d := l.Take(now, 0, 1, policies, out)
		require.True(t, d.Allowed, "at %d s the admission 5 s before has left the 5 s window", now/s)
		require.Zero(t, out[0].Remaining, "at %d s", now/s)
		want := int64(8) // this admission and the one 5 s before
		if now == 0 {
			want = 9
		}
		require.Equal(t, want, out[1].Remaining, "at %d s: the 10 s window", now/s)
	}
}
