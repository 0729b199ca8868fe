package memstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/slidelogtest"
)

// TestOverflowKeyKeepsItsWindow decides a key on the overflow log of a
// full store, then lets another key's log expire, which frees room: the
// key's next decisions get a log of its own, which must still count what
// it was admitted on the overflow log, for exact and bucketed policies.
func TestOverflowKeyKeepsItsWindow(t *testing.T) {
	for _, p := range []slidelog.Policy{
		{Name: "exact", Limit: 5, Window: time.Second},
		{Name: "bucketed", Limit: 5, Window: time.Second, Precision: 100 * time.Millisecond},
	} {
		t.Run(p.Name, func(t *testing.T) {
			ctx := context.Background()
			store, clock := newClockedMemory(t, memstore.WithMaxKeys(1))
			l := slidelog.MustNew(store, p)
			defer l.Close()
			res, err := l.Allow(ctx, "a") // the store's one log
			require.NoError(t, err)
			require.True(t, res.Allowed)
			clock.Advance(800 * time.Millisecond)
			var admitted []slidelogtest.Admission
			allow := func() {
				for range 10 {
					res, err := l.Allow(ctx, "b")
					require.NoError(t, err)
					if res.Allowed {
						admitted = append(admitted, slidelogtest.Admission{Key: "b", Start: res.DecidedAt})
					}
				}
			}
			allow() // on the overflow log
			require.Len(t, admitted, 5)
			clock.Advance(300 * time.Millisecond) // "a" has expired: "b" gets its own log
			allow()
			_, over := slidelogtest.CheckWindows(admitted, p.Limit, p.Window)
			require.Empty(t, over, "a window of b over its limit: %d admissions", len(admitted))
			require.Equal(t, 1, store.Len(), "b has a log of its own")
		})
	}
}

// TestPeekAgreesOnAFullStore peeks at a key decided on the overflow log,
// after room freed, then decides it at the same instant: both must agree.
func TestPeekAgreesOnAFullStore(t *testing.T) {
	ctx := context.Background()
	store, clock := newClockedMemory(t, memstore.WithMaxKeys(1))
	l := slidelog.MustNew(store, slidelog.PerSecond(1))
	defer l.Close()
	_, err := l.Allow(ctx, "a")
	require.NoError(t, err)
	clock.Advance(900 * time.Millisecond)
	res, err := l.Allow(ctx, "c") // on the overflow log
	require.NoError(t, err)
	require.True(t, res.Allowed)
	clock.Advance(200 * time.Millisecond) // "a" has expired
	peek, err := l.Peek(ctx, "c")
	require.NoError(t, err)
	res, err = l.Allow(ctx, "c")
	require.NoError(t, err)
	require.False(t, peek.Allowed)
	require.False(t, res.Allowed, "c was admitted 200 ms ago under 1 per second")
}
