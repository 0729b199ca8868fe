package faulttest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest"
)

// Failover durability: many keys at a paced admission rate, a master whose
// replica misses its last writes (docs faults.md, "Losing replicated
// writes on purpose"), then its death (kill -9) or a stop past the node
// timeout, until the replica takes over. The checker below is independent
// of the limiter: it trusts only the times the calls started and ended.
const (
	// failLimit admissions per failWindow, offered at failRate per key:
	// a key fills its window in 12.5 s, so admissions keep landing through
	// the gap, the failover and after it, all inside one window.
	failLimit  = 100
	failWindow = 30 * time.Second
	failRate   = 8 // calls per second per key
	failKeys   = 90
	// failGap is how long the master keeps admitting after its replica
	// stopped receiving writes.
	failGap = 2 * time.Second
)

// failoverRun is the outcome of one failover.
type failoverRun struct {
	mode                string
	admitted, gapAdmits int
	lost                int // admissions of the gap missing from the new master
	overKeys, overPeak  int // keys with a window over the limit; most admissions in one window
	excess              int // summed over keys, by how much the fullest window passed the limit
	errors              int
	promotedAfter       time.Duration
	ack                 redisstore.ReplicaAckStats
	// byFailureMode counts the decisions of the limiter's failure mode,
	// slowest is the decision that took longest, and faulted is when
	// the master failed (the gap's end), so that a failure says when
	// the slowest decision began.
	byFailureMode int
	slowest       decision
	faulted       time.Time
}

// checkBounded fails t when a decision of the run took longer than hang,
// or a stopped master's stall reached no decision: a stopped master owes
// its callers replies, which the store must judge a stall and hand to the
// failure mode within its stall timeout, not leave them to the client's
// timeouts.
func (r *failoverRun) checkBounded(t *testing.T) {
	t.Helper()
	if r.slowest.took > hang {
		t.Errorf("%s: a decision took longer than %v: %s", r.mode, hang, r.slowestNote())
	}
	if r.mode == "stop" && r.byFailureMode == 0 {
		t.Errorf("stop: no decision went to the failure mode while the master was stopped")
	}
}

// slowestNote describes the slowest decision: how long it took, its key,
// when it began against the master's failure and the promotion, and
// what it returned.
func (r *failoverRun) slowestNote() string {
	d := r.slowest
	return fmt.Sprintf("%v (key %s, began %v after the master failed, the replica promoted %v after it; allowed=%v source=%v error=%v)",
		d.took.Round(time.Millisecond), d.key, d.start.Sub(r.faulted).Round(time.Millisecond), r.promotedAfter.Round(time.Millisecond), d.allowed, d.src, d.err)
}

// tally counts ds into r: errors, admissions, the failure mode's
// decisions and the slowest decision.
func (r *failoverRun) tally(ds []decision) {
	for _, d := range ds {
		if d.took > r.slowest.took {
			r.slowest = d
		}
		if d.err != nil {
			r.errors++
			continue
		}
		if d.allowed {
			r.admitted++
		}
		if d.src == slidelog.SourceFailClosed || d.src == slidelog.SourceFailOpen || d.src == slidelog.SourceFallback {
			r.byFailureMode++
		}
	}
}

// checkWindows runs the independent checker (slidelogtest.CheckWindows)
// over every key's admissions, trusting only the times the calls started
// and ended: it counts the admissions that certainly lie in one window.
// It returns how many keys had a window over l, the fullest window, and
// by how much, summed over keys, the fullest windows passed l.
func checkWindows(ds []decision, l int, w time.Duration) (overKeys, peak, excess int) {
	var as []slidelogtest.Admission
	for _, d := range ds {
		if d.err == nil && d.allowed {
			as = append(as, slidelogtest.Admission{Key: d.key, Start: d.start, End: d.start.Add(d.took)})
		}
	}
	fullest, over := slidelogtest.CheckWindows(as, l, w)
	for _, f := range fullest {
		peak = max(peak, f.Units)
	}
	for _, o := range over {
		excess += o.Units - l
	}
	return len(over), peak, excess
}

