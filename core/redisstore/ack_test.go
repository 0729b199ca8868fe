package redisstore_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
	"github.com/stretchr/testify/require"
)

func TestReplicaAckOptions(t *testing.T) {
	client := redistest.ClusterClient(t) // ClusterOptions: ReadTimeout 500 ms
	tests := []struct {
		name     string
		replicas int
		timeout  time.Duration
	}{
		{"no replicas", 0, 50 * time.Millisecond},
		{"negative replicas", -1, 50 * time.Millisecond},
		{"zero timeout", 1, 0},
		{"timeout under a millisecond", 1, time.Microsecond},
		{"timeout at the read timeout", 1, client.Options().ReadTimeout},
		// WAIT's reply is owed for up to the timeout: a master waiting
		// for its replicas must not look stalled (issue 30).
		{"timeout the stall timeout cannot cover", 1, redisstore.DefaultStallTimeout - redisstore.DefaultStallTimeout/8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := redisstore.New(client, redisstore.WithReplicaAck(tt.replicas, tt.timeout))
			if !errors.Is(err, slidelog.ErrInvalidOption) {
				t.Fatalf("got error %v, want one wrapping ErrInvalidOption", err)
			}
		})
	}
}

// With replicas that keep up, the option changes no decision.
func TestReplicaAckConformance(t *testing.T) {
	client := redistest.ClusterClient(t)
	slidelogtest.RunStoreSuite(t, func(t *testing.T, clock func() time.Time) slidelog.Store {
		return newRedisStore(t, client, redisstore.WithClock(clock), redisstore.WithReplicaAck(1, 400*time.Millisecond), redisstore.WithStallTimeout(time.Second))
	})
}

// On the Cluster every master has a replica: admissions are acknowledged
// and nothing is kept.
func TestReplicaAckAcknowledged(t *testing.T) {
	client := redistest.ClusterClient(t)
	s := newRedisStore(t, client, redisstore.WithReplicaAck(1, 400*time.Millisecond), redisstore.WithStallTimeout(time.Second))
	p := slidelog.Policy{Limit: 1000, Window: time.Minute}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 25 {
				req := slidelog.Request{Namespace: "ack", Key: "k" + string(rune('a'+g)), Cost: 1, Policies: []slidelog.Policy{p}, ID: uint64(g*1000 + i + 1)}
				res, err := s.Take(t.Context(), req)
				if err != nil || !res.Allowed {
					t.Errorf("take %d of caller %d: got %v, %v; want an admission", i, g, res.Allowed, err)
					return
				}
			}
		})
	}
	wg.Wait()
	got := s.ReplicaAckStats()
	if got.Unacknowledged != 0 || got.Pending != 0 {
		t.Errorf("got %+v, want nothing unacknowledged with a healthy replica per master", got)
	}
}

