package faulttest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
)

// sentinelMaster is the master name the sentinels monitor.
const sentinelMaster = "slidelog"

// sentinelSet is 1 master, 1 replica and 3 sentinels, its own processes
// started by redistest on ports the kernel has free (never 7200-7299, the
// Cluster's: the kernel hands out ports from 32768), killed when the test
// ends.
type sentinelSet struct {
	t                 *testing.T
	master, replica   *node
	sentinels         []*node
	c                 *cluster // for cli, signal and kill, which only use a node
	masterAddrAtStart string
}

func startSentinelSet(t *testing.T) *sentinelSet {
	t.Helper()
	rs := redistest.StartSentinels(t, redistest.SentinelConfig{
		Name: sentinelMaster, DownAfter: time.Second, FailoverTimeout: 10 * time.Second,
		Args: []string{"--maxmemory-policy", "noeviction"}, RaisePriority: true,
	})
	s := &sentinelSet{t: t, master: rs.Master, replica: rs.Replica, sentinels: rs.Sentinels,
		c: &cluster{t: t, cliBin: redistest.RequireBinary(t, "redis-cli")}, masterAddrAtStart: rs.Master.Addr}
	return s
}

// addrs are the sentinels' addresses.
func (s *sentinelSet) addrs() []string {
	var out []string
	for _, n := range s.sentinels {
		out = append(out, n.Addr)
	}
	return out
}

// masterAddr asks a sentinel for the master's address.
func (s *sentinelSet) masterAddr() string {
	for _, n := range s.sentinels {
		out, err := s.c.cli(n, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", sentinelMaster)
		if f := strings.Fields(out); err == nil && len(f) == 2 {
			return f[0] + ":" + f[1]
		}
	}
	return ""
}

// sentinelEnv is a limiter on a plain redis.NewFailoverClient of s.
func sentinelEnv(t *testing.T, s *sentinelSet, p slidelog.Policy, storeOpts []redisstore.Option, opts ...slidelog.Option) (*env, *redis.Client) {
	t.Helper()
	client := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:            sentinelMaster,
		SentinelAddrs:         s.addrs(),
		ContextTimeoutEnabled: true,
		DialTimeout:           500 * time.Millisecond,
		ReadTimeout:           500 * time.Millisecond,
		WriteTimeout:          500 * time.Millisecond,
		PoolTimeout:           500 * time.Millisecond,
	})
	e := &env{t: t, reg: prometheus.NewRegistry(), nodeOf: make(map[string]string)}
	var err error
	e.store, err = redisstore.New(client, append([]redisstore.Option{redisstore.WithKeyPrefix("fault:" + t.Name() + ":")}, storeOpts...)...)
	if err != nil {
		t.Fatal(err)
	}
	opts = append([]slidelog.Option{slidelog.WithName(p.String())}, opts...)
	e.l, err = slidelog.New(e.store, p, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.l.Close(); _ = client.Close() })
	for i := range failKeys {
		e.keys = append(e.keys, "q-"+strconv.Itoa(i))
	}
	return e, client
}

