package redisstore_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
)

// stressAdm is one admission of the bucket stress test: a Take the
// store admitted (at: the server's decision time, sent: the local clock
// just before the call) or a Record (at: its stamp, done: the local clock
// just after it returned). The server is on this host, so both clocks
// are one.
type stressAdm struct {
	id       uint64
	cost     int
	at       time.Time
	sent     time.Time
	done     time.Time
	record   bool
	refunded bool
}

// seriesName is the prefix of a bucketed policy's fields in the hash.
func seriesName(p slidelog.Policy) string {
	return strconv.FormatInt(p.Window.Microseconds(), 10) + "/" + strconv.FormatInt(p.Precision.Microseconds(), 10)
}

// snapshotScript reads the server's clock and the bucket hash in one
// atomic run, between two runs of the decision script.
var snapshotScript = redis.NewScript(`return {redis.call('TIME'), redis.call('HGETALL', KEYS[1])}`)

// bucketSnapshot is the hash at server time at: per series, n, f and the
// units of each bucket field.
type bucketSnapshot struct {
	at      time.Time
	n, f, h map[string]int64
	buckets map[string]map[int64]int64
}

func readBuckets(ctx context.Context, client redis.UniversalClient, key string) (bucketSnapshot, error) {
	v, err := snapshotScript.Run(ctx, client, []string{key}).Slice()
	if err != nil {
		return bucketSnapshot{}, err
	}
	tm := v[0].([]any)
	sec, _ := strconv.ParseInt(tm[0].(string), 10, 64)
	usec, _ := strconv.ParseInt(tm[1].(string), 10, 64)
	s := bucketSnapshot{at: time.UnixMicro(sec*1_000_000 + usec), n: map[string]int64{}, f: map[string]int64{}, h: map[string]int64{}, buckets: map[string]map[int64]int64{}}
	all := v[1].([]any)
	for i := 0; i+1 < len(all); i += 2 {
		field, val := all[i].(string), all[i+1].(string)
		num, err := strconv.ParseInt(val, 10, 64)
		if err != nil {
			continue
		}
		if name, b, ok := strings.Cut(field, ":"); ok {
			idx, err := strconv.ParseInt(b, 10, 64)
			if err != nil {
				continue
			}
			if s.buckets[name] == nil {
				s.buckets[name] = map[int64]int64{}
			}
			s.buckets[name][idx] = num
			continue
		}
		switch last := field[len(field)-1]; last {
		case 'n':
			s.n[field[:len(field)-1]] = num
		case 'f':
			s.f[field[:len(field)-1]] = num
		case 'h':
			s.h[field[:len(field)-1]] = num
		}
	}
	return s, nil
}

// bucketStress is one scenario: the policies of one identity, the most
// a Take costs, and whether Records (late and ahead) and Refunds run
// beside the takers.
type bucketStress struct {
	name     string
	policies []slidelog.Policy
	maxCost  int
	records  bool
	refunds  bool
}