// pacedLoad offers every key failRate calls a second from its own
// goroutine, the keys at random phases of one tick.
func (e *env) pacedLoad() *load {
	ld := &load{stop: make(chan struct{})}
	for _, key := range e.keys {
		ld.wg.Go(func() {
			phase := time.NewTimer(rand.N(time.Second / failRate))
			defer phase.Stop()
			select {
			case <-ld.stop:
				return
			case <-phase.C:
			}
			tick := time.NewTicker(time.Second / failRate)
			defer tick.Stop()
			for {
				select {
				case <-ld.stop:
					return
				case <-tick.C:
				}
				start := time.Now()
				res, err := e.l.Allow(e.t.Context(), key)
				took := time.Since(start)
				ld.mu.Lock()
				ld.ds = append(ld.ds, decision{key: key, allowed: res.Allowed, src: res.Source, at: res.DecidedAt.UnixMicro(), start: start, took: took, err: err})
				ld.mu.Unlock()
			}
		})
	}
	return ld
}

// failover runs one failover of the master of the env's first key, with
// its replica made to miss the writes of the last failGap, and returns
// what the checker found. mode is "kill" (kill -9) or "stop" (SIGSTOP
// past the node timeout, SIGCONT once the replica took over).
func failover(t *testing.T, c *cluster, mode string, storeOpts ...redisstore.Option) failoverRun {
	t.Helper()
	p := slidelog.Policy{Name: "q", Limit: failLimit, Window: failWindow}
	e := newEnvN(t, c, failKeys, p, storeOpts, slidelog.WithFailureMode(slidelog.FailClosed))
	victim := c.byAddr(e.nodeOf[e.keys[0]])
	replica := c.replicaOf(victim)
	if replica == nil {
		t.Fatalf("master %d has no replica", victim.Port)
	}
	ld := e.pacedLoad()
	began := time.Now()
	time.Sleep(3 * time.Second) // every key admitting, none full yet

	// The replica stops taking writes: stopped, and its link cut so the
	// master's kernel buffers cannot deliver them on SIGCONT.
	c.signal(replica, syscall.SIGSTOP)
	if _, err := c.cli(victim, "CLIENT", "KILL", "TYPE", "replica"); err != nil {
		t.Fatalf("CLIENT KILL TYPE replica on %d: %v", victim.Port, err)
	}
	gapStart := time.Now()
	time.Sleep(failGap)
	gapEnd := time.Now()
	switch mode {
	case "kill":
		c.kill(victim)
	case "stop":
		c.signal(victim, syscall.SIGSTOP)
	}
	c.signal(replica, syscall.SIGCONT)
	var promoted time.Time
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if c.info(replica, "INFO", "replication")["role"] == "master" && c.ownsNoSlot(replica, victim) {
			promoted = time.Now()
			break
		}
	}
	if mode == "stop" {
		c.signal(victim, syscall.SIGCONT) // it comes back as a replica and drops what it did not replicate
	}
	if promoted.IsZero() {
		ld.finish()
		t.Fatalf("replica %d was not promoted within 20 s", replica.Port)
	}
	// Long enough for every key of the victim to fill its window on the
	// new master (12.5 s of admissions in all), short enough that every
	// admission of the run is still inside the first window when counted.
	time.Sleep(max(4*time.Second, time.Until(began.Add(23*time.Second))))
	ds := ld.finish()

	r := failoverRun{mode: mode, promotedAfter: promoted.Sub(gapEnd), faulted: gapEnd, ack: e.store.ReplicaAckStats()}
	r.tally(ds)
	r.overKeys, r.overPeak, r.excess = checkWindows(ds, failLimit, failWindow)
	// Admissions of the victim's keys decided wholly within the gap, and
	// how many of them the new master holds (each entry is stamped with
	// the server's clock during its call).
	for _, k := range e.keys {
		if e.nodeOf[k] != victim.Addr {
			continue
		}
		gap := 0
		for _, d := range ds {
			if d.key == k && d.err == nil && d.allowed && !d.start.Before(gapStart) && d.start.Add(d.took).Before(gapEnd) {
				gap++
			}
		}
		held, err := e.client.ZCount(t.Context(), e.store.LogKey(e.l.Name(), k),
			strconv.FormatInt(gapStart.UnixMicro(), 10), strconv.FormatInt(gapEnd.UnixMicro(), 10)).Result()
		if err != nil {
			t.Fatalf("count the entries of %s: %v", k, err)
		}
		r.gapAdmits += gap
		r.lost += max(0, gap-int(held))
	}
	if r.errors > 0 {
		t.Logf("%d errors, first %v", r.errors, firstErr(ds))
	}
	if mode == "kill" {
		c.restart(victim)
	}
	c.waitHealthy(120 * time.Second)
	return r
}