// sentinelFailover is failover on a Sentinel set of its own: the replica
// misses the master's writes of the last failGap, then the master is
// killed (mode "kill": kill -9, the sentinels promote the replica), stopped
// (mode "stop": SIGSTOP until the sentinels promote the replica, then
// SIGCONT, so that the store first judges the master stalled and the old
// master comes back, to be made a replica) or switched (mode "switch":
// SENTINEL FAILOVER, a planned switch, while the replica still lags:
// Sentinel does not wait for it to catch up). In mode
// "switch" the gap whose admissions are counted lost runs until the
// promotion, as the old master admits until Sentinel demotes it.
func sentinelFailover(t *testing.T, mode string, storeOpts ...redisstore.Option) failoverRun {
	t.Helper()
	s := startSentinelSet(t)
	p := slidelog.Policy{Name: "q", Limit: failLimit, Window: failWindow}
	e, client := sentinelEnv(t, s, p, storeOpts, slidelog.WithFailureMode(slidelog.FailClosed))
	ld := e.pacedLoad()
	began := time.Now()
	time.Sleep(3 * time.Second) // every key admitting, none full yet

	// The replica stops taking writes: stopped, and its link cut.
	s.c.signal(s.replica, syscall.SIGSTOP)
	if _, err := s.c.cli(s.master, "CLIENT", "KILL", "TYPE", "replica"); err != nil {
		t.Fatalf("CLIENT KILL TYPE replica: %v", err)
	}
	gapStart := time.Now()
	time.Sleep(failGap)
	gapEnd := time.Now()
	switch mode {
	case "kill":
		s.c.kill(s.master)
	case "stop":
		s.c.signal(s.master, syscall.SIGSTOP)
		t.Cleanup(func() { _ = s.master.Signal(syscall.SIGCONT) })
	case "switch":
		// The master stays up, but drops the replica's link as soon as it
		// sends it anything, so the replica cannot catch up before
		// Sentinel promotes it.
		if _, err := s.c.cli(s.master, "CONFIG", "SET", "client-output-buffer-limit", "replica 1 1 0"); err != nil {
			t.Fatalf("CONFIG SET client-output-buffer-limit: %v", err)
		}
	}
	s.c.signal(s.replica, syscall.SIGCONT)
	if mode == "switch" {
		time.Sleep(200 * time.Millisecond) // the sentinels see the replica answer again
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			out, err := s.c.cli(s.sentinels[0], "SENTINEL", "FAILOVER", sentinelMaster)
			if err == nil && out == "OK" {
				break
			}
			if time.Now().After(deadline) {
				ld.finish()
				t.Fatalf("SENTINEL FAILOVER: %s %v", out, err)
			}
		}
	}
	var promoted time.Time
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if s.masterAddr() == s.replica.Addr && s.c.info(s.replica, "INFO", "replication")["role"] == "master" {
			promoted = time.Now()
			break
		}
	}
	if mode == "stop" {
		s.c.signal(s.master, syscall.SIGCONT) // it comes back, and the sentinels make it a replica
	}
	if promoted.IsZero() {
		ld.finish()
		t.Fatalf("the replica %d was not promoted within 30 s", s.replica.Port)
	}
	time.Sleep(max(4*time.Second, time.Until(began.Add(23*time.Second))))
	ds := ld.finish()

	r := failoverRun{mode: mode, promotedAfter: promoted.Sub(gapEnd), faulted: gapEnd, ack: e.store.ReplicaAckStats()}
	if mode == "switch" {
		// The old master admitted until Sentinel demoted it, and the
		// replica missed all of it: the gap runs to the promotion.
		gapEnd = promoted
	}
	r.tally(ds)
	r.overKeys, r.overPeak, r.excess = checkWindows(ds, failLimit, failWindow)
	// Admissions decided wholly within the gap, and how many of them the
	// new master holds.
	nm := redis.NewClient(&redis.Options{Addr: s.replica.Addr})
	defer nm.Close()
	for _, k := range e.keys {
		gap := 0
		for _, d := range ds {
			if d.key == k && d.err == nil && d.allowed && !d.start.Before(gapStart) && d.start.Add(d.took).Before(gapEnd) {
				gap++
			}
		}
		held, err := nm.ZCount(context.Background(), e.store.LogKey(e.l.Name(), k),
			strconv.FormatInt(gapStart.UnixMicro(), 10), strconv.FormatInt(gapEnd.UnixMicro(), 10)).Result()
		if err != nil {
			t.Fatalf("count the entries of %s: %v", k, err)
		}
		r.gapAdmits += gap
		r.lost += max(0, gap-int(held))
	}
	_ = client
	if r.errors > 0 {
		t.Logf("%d errors, first %v", r.errors, firstErr(ds))
	}
	return r
}

// sentinelRows runs the Sentinel failovers of one configuration and logs
// one row per mode.
func sentinelRows(t *testing.T, name string, storeOpts ...redisstore.Option) []failoverRun {
	var all []failoverRun
	for _, mode := range []string{"kill", "stop", "switch"} {
		t.Run("sentinel-"+mode, func(t *testing.T) {
			r := sentinelFailover(t, mode, storeOpts...)
			all = append(all, r)
			how := map[string]string{
				"kill":   "kill -9 of the master",
				"stop":   "SIGSTOP of the master until the replica is promoted",
				"switch": "SENTINEL FAILOVER (planned)",
			}[mode]
			t.Logf("FAULT FAILOVER Sentinel %s %s: admitted=%d gap_admissions=%d lost=%d keys_over=%d peak=%d (limit %d) excess=%d errors=%d failure_mode=%d slowest=%s promoted %v after the gap; kept %+v",
				name, mode, r.admitted, r.gapAdmits, r.lost, r.overKeys, r.overPeak, failLimit, r.excess, r.errors, r.byFailureMode, r.slowestNote(), r.promotedAfter.Round(time.Millisecond), r.ack)
			r.checkBounded(t)
			faultReport.mu.Lock()
			faultReport.failover = append(faultReport.failover, fmt.Sprintf("| Sentinel, %s | %s | 1 | %d | %d | %d | %d | %d (limit %d) | %d | replica promoted %v after the gap |",
				name, how, r.admitted, r.gapAdmits, r.lost, r.overKeys, r.overPeak, failLimit, r.errors, r.promotedAfter.Round(100*time.Millisecond)))
			faultReport.mu.Unlock()
		})
	}
	return all
}
