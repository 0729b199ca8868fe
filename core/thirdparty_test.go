package slidelog_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/slidelogtest"
)

// shardedStore is a third-party store, as a user would write one outside
// this module: two "nodes", each its own memory store, keys starting with
// "b" on node b and the others on node a. It implements slidelog.Store,
// Describer (a remote store named "sharded" that follows the Watch),
// Router (Route, and reporting replies to the call's Watch) and Recorder
// through the public API only: the limiter must treat it as a remote
// store, with a breaker per node and a deny cache.
type shardedStore struct {
	nodes  map[string]*memstore.Store
	broken atomic.Value // string: the node whose calls fail
	stall  atomic.Value // string: the node whose calls hang until the store gives up, "*" for both
	takes  atomic.Int64
	routes atomic.Int64

	mu       sync.Mutex
	admitted map[string]slidelog.Result // by namespace, key and ID: a retry gets the first answer
}

func newShardedStore(clock func() time.Time) *shardedStore {
	s := &shardedStore{nodes: map[string]*memstore.Store{
		"a": memstore.New(memstore.WithClock(clock)),
		"b": memstore.New(memstore.WithClock(clock)),
	}, admitted: map[string]slidelog.Result{}}
	s.broken.Store("")
	s.stall.Store("")
	return s
}

// shardedStallTimeout is how long a shardedStore's call waits on a node
// that answers nothing.
const shardedStallTimeout = 20 * time.Millisecond

func (s *shardedStore) node(key string) string {
	if strings.HasPrefix(key, "b") {
		return "b"
	}
	return "a"
}

func (s *shardedStore) Route(_ context.Context, req slidelog.Request) slidelog.Route {
	s.routes.Add(1)
	return slidelog.Route{Node: s.node(req.Key)}
}

func (s *shardedStore) Describe() slidelog.StoreInfo {
	return slidelog.StoreInfo{Name: "sharded", Clock: s.nodes["a"].Describe().Clock}
}