// Many goroutines decide on one identity with bucketed policies, on the
// server's clock, for long enough to cross the points where every series
// is recounted from its buckets (7d4d729: every quarter of the longest
// window); beside them,
// Records of admissions made elsewhere arrive late (stamped in older
// buckets, some too old to count) and ahead, and Refunds come in. An
// independent checker asserts (1) no rolling window of any policy holds
// more than its limit at an admitted Take: its own cost, the Takes decided
// in the window before it and the Records stamped in it that had returned
// before the Take was sent (refunded admissions left out, which only
// weakens the check); and (2) reading the hash atomically (one script,
// TIME and HGETALL) while the run goes on, every series' n equals the sum
// of its buckets from f on, no bucket before f is left, and n is never
// below the units of the admissions known to be live in it (those that
// returned before the read, not refunded, in a bucket that still counts):
// a recount never lowers a correct n.
func TestBucketRecountStress(t *testing.T) {
	b20 := slidelog.Policy{Name: "b", Limit: 20, Window: 2 * time.Second, Precision: 200 * time.Millisecond}
	b40 := slidelog.Policy{Name: "c", Limit: 40, Window: 3 * time.Second, Precision: 300 * time.Millisecond}
	b8 := slidelog.Policy{Name: "d", Limit: 8, Window: 500 * time.Millisecond, Precision: 100 * time.Millisecond}
	// Busier ones: more admissions per recount; a window that is not a
	// whole number of buckets.
	b300 := slidelog.Policy{Name: "e", Limit: 300, Window: time.Second, Precision: 100 * time.Millisecond}
	b450 := slidelog.Policy{Name: "f", Limit: 450, Window: 2 * time.Second, Precision: 300 * time.Millisecond}
	run := 3 * time.Second
	for _, sc := range []bucketStress{
		{"one series", []slidelog.Policy{b20}, 3, false, false},
		{"three series", []slidelog.Policy{b20, b40, b8}, 2, false, false},
		{"busy series", []slidelog.Policy{b300, b450}, 5, false, false},
		{"records and refunds", []slidelog.Policy{b20, b40}, 2, true, true},
		{"busy records and refunds", []slidelog.Policy{b300, b450}, 4, true, true},
	} {
		for _, topo := range []struct {
			name   string
			client redis.UniversalClient
		}{{"Standalone", redistest.RedisClient(t)}, {"Cluster", redistest.ClusterClient(t)}} {
			t.Run(sc.name+"/"+topo.name, func(t *testing.T) {
				// Each run has keys of its own and paces its callers
				// (they mostly sleep): runs go on side by side, as many
				// at a time as -parallel lets.
				t.Parallel()
				bucketStressRun(t, topo.client, sc, run)
			})
		}
	}
}

