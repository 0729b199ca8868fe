package redisstore_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
)

// The schedule of a failover run with two replicas (ackLimit per
// ackWindow, each key offered its admissions in three phases): ackBefore
// admissions while both replicas keep up; then one replica (the
// laggard) stops receiving the master's writes and ackLimit more calls
// fill the window (ackLimit-ackBefore admitted, acknowledged by the other
// replica alone); then the failover; then ackLimit more calls. The
// window is longer than the run: every admission of a key counts in one
// window, and the checker's fullest window is a key's total.
const (
	ackLimit  = 10
	ackWindow = time.Minute
	ackBefore = 3
	ackKeys   = 6
)

// ackLoad is one limiter's share of a run: its store, acknowledged by n
// replicas, its keys, and the admissions it made, each with the start and
// end of its call, for the independent checker.
type ackLoad struct {
	n      int
	store  *redisstore.Store
	l      *slidelog.Limiter
	keys   []string
	probe  string // a key of the same master, for backOnRedis
	before int    // admissions made before the failover

	mu       sync.Mutex
	admitted []slidelogtest.Admission
	errs     []error
}

// newAckLoad makes a limiter of ackLimit per ackWindow on a store of
// client with WithReplicaAck(n, 50ms), FailClosed (so that the
// fallback's own bound does not blur the figure) and no deny cache (which
// would keep a full key denied after the failover and hide what the new
// master admits). Its stall timeout is 1 s: on a busy machine a master
// whose calls each wait 50 ms for a replica that does not answer must not
// be judged stalled. keys picks the keys from candidate names.
func newAckLoad(t *testing.T, client redis.UniversalClient, n int, keys func(s *redisstore.Store, name string) bool) *ackLoad {
	t.Helper()
	s, err := redisstore.New(client, redisstore.WithKeyPrefix(redistest.KeyPrefix(t, client)),
		redisstore.WithReplicaAck(n, 50*time.Millisecond), redisstore.WithStallTimeout(time.Second), redisstore.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	name := "ack" + strconv.Itoa(n)
	l, err := slidelog.New(s, slidelog.Policy{Name: "q", Limit: ackLimit, Window: ackWindow}, slidelog.WithName(name),
		slidelog.WithFailureMode(slidelog.FailClosed), slidelog.WithDenyCache(0), slidelog.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	a := &ackLoad{n: n, store: s, l: l}
	for i := 0; len(a.keys) < ackKeys+1; i++ {
		if k := "k" + strconv.Itoa(i); keys == nil || keys(s, s.LogKey(name, k)) {
			a.keys = append(a.keys, k)
		}
	}
	a.probe, a.keys = a.keys[ackKeys], a.keys[:ackKeys]
	return a
}

// offer sends every key count calls, one after another, the keys at
// once, and returns how many were admitted.
func (a *ackLoad) offer(ctx context.Context, count int) int {
	var wg sync.WaitGroup
	total := 0
	for _, k := range a.keys {
		wg.Go(func() {
			for range count {
				start := time.Now()
				res, err := a.l.Allow(ctx, k)
				end := time.Now()
				a.mu.Lock()
				switch {
				case err != nil:
					a.errs = append(a.errs, err)
				case res.Source != redisstore.Source:
					a.errs = append(a.errs, fmt.Errorf("%s decided by %q (allowed %v), not on Redis", k, res.Source, res.Allowed))
				case res.Allowed:
					a.admitted = append(a.admitted, slidelogtest.Admission{Key: k, Start: start, End: end})
					total++
				}
				a.mu.Unlock()
			}
		})
	}
	wg.Wait()
	return total
}

// backOnRedis waits until the limiter decides on Redis again, with a key
// of its own on the same master as its keys.
func (a *ackLoad) backOnRedis(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, err := a.l.Allow(t.Context(), a.probe)
		if err == nil && res.Source == redisstore.Source {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("store with WithReplicaAck(%d) not back on Redis 20 s after the failover: %v %+v", a.n, err, res)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// held counts, per key, the admissions the server at addr holds.
func (a *ackLoad) held(t *testing.T, addr string) map[string]int {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	out := make(map[string]int)
	for _, k := range a.keys {
		n, err := c.ZCard(t.Context(), a.store.LogKey(a.l.Name(), k)).Result()
		require.NoError(t, err)
		out[k] = int(n)
	}
	return out
}

// ackResult is what the checker found in one limiter's share of a run.
type ackResult struct {
	n                 int
	before, after     int // admissions before and after the failover, all keys
	missing           int // admissions before the failover the promoted replica lacked, all keys
	fullest, overKeys int // the fullest window of any key; keys over ackLimit
	pendingAtFailover int // what the store kept (ReplicaAckStats.Pending) just before the failover
	errors            int
	firstErr          error
	promotedAfter     time.Duration
}

func (r ackResult) String() string {
	return fmt.Sprintf("WithReplicaAck(%d): admitted %d before the failover (%d of them missing on the promoted replica, %d kept by the store) and %d after; fullest window %d (limit %d, bound %d), %d keys of %d over the limit; %d errors",
		r.n, r.before, r.missing, r.pendingAtFailover, r.after, r.fullest, ackLimit, 2*ackLimit, r.overKeys, ackKeys, r.errors)
}

// check runs the independent checker over the admissions.
func (a *ackLoad) check(r *ackResult) {
	a.mu.Lock()
	defer a.mu.Unlock()
	fullest, over := slidelogtest.CheckWindows(a.admitted, ackLimit, ackWindow)
	for _, f := range fullest {
		r.fullest = max(r.fullest, f.Units)
	}
	r.overKeys = len(over)
	r.errors = len(a.errs)
	if len(a.errs) > 0 {
		r.firstErr = a.errs[0]
	}
}

// Two replicas, WithReplicaAck(1, ...) and WithReplicaAck(2, ...) side by
// side, on Sentinel: one replica (the laggard, behind a proxy that cuts
// its link and keeps it open, as a partition does) stops receiving the
// master's writes, the window fills with admissions only the other
// replica acknowledged, then the master dies and the Sentinels promote:
//
//   - both replicas up, default priorities: the Sentinels promote the
//     replica that acknowledged (the highest replication offset); nothing
//     is lost with either n;
//   - both up, the laggard with the better replica-priority (10 against
//     100): the Sentinels promote it, priority before offset;
//   - the replica that acknowledged dies with the master: only the
//     laggard is left, and it is promoted;
//   - the same, the master set with min-replicas-to-write 2: it still
//     takes writes while the laggard's last acknowledgement is at most
//     min-replicas-max-lag (10 s) old, and the laggard's link is open.
//
// In the last three, WithReplicaAck(1) loses every admission the laggard
// missed (the store forgot them once one replica acknowledged): per key
// up to one window's worth, so a window holds up to twice the limit.
// WithReplicaAck(2) kept them (one replica of two acknowledged) and
// writes them into the new master before it decides: no window passes
// the limit. The checker trusts only the clients' record of when each
// admitted call started and ended.
func TestReplicaAckTwoReplicasSentinel(t *testing.T) {
	t.Parallel() // servers of its own: see ownServers
	for _, tc := range []struct {
		name        string
		priority    bool // the laggard has the better replica-priority
		ackerDies   bool // the replica that acknowledged dies with the master
		minReplicas bool // the master has min-replicas-to-write 2
		promoted    int  // the replica the Sentinels must promote (0 acknowledged, 1 lagged)
	}{
		{name: "laggard up, default priorities", promoted: 0},
		{name: "laggard up, preferred by replica-priority", priority: true, promoted: 1},
		{name: "acknowledging replica dies with the master", ackerDies: true, promoted: 1},
		{name: "acknowledging replica dies, min-replicas-to-write 2", ackerDies: true, minReplicas: true, promoted: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var laggard *linkProxy
			bed := redistest.StartSentinels(t, redistest.SentinelConfig{
				Name: "ack", Replicas: 2, DownAfter: time.Second, RaisePriority: true,
				// A Sentinel points a replica that replicates from another
				// address than the master's (the laggard, through its
				// proxy) at the master once failover-timeout has passed
				// since it found it (+fix-slave-config): the laggard
				// would catch up. Until the master dies, a timeout
				// longer than the run; then the 10 s of a failover.
				FailoverTimeout: 10 * time.Minute,
				// The Sentinels choose from their replicas' last INFO:
				// fresh, it has the acknowledged replica ahead.
				InfoPeriod: time.Second,
				// Each replica's first sync at once, not after Redis 7's 5 s
				// wait for more replicas.
				Args: []string{"--repl-diskless-sync-delay", "0"},
				ReplicaOf: func(i int, master string) (string, error) {
					if i != 1 {
						return "", nil
					}
					laggard = newLinkProxy(t, master)
					return laggard.Addr(), nil
				},
				ReplicaArgs: func(i int) []string {
					if tc.priority && i == 1 {
						return []string{"--replica-priority", "10"}
					}
					return nil
				},
			})
			if tc.minReplicas {
				mc := redis.NewClient(&redis.Options{Addr: bed.Master.Addr})
				require.NoError(t, mc.ConfigSet(t.Context(), "min-replicas-to-write", "2").Err())
				_ = mc.Close()
			}
			client := redis.NewFailoverClient(redisstore.FailoverOptions("ack", bed.Addrs()...))
			t.Cleanup(func() { _ = client.Close() })
			loads := []*ackLoad{newAckLoad(t, client, 1, nil), newAckLoad(t, client, 2, nil)}
			results := runAckFailover(t, loads, ackFault{
				cut: laggard.Cut,
				fail: func() {
					bed.Master.Kill()
					if tc.ackerDies {
						bed.Replicas[0].Kill()
					}
					require.NoError(t, bed.Set(t.Context(), "failover-timeout", "10000"))
				},
				promoted:  func() bool { return bed.MasterAddr(t.Context()) == bed.Replicas[tc.promoted].Addr },
				newMaster: bed.Replicas[tc.promoted].Addr,
				explain:   func() string { return sentinelsSaid(t, bed) },
				ready: func() error {
					return sentinelsReady(t.Context(), bed, !tc.ackerDies, bed.Replicas[tc.promoted])
				},
			})
			checkAckResults(t, results, tc.promoted == 1)
		})
	}
}

// ackFault is how a run cuts the laggard off, fails the master, and
// learns that the expected replica was promoted.
type ackFault struct {
	cut       func()
	fail      func()
	promoted  func() bool
	newMaster string
	// ready, when set, returns nil once the failover would promote
	// newMaster: for Sentinels, once each one's view of the replicas
	// ranks it first. The run waits for it before failing the master.
	ready func() error
	// explain, when set, says why promoted has not come true: the
	// Sentinels' or nodes' logs of the failover.
	explain func() string
}

// runAckFailover runs the schedule on loads and returns what the checker
// found in each.
func runAckFailover(t *testing.T, loads []*ackLoad, f ackFault) []ackResult {
	t.Helper()
	ctx := t.Context()
	each := func(fn func(a *ackLoad)) {
		var wg sync.WaitGroup
		for _, a := range loads {
			wg.Go(func() { fn(a) })
		}
		wg.Wait()
	}
	each(func(a *ackLoad) { a.before += a.offer(ctx, ackBefore) })
	f.cut()
	each(func(a *ackLoad) { a.before += a.offer(ctx, ackLimit) })
	results := make([]ackResult, len(loads))
	for i, a := range loads {
		results[i] = ackResult{n: a.n, pendingAtFailover: a.store.ReplicaAckStats().Pending}
	}
	if f.ready != nil {
		start := time.Now()
		for err := f.ready(); err != nil; err = f.ready() {
			if time.Since(start) > 15*time.Second {
				why := ""
				if f.explain != nil {
					why = f.explain()
				}
				t.Fatalf("before the failover: %v%s", err, why)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	f.fail()
	failed := time.Now()
	for !f.promoted() {
		// A failover whose leader election fails is tried again after
		// twice failover-timeout (20 s): the wait covers a second try.
		if time.Since(failed) > 45*time.Second {
			why := ""
			if f.explain != nil {
				why = f.explain()
			}
			t.Fatalf("%s not promoted within 45 s%s", f.newMaster, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
	promotedAfter := time.Since(failed)
	for i, a := range loads {
		// Before any decision reaches the new master (and writes back
		// what the store kept): what it holds of the window.
		for _, h := range a.held(t, f.newMaster) {
			results[i].missing -= h
		}
		results[i].missing += a.before
	}
	each(func(a *ackLoad) { a.backOnRedis(t) })
	for i, a := range loads {
		results[i].after = a.offer(ctx, ackLimit)
		results[i].before = a.before
		results[i].promotedAfter = promotedAfter
		a.check(&results[i])
	}
	return results
}

// checkAckResults holds each result to its bound: no window over the
// limit when the replica that acknowledged was promoted or the store
// waited for both replicas (n = 2); otherwise at most twice the limit.
func checkAckResults(t *testing.T, results []ackResult, laggardPromoted bool) {
	t.Helper()
	for _, r := range results {
		t.Logf("ACK %s: %s; promoted %v after the master's death", t.Name(), r, r.promotedAfter.Round(100*time.Millisecond))
		if r.errors > 0 {
			t.Errorf("WithReplicaAck(%d): %d errors, first %v", r.n, r.errors, r.firstErr)
		}
		if r.before != ackLimit*ackKeys {
			t.Errorf("WithReplicaAck(%d): %d admitted before the failover, want %d (the window full)", r.n, r.before, ackLimit*ackKeys)
		}
		if kept := (ackLimit - ackBefore) * ackKeys; r.n == 2 && r.pendingAtFailover < kept {
			t.Errorf("WithReplicaAck(2): the store kept %d admissions at the failover, want at least the %d that one replica of two acknowledged", r.pendingAtFailover, kept)
		}
		// The run's premise: the laggard missed what only the other
		// replica acknowledged, and the replica that acknowledged lacks
		// nothing.
		if laggardPromoted && r.missing == 0 {
			t.Errorf("WithReplicaAck(%d): the promoted laggard lacked no admission: its link was not cut, and the run measured nothing", r.n)
		}
		if !laggardPromoted && r.missing != 0 {
			t.Errorf("WithReplicaAck(%d): the promoted replica, which acknowledged, lacked %d admissions", r.n, r.missing)
		}
		bound := ackLimit
		if laggardPromoted && r.n == 1 {
			bound = 2 * ackLimit
		}
		if r.fullest > bound {
			t.Errorf("WithReplicaAck(%d): a window of %d admissions, above the bound %d", r.n, r.fullest, bound)
		}
	}
}

// The same on a Redis Cluster (3 masters, each with two replicas): one
// shard's laggard is stopped and its replication link cut (it cannot
// reconnect, so the master's writes stay on the master and on the other
// replica), the window fills, then the master dies and the laggard runs
// again. The replicas elect by replication offset: with both up, the one
// that acknowledged wins (its rank is 0); when it died with the master,
// the laggard is elected. Two shards, one failover each, one after the
// other, so that a majority of masters is always there to vote.
func TestReplicaAckTwoReplicasCluster(t *testing.T) {
	t.Parallel() // servers of its own: see ownServers
	cl := redistest.StartCluster(t, redistest.ClusterConfig{
		Masters: 3, Replicas: 2, NodeTimeout: 2 * time.Second, RaisePriority: true,
		Args: []string{"--cluster-require-full-coverage", "no", "--repl-diskless-sync-delay", "0"},
	})
	client := redis.NewClusterClient(redisstore.ClusterOptions(cl.Addrs()...))
	t.Cleanup(func() { _ = client.Close() })
	for _, tc := range []struct {
		name      string
		shard     int
		ackerDies bool
	}{
		{name: "laggard up", shard: 0},
		{name: "acknowledging replica dies with the master", shard: 1, ackerDies: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Nodes are masters first, then each master's first replica,
			// then its second (redistest.ClusterConfig).
			master, acker, laggard := cl.Nodes[tc.shard], cl.Nodes[cl.Masters+tc.shard], cl.Nodes[2*cl.Masters+tc.shard]
			onShard := func(s *redisstore.Store, key string) bool {
				m, err := client.MasterForKey(t.Context(), key)
				return err == nil && m.Options().Addr == master.Addr
			}
			loads := []*ackLoad{newAckLoad(t, client, 1, onShard), newAckLoad(t, client, 2, onShard)}
			admin := func(n *redistest.Server) *redis.Client {
				c := redis.NewClient(&redis.Options{Addr: n.Addr})
				t.Cleanup(func() { _ = c.Close() })
				return c
			}
			promoted := tc.ackerDies // the laggard
			newMaster := acker
			if promoted {
				newMaster = laggard
			}
			nm := admin(newMaster)
			results := runAckFailover(t, loads, ackFault{
				cut: func() {
					// The laggard's end of its link is the master's client
					// address of it.
					link, err := admin(laggard).Do(t.Context(), "CLIENT", "LIST", "TYPE", "master").Text()
					require.NoError(t, err)
					addr := clientField(link, "laddr")
					require.NotEmpty(t, addr, "the laggard's link to its master: %q", link)
					require.NoError(t, laggard.Signal(syscall.SIGSTOP))
					require.NoError(t, admin(master).Do(t.Context(), "CLIENT", "KILL", "ADDR", addr).Err())
				},
				fail: func() {
					master.Kill()
					if tc.ackerDies {
						acker.Kill()
					}
					require.NoError(t, laggard.Signal(syscall.SIGCONT))
				},
				promoted: func() bool {
					return redistest.InfoField(nm.Info(t.Context(), "replication").Val(), "role") == "master"
				},
				newMaster: newMaster.Addr,
			})
			checkAckResults(t, results, promoted)
		})
	}
}

// clientField returns the value of field in the first line of a CLIENT
// LIST reply.
func clientField(list, field string) string {
	line, _, _ := strings.Cut(list, "\n")
	for f := range strings.FieldsSeq(line) {
		if v, ok := strings.CutPrefix(f, field+"="); ok {
			return v
		}
	}
	return ""
}

// An acknowledgement is of the connection's own writes: since Redis 7.2
// (and on Valkey) WAIT counts the replicas holding the last write that
// connection sent, and a call that writes nothing leaves the mark where
// the connection's last write put it, possibly before what the call
// relies on. Here the replica's link is partitioned (the master still
// counts it as connected) and the store's connections drop (a network
// blip), so that a call goes out on a new connection, which has written
// nothing and whose WAIT is answered at once, and writes nothing:
//
//   - a denial of a full key, whose kept admissions this master holds;
//   - a retry of an admission that ran but whose reply was lost (the
//     script finds its ID and admits it again);
//   - a Record of an admission this master holds.
//
// None of them may count as acknowledged: the store must keep what no
// replica holds, and after the master dies and its replica is promoted
// behind the same address, the key must stay within its limit. (Redis
// 7.0 and 6.2 set the mark after every command to everything written so
// far, so this passes on them either way; on Valkey 8.0.1 it failed
// before the script wrote in such calls.)
func TestReplicaAckCallWritingNothing(t *testing.T) {
	const limit = 5
	for _, tc := range []struct {
		name string
		// fill admits limit requests of one key with the store s, those
		// after link.Cut reaching no replica, then makes the call that
		// writes nothing on a new connection (front.Drop), and returns
		// what the store must keep.
		fill func(t *testing.T, s *redisstore.Store, link, front *linkProxy, take func(id uint64) bool) int
	}{
		{"a denial carrying kept admissions", func(t *testing.T, s *redisstore.Store, link, front *linkProxy, take func(uint64) bool) int {
			link.Cut()
			for id := range uint64(limit) {
				require.True(t, take(id+1), "admission %d", id+1)
			}
			require.Equal(t, limit, s.ReplicaAckStats().Pending, "no replica acknowledged: every admission kept")
			front.Drop()
			require.False(t, take(limit+1), "the key is full")
			return limit
		}},
		{"a retried admission", func(t *testing.T, s *redisstore.Store, link, front *linkProxy, take func(uint64) bool) int {
			for id := range uint64(limit - 1) {
				require.True(t, take(id+1), "admission %d", id+1)
			}
			require.Zero(t, s.ReplicaAckStats().Pending, "the replica acknowledged")
			// The last admission runs, its reply is lost; the caller
			// sends it again (same ID) on a new connection, and the
			// script finds it.
			link.Cut()
			front.CutReplies()
			_, err := s.Take(t.Context(), ackRequest(limit, limit))
			require.Error(t, err, "a call whose reply never came")
			front.MendReplies()
			front.Drop()
			require.True(t, take(limit), "the retry finds its admission")
			return 1
		}},
		{"a record of a held admission", func(t *testing.T, s *redisstore.Store, link, front *linkProxy, take func(uint64) bool) int {
			for id := range uint64(limit - 1) {
				require.True(t, take(id+1), "admission %d", id+1)
			}
			require.Zero(t, s.ReplicaAckStats().Pending, "the replica acknowledged")
			link.Cut()
			req, at := ackRequest(limit, limit), time.Now()
			require.NoError(t, s.Record(t.Context(), req, at))
			require.Equal(t, 1, s.ReplicaAckStats().Pending, "no replica acknowledged: the record kept")
			front.Drop()
			require.NoError(t, s.Record(t.Context(), req, at), "the same record again")
			return 1
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			master := redistest.StartServer(t, redistest.ServerConfig{Args: []string{"--repl-diskless-sync-delay", "0"}})
			link := newLinkProxy(t, master.Addr)
			replica := redistest.StartServer(t, redistest.ServerConfig{ReplicaOf: link.Addr()})
			// In sync is not yet acknowledging: the master counts the
			// replica once it acknowledged a first write.
			mc := redis.NewClient(&redis.Options{Addr: master.Addr})
			t.Cleanup(func() { _ = mc.Close() })
			require.NoError(t, mc.Set(t.Context(), "warm", 1, 0).Err())
			require.Equal(t, int64(1), mc.Do(t.Context(), "WAIT", 1, 5000).Val(), "the replica acknowledges")
			front := newLinkProxy(t, master.Addr) // the address the client dials, moved to the replica at the failover
			client := redis.NewClient(redisstore.ClientOptions(front.Addr()))
			t.Cleanup(func() { _ = client.Close() })
			s, err := redisstore.New(client, redisstore.WithReplicaAck(1, 50*time.Millisecond), redisstore.WithLogger(slog.New(slog.DiscardHandler)))
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			take := func(id uint64) bool {
				for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
					res, err := s.Take(t.Context(), ackRequest(limit, id))
					if err == nil {
						return res.Allowed
					}
					if time.Now().After(deadline) {
						t.Fatalf("take %d: %v", id, err)
					}
				}
			}

			want := tc.fill(t, s, link, front, take)
			assert.Equal(t, want, s.ReplicaAckStats().Pending, "a call that wrote nothing counted as acknowledged (%+v)", s.ReplicaAckStats())

			master.Kill()
			rc := redis.NewClient(&redis.Options{Addr: replica.Addr})
			t.Cleanup(func() { _ = rc.Close() })
			require.NoError(t, rc.ReplicaOf(t.Context(), "no", "one").Err())
			front.Retarget(replica.Addr)
			after := 0
			for id := range uint64(limit) {
				if take(100 + id) {
					after++
				}
			}
			t.Logf("admitted %d, then %d more on the promoted replica (limit %d per window); %+v", limit, after, limit, s.ReplicaAckStats())
			if after > 0 {
				t.Errorf("the promoted replica admitted %d more in the window: the store had let go of admissions no replica held", after)
			}
		})
	}
}

// ackRequest is request id of key k, limit per minute.
func ackRequest(limit int, id uint64) slidelog.Request {
	return slidelog.Request{Namespace: "ack", Key: "k", Cost: 1, ID: id, Policies: []slidelog.Policy{{Limit: limit, Window: time.Minute}}}
}

// sentinelsSaid returns what each Sentinel of bed says the master is and
// the last lines of its log: the failover's events (+sdown, +odown,
// +vote-for-leader, +selected-slave, -failover-abort-...).
func sentinelsSaid(t *testing.T, bed *redistest.Sentinels) string {
	var b strings.Builder
	fmt.Fprintf(&b, "; replicas as started: %s (acknowledged), %s (laggard)", bed.Replicas[0].Addr, bed.Replicas[1].Addr)
	for _, n := range bed.Sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: n.Addr})
		a, err := sc.GetMasterAddrByName(t.Context(), bed.Name).Result()
		_ = sc.Close()
		log, _ := os.ReadFile(filepath.Join(n.Dir, "redis.log"))
		lines := strings.Split(strings.TrimSpace(string(log)), "\n")
		lines = lines[max(0, len(lines)-40):]
		fmt.Fprintf(&b, "\nSentinel %s says the master is %v (%v); its log ends:\n\t%s", n.Addr, a, err, strings.Join(lines, "\n\t"))
	}
	return b.String()
}

// sentinelsReady returns nil if, in every Sentinel's view of the
// replicas (their last INFO), the laggard (Replicas[1]) has a smaller
// replication offset than the replica that acknowledged (its link is
// still cut, and the acknowledged writes are in the view), and, if both
// stay up, winner ranks above the other as a Sentinel ranks replicas for
// promotion: the lower replica-priority, then the larger offset.
func sentinelsReady(ctx context.Context, bed *redistest.Sentinels, both bool, winner *redistest.Server) error {
	acker, laggard := bed.Replicas[0].Addr, bed.Replicas[1].Addr
	for _, n := range bed.Sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: n.Addr})
		rs, err := sc.Replicas(ctx, bed.Name).Result()
		_ = sc.Close()
		if err != nil {
			return fmt.Errorf("sentinel %s: %w", n.Addr, err)
		}
		view := make(map[string]map[string]string, len(rs))
		for _, r := range rs {
			view[net.JoinHostPort(r["ip"], r["port"])] = r
		}
		num := func(addr, field string) int64 {
			v, err := strconv.ParseInt(view[addr][field], 10, 64)
			if err != nil {
				return -1
			}
			return v
		}
		if num(laggard, "slave-repl-offset") >= num(acker, "slave-repl-offset") {
			return fmt.Errorf("sentinel %s: the laggard %s is at offset %d, the replica that acknowledged %s at %d: the laggard does not lag",
				n.Addr, laggard, num(laggard, "slave-repl-offset"), acker, num(acker, "slave-repl-offset"))
		}
		other := acker
		if winner.Addr == acker {
			other = laggard
		}
		p0, p1 := num(winner.Addr, "slave-priority"), num(other, "slave-priority")
		if both && (p0 > p1 || p0 == p1 && num(winner.Addr, "slave-repl-offset") <= num(other, "slave-repl-offset")) {
			return fmt.Errorf("sentinel %s ranks %s (priority %d) above %s (priority %d)", n.Addr, other, p1, winner.Addr, p0)
		}
	}
	return nil
}
