package redisstore_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
	"github.com/stretchr/testify/require"
)

// On a node that answers, a call whose context ends before its request is
// written (which may be waiting for a new connection's handshake, and so
// watches the node's handshakes: see redisstore's claim) breaks off no
// other caller's new connection. Half of 32 callers give each call a
// deadline of up to half a millisecond, the other half none; the client
// dials a new connection for most calls (its connections idle for a
// millisecond are dropped), so that handshakes run all the time beside
// calls whose context ends. Every call without a deadline must decide.
// (A busy process, whose readers leave the node's answers waiting in the
// kernel, is TestWatchHandshakesReadsTheKernel's.)
func TestCancelledCallsSpareOtherHandshakes(t *testing.T) {
	srv := redistest.StartServer(t, redistest.ServerConfig{})
	spareHandshakes(t, srv.Addr, 100)
}

// spareHandshakes runs TestCancelledCallsSpareOtherHandshakes's callers,
// calls each, on the server at addr.
func spareHandshakes(t *testing.T, addr string, calls int) {
	client := redis.NewClient(&redis.Options{Addr: addr, ConnMaxIdleTime: time.Millisecond})
	t.Cleanup(func() { _ = client.Close() })
	store := newRedisStore(t, client, redisstore.WithStallTimeout(5*time.Second))
	p := slidelog.Policy{Name: "p", Limit: 1_000_000, Window: time.Hour}
	const workers = 32
	var wg sync.WaitGroup
	var ended, decided atomic.Int64
	for w := range workers {
		wg.Go(func() {
			for i := range calls {
				ctx, cancel := t.Context(), context.CancelFunc(func() {})
				if w%2 == 0 {
					ctx, cancel = context.WithTimeout(ctx, time.Duration(rand.IntN(500))*time.Microsecond)
				}
				_, err := store.Take(ctx, slidelog.Request{Namespace: "handshake", Key: "k" + strconv.Itoa(w), Cost: 1, Policies: []slidelog.Policy{p}, ID: rand.Uint64()})
				cancel()
				switch {
				case err == nil:
					decided.Add(1)
				case w%2 == 0 && ctx.Err() != nil:
					ended.Add(1)
				default:
					t.Errorf("worker %d, call %d (deadline: %v): %v", w, i, w%2 == 0, err)
				}
				time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
			}
		})
	}
	wg.Wait()
	t.Logf("%d calls decided, %d ended with their context", decided.Load(), ended.Load())
	require.Positive(t, ended.Load(), "no call's context ended before its reply: the test did not test")
}