// newEnvN is newEnv with n keys and options for the store.
func newEnvN(t *testing.T, c *cluster, n int, p slidelog.Policy, storeOpts []redisstore.Option, opts ...slidelog.Option) *env {
	t.Helper()
	e := newEnvWith(t, c, p, storeOpts, opts...)
	e.keys = e.keys[:0]
	for i := range n {
		k := "q-" + strconv.Itoa(i)
		e.keys = append(e.keys, k)
		m, err := e.client.MasterForKey(t.Context(), e.store.LogKey(e.l.Name(), k))
		if err != nil {
			t.Fatal(err)
		}
		e.nodeOf[k] = m.Options().Addr
	}
	return e
}

// failoverRuns is how many failovers of each mode the suite runs per
// configuration (SLIDELOG_FAILOVER_RUNS, default 1).
func failoverRuns() int {
	if n, err := strconv.Atoi(os.Getenv("SLIDELOG_FAILOVER_RUNS")); err == nil && n > 0 {
		return n
	}
	return 1
}

// failoverRows runs the failovers of one configuration and logs one row
// per mode with the sums over its runs.
func failoverRows(t *testing.T, c *cluster, name string, storeOpts ...redisstore.Option) []failoverRun {
	var all []failoverRun
	var mu sync.Mutex
	for _, mode := range []string{"kill", "stop"} {
		sum := failoverRun{mode: mode}
		runs := failoverRuns()
		var promotions []string
		for i := range runs {
			t.Run(fmt.Sprintf("%s/%d", mode, i), func(t *testing.T) {
				c.t = t
				r := failover(t, c, mode, storeOpts...)
				t.Logf("FAILOVER %s %s run %d: admitted=%d gap_admissions=%d lost=%d keys_over=%d peak=%d (limit %d) excess=%d errors=%d failure_mode=%d slowest=%s promoted %v after the gap; acknowledgement %+v",
					name, mode, i, r.admitted, r.gapAdmits, r.lost, r.overKeys, r.overPeak, failLimit, r.excess, r.errors, r.byFailureMode, r.slowestNote(), r.promotedAfter.Round(time.Millisecond), r.ack)
				r.checkBounded(t)
				mu.Lock()
				defer mu.Unlock()
				all = append(all, r)
				sum.admitted += r.admitted
				sum.gapAdmits += r.gapAdmits
				sum.lost += r.lost
				sum.overKeys += r.overKeys
				sum.overPeak = max(sum.overPeak, r.overPeak)
				sum.excess += r.excess
				sum.errors += r.errors
				promotions = append(promotions, r.promotedAfter.Round(100*time.Millisecond).String())
			})
		}
		how := "kill -9 of the master"
		if mode == "stop" {
			how = "SIGSTOP of the master past the node timeout"
		}
		faultReport.mu.Lock()
		faultReport.failover = append(faultReport.failover, fmt.Sprintf("| Cluster, %s | %s | %d | %d | %d | %d | %d | %d (limit %d) | %d | replica promoted %v after the gap |",
			name, how, runs, sum.admitted, sum.gapAdmits, sum.lost, sum.overKeys, sum.overPeak, failLimit, sum.errors, promotions))
		faultReport.mu.Unlock()
	}
	return all
}