func (s *shardedStore) call(ctx context.Context, req slidelog.Request) (*memstore.Store, error) {
	n := req.Route.Node
	if n == "" {
		n = s.node(req.Key) // not called by a limiter
	}
	if st := s.stall.Load(); st == n || st == "*" {
		// A store bounds its own calls: a node that answers nothing
		// for its stall timeout fails the call with ErrStalled.
		t := time.NewTimer(shardedStallTimeout)
		defer t.Stop()
		select {
		case <-t.C:
			return nil, fmt.Errorf("%w: node %s: %w", slidelog.ErrUnavailable, n, slidelog.ErrStalled)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if s.broken.Load() == n {
		return nil, fmt.Errorf("%w: node %s refuses connections", slidelog.ErrUnavailable, n)
	}
	return s.nodes[n], nil
}

func (s *shardedStore) Take(ctx context.Context, req slidelog.Request) (slidelog.Result, error) {
	s.takes.Add(1)
	m, err := s.call(ctx, req)
	if err != nil {
		return slidelog.Result{}, err
	}
	// A store reached over a network must count a resent call once.
	id := fmt.Sprintf("%q %q %d", req.Namespace, req.Key, req.ID)
	s.mu.Lock()
	defer s.mu.Unlock()
	if res, ok := s.admitted[id]; ok {
		return res, nil
	}
	res, err := m.Take(ctx, req)
	if err == nil && res.Allowed {
		s.admitted[id] = res
	}
	return res, err
}

func (s *shardedStore) Record(ctx context.Context, req slidelog.Request, at time.Time) error {
	m, err := s.call(ctx, req)
	if err != nil {
		return err
	}
	return m.Record(ctx, req, at)
}

func (s *shardedStore) Refund(ctx context.Context, req slidelog.Request) error {
	m, err := s.call(ctx, req)
	if err != nil {
		return err
	}
	return m.Refund(ctx, req)
}

func (s *shardedStore) Reset(ctx context.Context, req slidelog.Request) error {
	m, err := s.call(ctx, req)
	if err != nil {
		return err
	}
	return m.Reset(ctx, req)
}

func (s *shardedStore) Close() error {
	return errors.Join(s.nodes["a"].Close(), s.nodes["b"].Close())
}

var (
	_ slidelog.Describer = (*shardedStore)(nil)
	_ slidelog.Router    = (*shardedStore)(nil)
	_ slidelog.Recorder  = (*shardedStore)(nil)
)

// A store defined outside the package passes the conformance suite,
// with both its nodes stalled in the Stalled cases: its calls end on its
// own stall timeout (shardedStallTimeout), before their contexts do.
func TestThirdPartyStoreConformance(t *testing.T) {
	var latest *shardedStore // the store of the running test
	slidelogtest.RunStoreSuite(t, func(t *testing.T, clock func() time.Time) slidelog.Store {
		latest = newShardedStore(clock)
		return latest
	}, slidelogtest.WithStall(func(*testing.T) (resume func()) {
		s := latest
		s.stall.Store("*")
		return func() { s.stall.Store("") }
	}))
}

// Through the capability interfaces alone, a third-party store gets what
// the Redis store gets: a deny cache, a breaker per node (a failing node
// sends only its own keys to the fallback), a stall watch, and the
// write-back of the fallback's admissions.
func TestThirdPartyStoreGetsBreakersAndDenyCache(t *testing.T) {
	clock := slidelogtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	store := newShardedStore(clock.Now)
	t.Cleanup(func() { _ = store.Close() })
	obs := &recordingObserver{}
	l := newResilientLimiter(t, store, slidelog.Policy{Name: "p", Limit: 2, Window: time.Minute},
		slidelog.WithObserver(obs))

	// The deny cache: the third denial of "a1" costs no store call.
	for range 2 {
		res, err := l.Allow(t.Context(), "a1")
		require.NoError(t, err)
		require.True(t, res.Allowed)
	}
	res, err := l.Allow(t.Context(), "a1")
	require.NoError(t, err)
	require.Equal(t, slidelog.Source("sharded"), res.Source, "the first denial comes from the store")
	before, routes := store.takes.Load(), store.routes.Load()
	res, err = l.Allow(t.Context(), "a1")
	require.NoError(t, err)
	assert.Equal(t, slidelog.SourceDenyCache, res.Source)
	assert.Equal(t, before, store.takes.Load(), "a cached denial made a store call")
	assert.Equal(t, routes, store.routes.Load(), "a cached denial routed a call")

	// Node b fails: its keys go to the fallback and its breaker opens;
	// node a's keys stay on the store.
	store.broken.Store("b")
	for range 6 {
		res, err := l.Allow(t.Context(), "b1")
		require.NoError(t, err)
		assert.Equal(t, slidelog.SourceFallback, res.Source)
	}
	res, err = l.Allow(t.Context(), "a2")
	require.NoError(t, err)
	assert.Equal(t, slidelog.Source("sharded"), res.Source, "a key of the healthy node went to the fallback")
	assert.Equal(t, "open", slidelog.BreakerStates(l)["b"])
	assert.Equal(t, "closed", slidelog.BreakerStates(l)["a"])

	// Node b recovers: after the breaker's open timeout its keys return,
	// and the fallback's two admissions of b1 are in its log: b1 is denied.
	store.broken.Store("")
	require.Eventually(t, func() bool {
		res, err := l.Allow(t.Context(), "b1")
		return err == nil && res.Source != slidelog.SourceFallback
	}, 5*time.Second, 50*time.Millisecond)
	res, err = store.nodes["b"].Take(t.Context(), slidelog.Request{Namespace: slidelog.Namespace(l), Key: "b1", Cost: 1, Policies: l.Policies(), ID: 1})
	require.NoError(t, err)
	assert.False(t, res.Allowed, "the fallback's admissions of b1 were not written back into node b")

	// Node a stalls: the Watch's stall channel ends its calls, which go to
	// the fallback, with the reason "stalled".
	store.stall.Store("a")
	res, err = l.Allow(t.Context(), "a3")
	require.NoError(t, err)
	assert.Equal(t, slidelog.SourceFallback, res.Source)
	obs.mu.Lock()
	defer obs.mu.Unlock()
	assert.Contains(t, obs.events, "failover stalled fallback")
}

// bareStore is the least a store can be: a memory store behind the four
// methods of slidelog.Store, and nothing else (no Describe, Route or
// Record). Saying nothing of itself, it is a remote store to a limiter
// and to the suite, so it counts a resent Take once.
type bareStore struct {
	m        *memstore.Store
	mu       sync.Mutex
	admitted map[string]slidelog.Result // by namespace, key and ID
}

func (s *bareStore) Take(ctx context.Context, req slidelog.Request) (slidelog.Result, error) {
	id := fmt.Sprintf("%q %q %d", req.Namespace, req.Key, req.ID)
	s.mu.Lock()
	defer s.mu.Unlock()
	if res, ok := s.admitted[id]; ok {
		return res, nil
	}
	res, err := s.m.Take(ctx, req)
	if err == nil && res.Allowed {
		s.admitted[id] = res
	}
	return res, err
}
func (s *bareStore) Refund(ctx context.Context, req slidelog.Request) error {
	return s.m.Refund(ctx, req)
}
func (s *bareStore) Reset(ctx context.Context, req slidelog.Request) error {
	return s.m.Reset(ctx, req)
}
func (s *bareStore) Close() error { return s.m.Close() }

// A store implementing only the required methods passes the suite: it is
// tested for what it has.
func TestBareStoreConformance(t *testing.T) {
	slidelogtest.RunStoreSuite(t, func(t *testing.T, clock func() time.Time) slidelog.Store {
		return &bareStore{m: memstore.New(memstore.WithClock(clock)), admitted: map[string]slidelog.Result{}}
	})
}

// The limiter routes a decision once: Route is called once per store
// decision, and the store's Take finds the route in the request.
func TestRouteOncePerDecision(t *testing.T) {
	clock := slidelogtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	store := newShardedStore(clock.Now)
	t.Cleanup(func() { _ = store.Close() })
	l := newResilientLimiter(t, store, slidelog.Policy{Name: "p", Limit: 100, Window: time.Minute})
	for i := range 10 {
		res, err := l.Allow(t.Context(), fmt.Sprintf("a%d", i))
		require.NoError(t, err)
		require.Equal(t, slidelog.Source("sharded"), res.Source)
	}
	assert.Equal(t, int64(10), store.routes.Load(), "Route calls for 10 decisions")
	assert.Equal(t, int64(10), store.takes.Load(), "Take calls for 10 decisions")
}

// Refund of another limiter's Result is an error, never a panic, and
// leaves both limiters' stores alone; so is one of a Result that recorded
// nothing.
func TestRefundForeignResult(t *testing.T) {
	clock := slidelogtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p := slidelog.Policy{Name: "p", Limit: 1, Window: time.Minute}
	remote := newShardedStore(clock.Now)
	t.Cleanup(func() { _ = remote.Close() })
	mem := memstore.New()
	t.Cleanup(func() { _ = mem.Close() })
	a := newResilientLimiter(t, remote, p, slidelog.WithName("a"))
	b := newResilientLimiter(t, mem, p, slidelog.WithName("b"))

	stored, err := a.Allow(t.Context(), "a1")
	require.NoError(t, err)
	require.True(t, stored.Allowed)
	remote.broken.Store("b")
	fallback, err := a.Allow(t.Context(), "b1")
	require.NoError(t, err)
	require.Equal(t, slidelog.SourceFallback, fallback.Source)
	require.True(t, fallback.Allowed)
	local, err := b.Allow(t.Context(), "k")
	require.NoError(t, err)
	require.True(t, local.Allowed)

	for _, tc := range []struct {
		name string
		l    *slidelog.Limiter
		give slidelog.Result
	}{
		{"a store admission of a, to b", b, stored},
		{"a fallback admission of a, to b", b, fallback},
		{"a memory admission of b, to a", a, local},
		{"the zero Result", a, slidelog.Result{}},
		{"a Result built by NewResult", a, slidelog.NewResult([]slidelog.PolicyResult{{Policy: p, Allowed: true}}, "memory")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.ErrorIs(t, tc.l.Refund(t.Context(), tc.give), slidelog.ErrNotRefundable)
		})
	}
	// Nothing was refunded: each key is still at its limit.
	remote.broken.Store("")
	res, err := a.Allow(t.Context(), "a1")
	require.NoError(t, err)
	assert.False(t, res.Allowed, "a1 after foreign refunds")
	res, err = b.Allow(t.Context(), "k")
	require.NoError(t, err)
	assert.False(t, res.Allowed, "k after foreign refunds")
	// The owner refunds its own.
	require.NoError(t, a.Refund(t.Context(), stored))
	require.NoError(t, b.Refund(t.Context(), local))
}

// Issue 30, for a store that records but does not keep (a Recorder, not a
// Keeper): the limiter's journal holds the fallback's admissions until
// they are written, so decisions of the key that run while the background
// flush writes them, or while another decision does, still write them
// first. The fallback admits b1 up to the limit while node b fails; node b
// recovers, a decision of another key of b closes its breaker and starts
// the flush, and 64 decisions of b1 at once: the store admits none.
func TestFallbackWriteBackBeforeEveryConcurrentDecision(t *testing.T) {
	const limit = 5
	clock := slidelogtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	store := newShardedStore(clock.Now)
	t.Cleanup(func() { _ = store.Close() })
	l := newResilientLimiter(t, store, slidelog.Policy{Name: "p", Limit: limit, Window: time.Minute}, slidelog.WithDenyCache(0))
	store.broken.Store("b")
	for i := range limit {
		res, err := l.Allow(t.Context(), "b1")
		require.NoError(t, err)
		require.Equal(t, slidelog.SourceFallback, res.Source)
		require.True(t, res.Allowed, "fallback call %d", i)
	}
	store.broken.Store("")
	require.Eventually(t, func() bool {
		res, err := l.Allow(t.Context(), "b2")
		return err == nil && res.Source == slidelog.Source("sharded")
	}, 5*time.Second, 20*time.Millisecond)

	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			res, err := l.Allow(t.Context(), "b1")
			if err == nil && res.Allowed && res.Source == slidelog.Source("sharded") {
				admitted.Add(1)
			}
		})
	}
	wg.Wait()
	if got := admitted.Load(); got != 0 {
		t.Errorf("got %d of 64 concurrent decisions of b1 admitted by the store right after recovery, want 0 (the fallback admitted %d, limit %d)", got, limit, limit)
	}
}
