package slidelog_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
)

// A lone decision on a healthy node is sent from its caller's goroutine:
// no sender goroutine, no ticker, on a single Redis and on a Cluster, with
// go-redis's plain options and the limiter's defaults (issue 19). Each
// decision used to start one goroutine.
func TestLoneDecisionStartsNoGoroutine(t *testing.T) {
	for _, tc := range redistest.PlainClients() {
		t.Run(tc.Name, func(t *testing.T) {
			client := tc.New(t)
			store := newRedisStore(t, client) // its keys are deleted at cleanup
			l, err := slidelog.New(store, slidelog.PerMinute(1000))
			require.NoError(t, err)
			t.Cleanup(func() { _ = l.Close() })
			// Warm up: connections, the script, the slot map.
			for i := range 20 {
				_, err := l.Allow(t.Context(), "warm-"+strconv.Itoa(i))
				require.NoError(t, err)
			}
			const decisions = 200
			start := goroutinesCreated()
			for i := range decisions {
				res, err := l.Allow(t.Context(), "user-"+strconv.Itoa(i))
				require.NoError(t, err)
				require.Equal(t, redisstore.Source, res.Source, "decision %d", i)
			}
			started := goroutinesCreated() - start
			// A busy machine can delay a reply past half the stall
			// timeout, which starts the limiter's monitor: a few, never
			// one per decision.
			assert.Less(t, started, uint64(decisions/10), "goroutines started by %d lone decisions", decisions)
		})
	}
}

// Decisions that queue behind a busy node leave together in a pipeline
// sent from one of their callers' goroutines, on the master's own client:
// no sender goroutine per pipeline, and none of the Cluster client's
// goroutine per node (issue 19). With 16 callers this used to start about
// 0.4 goroutines per decision.
func TestQueuedDecisionsStartNoGoroutine(t *testing.T) {
	client := redistest.PlainClients()[1].New(t).(*redis.ClusterClient)
	var batches pipelineCounter
	client.AddHook(&batches)
	client.OnNewNode(func(node *redis.Client) { node.AddHook(&batches) })
	store := newRedisStore(t, client)
	l, err := slidelog.New(store, slidelog.PerMinute(1000))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	for i := range 50 {
		_, err := l.Allow(t.Context(), "warm-"+strconv.Itoa(i))
		require.NoError(t, err)
	}
	const callers, each = 16, 250
	before := batches.n.Load()
	start := goroutinesCreated()
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for c := range callers {
		wg.Go(func() {
			for i := range each {
				res, err := l.Allow(context.Background(), "user-"+strconv.Itoa(c)+"-"+strconv.Itoa(i%20))
				if err == nil && res.Source != redisstore.Source {
					err = fmt.Errorf("decision from %v", res.Source)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	started := goroutinesCreated() - start - callers
	pipelines := batches.n.Load() - before
	t.Logf("%d decisions by %d callers: %d pipelines of more than one, %d goroutines started", callers*each, callers, pipelines, started)
	require.Greater(t, pipelines, uint64(10), "few decisions queued: the test did not load the pipelines")
	// A busy machine can delay a reply past half the stall timeout,
	// which starts the limiter's monitor: a few, never one per pipeline.
	assert.Less(t, started, pipelines/10+5, "goroutines started for %d pipelines", pipelines)
}

// pipelineCounter is a go-redis hook counting the pipelines of more than
// one command that a client sends.
type pipelineCounter struct{ n atomic.Uint64 }

func (*pipelineCounter) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (*pipelineCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (c *pipelineCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 1 {
			c.n.Add(1)
		}
		return next(ctx, cmds)
	}
}