func bucketStressRun(t *testing.T, client redis.UniversalClient, sc bucketStress, run time.Duration) {
	ctx := t.Context()
	s := newRedisStore(t, client)
	const ns, key = "recount", "k"
	bkt := keysOf(s, ns, key)[3]
	req := func(id uint64, cost int) slidelog.Request {
		return slidelog.Request{Namespace: ns, Key: key, Cost: cost, Policies: sc.policies, ID: id}
	}
	var (
		mu       sync.Mutex
		adms     []*stressAdm
		byID     = map[uint64]*stressAdm{}
		nextID   atomic.Uint64
		denied   atomic.Int64
		failures atomic.Int64
		snaps    int
		problems []string
	)
	nextID.Store(1000)
	add := func(a *stressAdm) {
		mu.Lock()
		adms = append(adms, a)
		byID[a.id] = a
		mu.Unlock()
	}
	stop := time.Now().Add(run)
	var wg sync.WaitGroup
	// The takers arrive at random (exponential gaps), offering together
	// twice the tightest policy's rate: the window is full from about
	// half of it on, and admissions spread over every bucket, so that
	// the bucket a recount starts from holds units. (Callers in a tight
	// loop take all a leaving bucket frees at once, in the bucket of
	// now, and the window's units end up in one bucket of W/P+1.)
	const takers = 8
	rate := 0.0 // units per second, the tightest policy's
	for _, p := range sc.policies {
		r := float64(p.Limit) / p.Window.Seconds()
		if rate == 0 || r < rate {
			rate = r
		}
	}
	gap := time.Duration(float64(takers) * float64(1+sc.maxCost) / 2 / (2 * rate) * float64(time.Second))
	for g := 0; g < takers; g++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 7))
			for time.Now().Before(stop) {
				time.Sleep(min(time.Duration(rng.ExpFloat64()*float64(gap)), time.Until(stop)))
				id, cost := nextID.Add(1), 1+rng.IntN(sc.maxCost)
				sent := time.Now()
				res, err := s.Take(ctx, req(id, cost))
				if err != nil || res.Source != redisstore.Source {
					failures.Add(1)
					continue
				}
				if res.Allowed {
					add(&stressAdm{id: id, cost: cost, at: res.DecidedAt, sent: sent})
				} else {
					denied.Add(1)
				}
			}
		}(uint64(g))
	}
	longest, shortest := time.Duration(0), sc.policies[0].Window
	for _, p := range sc.policies {
		longest, shortest = max(longest, p.Window), min(shortest, p.Window)
	}
	if sc.records {
		// About half of the smallest limit per window at most (a
		// record costs 1.5 on average), every 10 ms at the least: the
		// records fill much of the windows, the takes the rest.
		every := 10 * time.Millisecond
		for _, p := range sc.policies {
			every = max(every, 2*p.Window/time.Duration(p.Limit))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(11, 13))
			for time.Now().Before(stop) {
				id, cost := nextID.Add(1), 1+rng.IntN(2)
				at := time.Now()
				if rng.IntN(3) == 0 {
					// Ahead, by less than the shortest window (further
					// ahead, see TestRecordAheadCountsInItsWindow).
					at = at.Add(time.Duration(rng.Int64N(int64(shortest))))
				} else {
					at = at.Add(-time.Duration(rng.Int64N(int64(longest + longest/4)))) // late, some too late to count
				}
				if err := s.Record(ctx, req(id, cost), at); err != nil {
					failures.Add(1)
					continue
				}
				add(&stressAdm{id: id, cost: cost, at: at, done: time.Now(), record: true})
				time.Sleep(min(every+time.Duration(rng.Int64N(int64(every))), time.Until(stop)))
			}
		}()
	}
	if sc.refunds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(17, 19))
			// About one admitted take in five is refunded.
			every := time.Duration(5 * float64(1+sc.maxCost) / 2 / rate * float64(time.Second))
			for time.Now().Before(stop) {
				time.Sleep(min(every/2+time.Duration(rng.Int64N(int64(every))), time.Until(stop)))
				mu.Lock()
				var a *stressAdm
				if len(adms) > 0 {
					a = adms[len(adms)-1-rng.IntN(min(len(adms), 10))]
					if a.refunded {
						a = nil
					} else {
						a.refunded = true // before the call: the checkers leave it out from now on
					}
				}
				mu.Unlock()
				if a == nil {
					continue
				}
				if err := s.Refund(ctx, req(a.id, a.cost)); err != nil {
					failures.Add(1)
				}
			}
		}()
	}
	// The hash checker: reads it atomically, every 40 ms.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for time.Now().Before(stop) {
			time.Sleep(40 * time.Millisecond)
			// The admissions that returned before the read, and, after
			// it, whether a refund of one started before it returned (it
			// may have run before the read): those count as refunded.
			mu.Lock()
			before := slices.Clone(adms)
			mu.Unlock()
			snap, err := readBuckets(ctx, client, bkt)
			if err != nil {
				failures.Add(1)
				continue
			}
			mu.Lock()
			var live []stressAdm
			for _, a := range before {
				live = append(live, *a) // refunded ones too, for a failure's report
			}
			snaps++
			problems = append(problems, checkSnapshot(snap, sc.policies, live)...)
			mu.Unlock()
		}
	}()
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	// A last read, quiet.
	snap, err := readBuckets(ctx, client, bkt)
	require.NoError(t, err)
	var live []stressAdm
	takes, records, refunded := 0, 0, 0
	for _, a := range adms {
		switch {
		case a.refunded:
			refunded++
		case a.record:
			records++
		default:
			takes++
		}
		live = append(live, *a)
	}
	problems = append(problems, checkSnapshot(snap, sc.policies, live)...)
	t.Logf("%d admitted takes, %d records, %d refunded, %d denied, %d failures; %d hash reads", takes, records, refunded, denied.Load(), failures.Load(), snaps+1)
	assert.Zero(t, failures.Load(), "a call failed or was not decided by Redis")
	assert.Positive(t, denied.Load(), "no denial: the windows were never full")
	for i, p := range problems {
		if i == 10 {
			t.Errorf("... and %d more", len(problems)-10)
			break
		}
		t.Error(p)
	}
	checkStressWindows(t, sc.policies, adms)
}

