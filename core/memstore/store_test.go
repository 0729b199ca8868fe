package memstore_test

import (
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/prommetrics"
	"github.com/stretchr/testify/require"
)

func TestMemoryStoreBoundsKeys(t *testing.T) {
	// A frozen clock: a million decisions can take longer than the
	// minute the logs live on a busy machine, and the count below assumes
	// every log is still live.
	frozen := time.Now()
	store := memstore.New(memstore.WithMaxKeys(10_000), memstore.WithClock(func() time.Time { return frozen }))
	defer store.Close()
	l, err := slidelog.New(store, slidelog.PerMinute(5))
	if err != nil {
		t.Fatal(err)
	}
	const identities = 1_000_000
	if testing.Short() {
		t.Log("-short: 100,000 identities instead of a million")
	}
	n := identities
	if testing.Short() {
		n = 100_000
	}
	allowed := 0
	for i := range n {
		res, err := l.Allow(t.Context(), "id-"+strconv.Itoa(i))
		if err != nil {
			t.Fatalf("Allow(new identity %d): %v", i, err)
		}
		if res.Allowed {
			allowed++
		}
	}
	if got := store.Len(); got != 10_000 {
		t.Fatalf("after %d identities the store holds %d, want the bound 10000", n, got)
	}
	// Every log is live for a minute: the first 10,000 identities have
	// their own, the rest share one overflow budget of 5.
	if allowed != 10_005 {
		t.Fatalf("admitted %d of %d new identities, want 10005 (10,000 tracked + 5 shared)", allowed, n)
	}
}

// Expired logs leave as new identities arrive: no sweeper goroutine, and
// the store holds about the identities of the longest window.
func TestMemoryStoreDropsExpiredLogs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New()
		defer store.Close()
		l, err := slidelog.New(store, slidelog.PerSecond(3), slidelog.WithPolicy(slidelog.Policy{Name: "5s", Limit: 10, Window: 5 * time.Second}))
		if err != nil {
			t.Fatal(err)
		}
		allow := func(prefix string) {
			for i := range 50 {
				if _, err := l.Allow(t.Context(), prefix+strconv.Itoa(i)); err != nil {
					t.Fatal(err)
				}
			}
		}
		allow("a")
		time.Sleep(4500 * time.Millisecond)
		allow("b")
		if got := store.Len(); got != 100 {
			t.Fatalf("before the longest window of the first identities passed the store holds %d logs, want 100", got)
		}
		time.Sleep(time.Second)
		allow("c")
		if got := store.Len(); got != 100 {
			t.Fatalf("after the first identities expired and 50 new ones came the store holds %d logs, want 100 (50 dropped)", got)
		}
	})
}

func TestMemoryStoreClose(t *testing.T) {
	store := memstore.New()
	l, err := slidelog.New(store, slidelog.PerSecond(1))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := l.Allow(t.Context(), "k"); err != slidelog.ErrClosed {
		t.Fatalf("Allow after Close error = %v, want ErrClosed", err)
	}
	req := slidelog.Request{Key: "k", Cost: 1, Policies: []slidelog.Policy{slidelog.PerSecond(1)}}
	if _, err := store.Take(t.Context(), req); err != nil {
		t.Fatalf("Take after the limiter's Close error = %v, want none: whoever creates a store closes it", err)
	}
	if err := store.Close(); err != nil {
		t.Fatalf("store Close: %v", err)
	}
	if _, err := store.Take(t.Context(), req); err != slidelog.ErrClosed {
		t.Fatalf("Take after Close error = %v, want ErrClosed", err)
	}
}

// A limiter on a MemoryStore has no fallback: a store call that fails
// (the store closed by its owner) is an error, or the failure mode's
// decision, with any option, never a panic.
func TestMemoryStoreFailureIsAnError(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []slidelog.Option
		// closeStore closes the store before the call.
		closeStore bool
		want       error
	}{
		{"closed, metrics", []slidelog.Option{slidelog.WithObserver(prommetrics.New(prometheus.NewRegistry()))}, true, slidelog.ErrClosed},
		{"closed, deny cache", []slidelog.Option{slidelog.WithDenyCache(10)}, true, slidelog.ErrClosed},
		{"closed, metrics, fail open", []slidelog.Option{slidelog.WithObserver(prommetrics.New(prometheus.NewRegistry())), slidelog.WithFailureMode(slidelog.FailOpen)}, true, nil},
		{"closed, deny cache, fail error", []slidelog.Option{slidelog.WithDenyCache(10), slidelog.WithFailureMode(slidelog.FailError)}, true, slidelog.ErrClosed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := memstore.New()
			defer store.Close()
			l, err := slidelog.New(store, slidelog.PerSecond(5), tc.opts...)
			require.NoError(t, err)
			defer l.Close()
			if tc.closeStore {
				require.NoError(t, store.Close())
			}
			for range 3 {
				res, err := l.Allow(t.Context(), "k")
				if tc.want == nil {
					require.NoError(t, err)
					continue
				}
				require.ErrorIs(t, err, tc.want, "result %+v", res)
				require.False(t, res.Allowed)
			}
		})
	}
}