// A server without replicas acknowledges nothing: every admission is
// kept, and when the server loses them (as a promoted replica that missed
// them would), they are written back before the key's next decision.
func TestReplicaAckWritesBackLostAdmissions(t *testing.T) {
	client := redistest.RedisClient(t) // no replicas
	tests := []struct {
		name   string
		policy slidelog.Policy
	}{
		{"exact", slidelog.Policy{Limit: 3, Window: time.Minute}},
		{"bucketed", slidelog.Policy{Limit: 3, Window: time.Minute, Precision: time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
			clock := func() time.Time { return now }
			s := newRedisStore(t, client, redisstore.WithClock(clock), redisstore.WithReplicaAck(1, 2*time.Millisecond))
			req := slidelog.Request{Namespace: "ack", Key: "lost", Cost: 1, Policies: []slidelog.Policy{tt.policy}}
			for i := range 3 {
				req.ID = uint64(i + 1)
				res, err := s.Take(t.Context(), req)
				require.NoError(t, err)
				require.True(t, res.Allowed, "take %d", i+1)
				now = now.Add(time.Millisecond)
			}
			// Each take wrote the kept admissions of unknown identity (the
			// common path does not learn the server's) once more, learning it.
			stats := s.ReplicaAckStats()
			require.Equal(t, redisstore.ReplicaAckStats{Unacknowledged: 3, WrittenBack: 1, Pending: 3}, stats)

			// The master loses its writes.
			key := s.LogKey(req.Namespace, req.Key)
			require.NoError(t, client.Del(t.Context(), key, key+":c", key+":s", key+":b", key+":r").Err())
			now = now.Add(2 * time.Second)

			req.ID = 4
			res, err := s.Take(t.Context(), req)
			require.NoError(t, err)
			if res.Allowed {
				t.Fatalf("got an admission after the master lost 3 of 3; want the kept admissions written back first")
			}
			stats = s.ReplicaAckStats()
			if stats.WrittenBack != 1+3 || stats.Pending != 3 {
				t.Errorf("got %+v, want 3 more written back and still kept (no replica acknowledged them)", stats)
			}
			// A refund forgets the kept admission too.
			require.NoError(t, s.Refund(t.Context(), slidelog.Request{Namespace: req.Namespace, Key: req.Key, Cost: 1, Policies: req.Policies, ID: 1}))
			if got := s.ReplicaAckStats().Pending; got != 2 {
				t.Errorf("got %d kept after a refund, want 2", got)
			}
			require.NoError(t, s.Reset(t.Context(), req))
			if got := s.ReplicaAckStats().Pending; got != 0 {
				t.Errorf("got %d kept after a reset, want 0", got)
			}
		})
	}
}

// A master without the replicas WithReplicaAck waits for is named in a
// warning at New.
func TestReplicaAckWarnsWithoutReplicas(t *testing.T) {
	client := redistest.RedisClient(t) // no replicas
	var logs bytes.Buffer
	newRedisStore(t, client, redisstore.WithReplicaAck(1, 10*time.Millisecond), redisstore.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if !strings.Contains(logs.String(), "fewer replicas than WithReplicaAck") || !strings.Contains(logs.String(), client.Options().Addr) {
		t.Errorf("got logs %q, want a warning naming %s", logs.String(), client.Options().Addr)
	}
}

// A master with more replicas than WithReplicaAck waits for is named in a
// warning at New: a failover may promote a replica that did not
// acknowledge (TestReplicaAckTwoReplicasSentinel measures what it loses).
func TestReplicaAckWarnsWithMoreReplicas(t *testing.T) {
	master := redistest.StartServer(t, redistest.ServerConfig{Args: []string{"--repl-diskless-sync-delay", "0"}})
	for range 2 {
		redistest.StartServer(t, redistest.ServerConfig{ReplicaOf: master.Addr})
	}
	mc := redis.NewClient(&redis.Options{Addr: master.Addr})
	t.Cleanup(func() { _ = mc.Close() })
	require.NoError(t, mc.Set(t.Context(), "warm", 1, 0).Err())
	require.Equal(t, int64(2), mc.Do(t.Context(), "WAIT", 2, 10000).Val(), "both replicas acknowledge")
	for _, tc := range []struct {
		ack  int
		warn bool
	}{{1, true}, {2, false}} {
		var logs bytes.Buffer
		client := redis.NewClient(redisstore.ClientOptions(master.Addr))
		t.Cleanup(func() { _ = client.Close() })
		newRedisStore(t, client, redisstore.WithReplicaAck(tc.ack, 10*time.Millisecond), redisstore.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		got := strings.Contains(logs.String(), "more replicas than WithReplicaAck") && strings.Contains(logs.String(), master.Addr)
		if got != tc.warn {
			t.Errorf("WithReplicaAck(%d) on a master with 2 replicas: got logs %q, want a warning naming %s: %v", tc.ack, logs.String(), master.Addr, tc.warn)
		}
	}
}