// checkSnapshot checks the bucket hash read at snap.at against the
// admissions known live by then.
func checkSnapshot(snap bucketSnapshot, policies []slidelog.Policy, live []stressAdm) []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range policies {
		name := seriesName(p)
		if seen[name] {
			continue
		}
		seen[name] = true
		n, ok := snap.n[name]
		if !ok {
			continue // not written yet
		}
		f := snap.f[name]
		P, W := p.Precision.Microseconds(), p.Window.Microseconds()
		var sum int64
		for b, u := range snap.buckets[name] {
			if b < f {
				out = append(out, "series "+name+": bucket "+strconv.FormatInt(b, 10)+" before f "+strconv.FormatInt(f, 10)+" left in the hash")
				continue
			}
			sum += u
		}
		if n != sum {
			out = append(out, "series "+name+" at "+snap.at.Format("15:04:05.000000")+": n "+strconv.FormatInt(n, 10)+" but its buckets from f hold "+strconv.FormatInt(sum, 10))
		}
		// What is known live at snap.at: it counts while (b+1)P > now - W.
		now := snap.at.UnixMicro()
		var known int64
		for _, a := range live {
			if a.refunded {
				continue
			}
			if !a.record && a.at.After(snap.at) {
				continue // decided after the read (it had not returned before it)
			}
			if a.record && a.done.After(snap.at) {
				continue
			}
			b := floorDiv(a.at.UnixMicro(), P)
			if (b+1)*P > now-W {
				known += int64(a.cost)
			}
		}
		if n < known {
			out = append(out, "series "+name+" at "+snap.at.Format("15:04:05.000000")+": n "+strconv.FormatInt(n, 10)+" below the "+strconv.FormatInt(known, 10)+" units known live"+knownByBucket(snap, name, P, W, live))
		}
	}
	return out
}

// checkStressWindows is the window checker: for every admitted Take (not
// refunded) and policy, its cost plus the Takes decided in (at-W, at]
// and the Records stamped there that had returned before it was sent
// must fit the limit.
func checkStressWindows(t *testing.T, policies []slidelog.Policy, adms []*stressAdm) {
	t.Helper()
	for _, p := range policies {
		most, over := 0, 0
		for _, a := range adms {
			if a.record || a.refunded {
				continue
			}
			units := 0
			for _, b := range adms {
				if b.refunded || !b.at.After(a.at.Add(-p.Window)) || b.at.After(a.at) {
					continue
				}
				if b.record && !b.done.Before(a.sent) {
					continue
				}
				units += b.cost
			}
			most = max(most, units)
			if units > p.Limit {
				over++
				if over <= 5 {
					t.Errorf("policy %s (%d per %v, precision %v): the window ending at the take at %s holds %d units", p.Name, p.Limit, p.Window, p.Precision, a.at.Format("15:04:05.000000"), units)
				}
			}
		}
		t.Logf("policy %s: fullest window %d of %d; %d windows over", p.Name, most, p.Limit, over)
	}
}

// knownByBucket spells, for a failure, each bucket that holds fewer
// units than the admissions known live in it.
func knownByBucket(snap bucketSnapshot, name string, P, W int64, live []stressAdm) string {
	now := snap.at.UnixMicro()
	want := map[int64]int64{}
	ids := map[int64]string{}
	for _, a := range live {
		if (!a.record && a.at.After(snap.at)) || (a.record && a.done.After(snap.at)) {
			continue
		}
		b := floorDiv(a.at.UnixMicro(), P)
		if (b+1)*P > now-W {
			kind := "take"
			if a.record {
				kind = "record"
			}
			if a.refunded {
				kind = "refunded-" + kind
			} else {
				want[b] += int64(a.cost)
			}
			ids[b] += " " + kind + "#" + strconv.FormatUint(a.id, 10) + "x" + strconv.Itoa(a.cost) + "@" + a.at.Format("05.000000")
		}
	}
	out := " (f " + strconv.FormatInt(snap.f[name], 10) + ", h " + strconv.FormatInt(snap.h[name], 10) + ", bucket of now " + strconv.FormatInt(floorDiv(now, P), 10) + ")"
	for b, u := range want {
		if got := snap.buckets[name][b]; got < u {
			out += "; bucket " + strconv.FormatInt(b, 10) + " holds " + strconv.FormatInt(got, 10) + ", known " + strconv.FormatInt(u, 10) + ":" + ids[b]
		}
	}
	return out
}
