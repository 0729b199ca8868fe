package redisstore_test

import (
	"context"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/internal/logbuf"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
)

// concurrentTakes runs n decisions of req at once, each with its own ID,
// retrying a call that fails for up to 3 s (a client finding the new
// master), and returns how many were admitted.
func concurrentTakes(t *testing.T, s *redisstore.Store, req slidelog.Request, n int) int {
	t.Helper()
	var admitted atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			r := req
			r.ID = uint64(1_000_000 + i)
			for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				res, err := s.Take(context.Background(), r)
				if err == nil {
					if res.Allowed {
						admitted.Add(1)
					}
					return
				}
				if time.Now().After(deadline) {
					t.Errorf("decision %d: %v", i, err)
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	return int(admitted.Load())
}

// Issue 30: every decision of a key writes its kept admissions back
// before it decides, not only the first one. The master loses the
// admissions no replica acknowledged (a simulated promotion of a replica
// that missed them), and 64 decisions of the key come at once: none may
// be admitted, and the log never holds more than the limit. Before,
// the first decision took the kept admissions out of the journal and the
// others decided on the empty log.
func TestWriteBackBeforeEveryConcurrentDecision(t *testing.T) {
	client := redistest.RedisClient(t) // no replicas: nothing is acknowledged
	const limit = 5
	for _, p := range []slidelog.Policy{
		{Limit: limit, Window: time.Minute},
		{Limit: limit, Window: time.Minute, Precision: time.Second},
	} {
		t.Run(p.String(), func(t *testing.T) {
			var now atomic.Int64
			now.Store(time.Now().UnixMicro())
			clock := func() time.Time { return time.UnixMicro(now.Load()) }
			s := newRedisStore(t, client, redisstore.WithClock(clock), redisstore.WithReplicaAck(1, 2*time.Millisecond))
			req := slidelog.Request{Namespace: "wb", Key: "concurrent", Cost: 1, Policies: []slidelog.Policy{p}}
			for i := range limit {
				req.ID = uint64(i + 1)
				res, err := s.Take(t.Context(), req)
				require.NoError(t, err)
				require.True(t, res.Allowed, "take %d", i+1)
				now.Add(1000)
			}
			key := s.LogKey(req.Namespace, req.Key)
			require.NoError(t, client.Del(t.Context(), key, key+":c", key+":s", key+":b", key+":r").Err())
			now.Add(int64(2 * time.Second / time.Microsecond))

			if got := concurrentTakes(t, s, req, 64); got != 0 {
				t.Errorf("got %d of 64 concurrent decisions admitted after the master lost %d kept admissions, want 0", got, limit)
			}
			if p.Precision == 0 {
				if n := client.ZCard(t.Context(), key).Val(); n > limit {
					t.Errorf("got ZCARD %d, want at most the limit %d", n, limit)
				}
			}
		})
	}
}

// Issue 30, on a real promotion: a master and its replica behind one
// name (a client whose dialer resolves the name to whichever is master,
// as a managed service's primary endpoint or a VIP does). The replica
// misses the master's last admissions, which no replica acknowledged; the
// master dies (kill -9) and the replica is promoted. 64 decisions of the
// key at once right after: none may be admitted, whatever the client
// cannot see of the change, and the new master's log holds no more than
// the limit. Independently of the store, the admissions of the key over
// the whole test (all inside one window) are at most the limit.
func TestWriteBackAfterRealPromotion(t *testing.T) {
	t.Parallel() // servers of its own: see ownServers
	master := redistest.StartServer(t, redistest.ServerConfig{})
	replica := redistest.StartServer(t, redistest.ServerConfig{ReplicaOf: master.Addr}) // in sync when it returns
	masterAddr, replicaAddr := master.Addr, replica.Addr
	var current atomic.Value
	current.Store(masterAddr)
	client := redis.NewClient(&redis.Options{
		Addr: "limiter-primary:6379", // a name the dialer resolves
		Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{Timeout: time.Second}).DialContext(ctx, network, current.Load().(string))
		},
		MaxRetries: -1,
	})
	t.Cleanup(func() { client.Close() })
	s, err := redisstore.New(client, redisstore.WithReplicaAck(1, 20*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	const limit = 20
	req := slidelog.Request{Namespace: "wb", Key: "promoted", Cost: 1, Policies: []slidelog.Policy{{Limit: limit, Window: time.Minute}}}
	admitted := 0
	take := func(id uint64) {
		req.ID = id
		res, err := s.Take(t.Context(), req)
		require.NoError(t, err)
		require.True(t, res.Allowed, "take %d", id)
		admitted++
	}
	for i := range 5 {
		take(uint64(i + 1))
	}
	require.Zero(t, s.ReplicaAckStats().Pending, "acknowledged admissions are not kept")

	// The replica misses what follows: stopped, its link cut.
	require.NoError(t, replica.Signal(syscall.SIGSTOP))
	mc := redis.NewClient(&redis.Options{Addr: masterAddr})
	require.NoError(t, mc.Do(t.Context(), "CLIENT", "KILL", "TYPE", "replica").Err())
	mc.Close()
	for i := 5; i < limit; i++ {
		take(uint64(i + 1))
	}
	if got := s.ReplicaAckStats().Pending; got != limit-5 {
		t.Fatalf("got %d kept admissions, want %d", got, limit-5)
	}

	// The master dies; the replica is promoted and the name follows it.
	require.NoError(t, master.Signal(syscall.SIGKILL))
	require.NoError(t, replica.Signal(syscall.SIGCONT))
	rc := redis.NewClient(&redis.Options{Addr: replicaAddr})
	defer rc.Close()
	require.NoError(t, rc.Do(t.Context(), "REPLICAOF", "NO", "ONE").Err())
	current.Store(replicaAddr)
	key := s.LogKey(req.Namespace, req.Key)
	require.EqualValues(t, 5, rc.ZCard(t.Context(), key).Val(), "the promoted replica holds only the acknowledged admissions")

	after := concurrentTakes(t, s, req, 64)
	if after != 0 {
		t.Errorf("got %d of 64 concurrent decisions admitted right after the promotion, want 0 (%d admitted before in the same window, limit %d)", after, admitted, limit)
	}
	if admitted+after > limit {
		t.Errorf("got %d admissions in one window, want at most %d", admitted+after, limit)
	}
	if n := rc.ZCard(t.Context(), key).Val(); n > limit {
		t.Errorf("got ZCARD %d on the new master, want at most the limit %d", n, limit)
	}
	t.Logf("new master holds %d entries; %+v", rc.ZCard(t.Context(), key).Val(), s.ReplicaAckStats())
}

// A limiter's fallback admissions handed to the store (slidelog.Keeper)
// are written within every decision of their key until written: 64
// decisions of the key at once, right after, admit nothing over the limit.
func TestKeptFallbackAdmissionsBeforeEveryConcurrentDecision(t *testing.T) {
	for name, client := range map[string]redis.UniversalClient{"Standalone": redistest.RedisClient(t), "Cluster": redistest.ClusterClient(t)} {
		t.Run(name, func(t *testing.T) {
			const limit = 5
			s := newRedisStore(t, client)
			p := slidelog.Policy{Limit: limit, Window: time.Minute}
			req := slidelog.Request{Namespace: "wb", Key: "fallback", Cost: 1, Policies: []slidelog.Policy{p}}
			at := time.Now().Add(-time.Second)
			for i := range limit {
				r := req
				r.ID = uint64(i + 1)
				s.Keep(r, at)
			}
			require.Equal(t, limit, s.Unwritten())
			if got := concurrentTakes(t, s, req, 64); got != 0 {
				t.Errorf("got %d of 64 concurrent decisions admitted with %d fallback admissions kept at limit %d, want 0", got, limit, limit)
			}
			if n := client.ZCard(t.Context(), s.LogKey(req.Namespace, req.Key)).Val(); n != limit {
				t.Errorf("got ZCARD %d, want the %d fallback admissions once", n, limit)
			}
			require.Zero(t, s.Unwritten())
		})
	}
}

// A fallback admission the store's journal has no room for will never be
// counted by Redis: the store says so, not once per admission.
func TestKeepLogsJournalFull(t *testing.T) {
	var buf logbuf.Buffer
	s := newRedisStore(t, redistest.RedisClient(t), redisstore.WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	p := slidelog.Policy{Limit: 5, Window: time.Hour}
	at := time.Now()
	for i := range 100_000 + 10 {
		s.Keep(slidelog.Request{Namespace: "wb", Key: strconv.Itoa(i), ID: uint64(i + 1), Cost: 1, Policies: []slidelog.Policy{p}}, at)
	}
	require.Equal(t, uint64(10), s.ReplicaAckStats().Dropped)
	lines := buf.Lines("journal full")
	require.Len(t, lines, 1, "got %d records for 10 dropped admissions, want 1:\n%s", len(lines), lines)
	require.Contains(t, lines[0], "dropped=1")
}
