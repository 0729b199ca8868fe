package redisstore_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestCloseMidFlood closes a store while 16 callers decide on fresh keys
// over a client that has sent nothing yet, so the store meets its nodes
// during the flood. A call that finds a node only after Close must not
// start a sender for it: every call ends with a decision or ErrClosed,
// none decides after an ErrClosed, every batcher ends closed with no
// sender, and no goroutine of the store outlives Close.
func TestCloseMidFlood(t *testing.T) {
	// A store closed before its first call has met no node: each call
	// after Close meets one for the first time and must still end with
	// ErrClosed, not a decision.
	for _, pc := range redistest.PlainClients() {
		t.Run(pc.Name+"/closed_first", func(t *testing.T) {
			client := pc.New(t)
			s, err := redisstore.NewUnchecked(client, redisstore.WithKeyPrefix(redistest.KeyPrefix(t, client)))
			require.NoError(t, err)
			require.NoError(t, redisstore.MatchServer(t.Context(), s, probe(t, pc.Name)))
			before := goleak.IgnoreCurrent()
			require.NoError(t, s.Close())
			for i := range 64 {
				req := slidelog.Request{Namespace: "close", Key: fmt.Sprintf("first-%d", i), Cost: 1, Policies: []slidelog.Policy{{Limit: 5, Window: time.Minute}}, ID: uint64(i + 1)}
				res, err := s.Take(t.Context(), req)
				require.ErrorIs(t, err, slidelog.ErrClosed, "call %d after Close: %+v", i, res)
				require.False(t, res.Allowed)
			}
			open, senders := redisstore.OpenBatchers(s)
			require.Zero(t, open, "batchers open after Close")
			require.Zero(t, senders, "senders counted after Close")
			goleak.VerifyNone(t, before)
		})
	}

	for _, pc := range redistest.PlainClients() {
		t.Run(pc.Name, func(t *testing.T) {
			for round := range 5 {
				client := pc.New(t)
				s, err := redisstore.NewUnchecked(client, redisstore.WithKeyPrefix(redistest.KeyPrefix(t, client)))
				require.NoError(t, err)
				require.NoError(t, redisstore.MatchServer(t.Context(), s, probe(t, pc.Name)))
				policy := slidelog.Policy{Limit: 100, Window: time.Minute}
				before := goleak.IgnoreCurrent()

				start := make(chan struct{})
				var wg sync.WaitGroup
				errs := make(chan error, 16)
				for g := range 16 {
					wg.Go(func() {
						<-start
						closed := false
						for i := range 200 {
							req := slidelog.Request{Namespace: "close", Key: fmt.Sprintf("r%d-g%d-%d", round, g, i), Cost: 1, Policies: []slidelog.Policy{policy}, ID: uint64(g<<20 | i + 1)}
							res, err := s.Take(t.Context(), req)
							switch {
							case errors.Is(err, slidelog.ErrClosed):
								closed = true
								if res.Allowed {
									errs <- fmt.Errorf("ErrClosed with an admission: %+v", res)
									return
								}
							case err != nil:
								errs <- err
								return
							case closed:
								errs <- fmt.Errorf("a decision after ErrClosed: %+v", res)
								return
							}
						}
					})
				}
				close(start)
				time.Sleep(time.Duration(round+1) * time.Millisecond)
				require.NoError(t, s.Close())
				wg.Wait()
				close(errs)
				for err := range errs {
					require.NoError(t, err)
				}
				open, senders := redisstore.OpenBatchers(s)
				require.Zero(t, open, "batchers left open after Close")
				require.Zero(t, senders, "senders counted after Close")
				goleak.VerifyNone(t, before)
			}
		})
	}
}

// probe returns a client of the test servers of the PlainClients entry
// name, other than the one under test, to read their version with.
func probe(t *testing.T, name string) redis.UniversalClient {
	if name == "cluster" {
		return redistest.ClusterClient(t)
	}
	return redistest.RedisClient(t)
}
