package slidelog_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/prommetrics"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDenyCache(t *testing.T) {
	clock := slidelogtest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	store := newMemoryStore(t, memstore.WithClock(clock.Now))
	reg := prometheus.NewRegistry()
	l := newResilientLimiter(t, store, slidelog.Policy{Name: "p", Limit: 2, Window: time.Second},
		slidelog.WithPolicy(slidelog.Policy{Name: "h", Limit: 100, Window: time.Hour}), slidelog.WithObserver(prommetrics.New(reg)), slidelog.WithDenyCache(10_000))
	allow := func(n int) slidelog.Result {
		t.Helper()
		res, err := l.AllowN(t.Context(), "k", n)
		require.NoError(t, err)
		return res
	}
	require.True(t, allow(1).Allowed)
	clock.Advance(100 * time.Millisecond)
	require.True(t, allow(1).Allowed)
	clock.Advance(100 * time.Millisecond)
	first := allow(1)
	require.False(t, first.Allowed)
	require.Equal(t, memstore.Source, first.Source)
	require.Equal(t, 800*time.Millisecond, first.RetryAfter)

	clock.Advance(300 * time.Millisecond)
	cached := allow(1)
	assert.Equal(t, slidelog.SourceDenyCache, cached.Source)
	assert.False(t, cached.Allowed)
	assert.Equal(t, 500*time.Millisecond, cached.RetryAfter, "elapsed time is subtracted")
	assert.Equal(t, 600*time.Millisecond, cached.ResetAfter)
	assert.Equal(t, 0, cached.Remaining)
	assert.Equal(t, []string{"p"}, cached.Violated())
	assert.Equal(t, 98, cached.Policies[1].Remaining)
	assert.Equal(t, first.DecidedAt.Add(300*time.Millisecond), cached.DecidedAt)

	// The store agrees, field for field.
	direct, err := store.Take(t.Context(), slidelog.Request{Namespace: slidelog.Namespace(l), Key: "k", Cost: 1, Policies: l.Policies(), ID: 1})
	require.NoError(t, err)
	assert.Equal(t, direct.RetryAfter, cached.RetryAfter)
	assert.Equal(t, direct.ResetAfter, cached.ResetAfter)
	assert.Equal(t, direct.Remaining, cached.Remaining)
	assert.Equal(t, direct.StableFor, cached.StableFor)

	// Another cost is the store's to answer: its RetryAfter differs.
	assert.Equal(t, memstore.Source, allow(2).Source)

	// Exactly at RetryAfter the store decides again and admits.
	clock.Advance(500 * time.Millisecond)
	res := allow(1)
	assert.True(t, res.Allowed)
	assert.Equal(t, memstore.Source, res.Source)
	assert.Equal(t, 2.0, metricValue(t, reg, prommetrics.MetricRejections)-1, "one store denial, two cache denials")
}

func TestDenyCacheOnlyForTheSameCost(t *testing.T) {
	clock := slidelogtest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	store := newMemoryStore(t, memstore.WithClock(clock.Now))
	l := newResilientLimiter(t, store, slidelog.Policy{Name: "p", Limit: 10, Window: time.Second}, slidelog.WithDenyCache(10_000))
	allow := func(n int) slidelog.Result {
		t.Helper()
		res, err := l.AllowN(t.Context(), "k", n)
		require.NoError(t, err)
		return res
	}
	require.True(t, allow(8).Allowed)
	// Cost 5 with 2 left: no entry leaves before RetryAfter, so the
	// store would say the same again.
	first := allow(5)
	require.False(t, first.Allowed)
	assert.Equal(t, memstore.Source, first.Source)
	assert.Equal(t, slidelog.SourceDenyCache, allow(5).Source)
	// Another cost asks the store.
	res := allow(3)
	require.False(t, res.Allowed)
	assert.Equal(t, memstore.Source, res.Source, "cost 3 after a cached cost-5 denial")
	assert.Equal(t, slidelog.SourceDenyCache, allow(3).Source)
	// An admission drops the key's cached denial: it changed the count.
	require.True(t, allow(2).Allowed)
	res = allow(3)
	assert.Equal(t, memstore.Source, res.Source, "cost 3 after an admission")
	assert.Equal(t, 0, res.Remaining)
}

func TestDenyCacheResetRefundAndOff(t *testing.T) {
	p := slidelog.Policy{Name: "p", Limit: 1, Window: time.Minute}
	tests := []struct {
		name       string
		opts       []slidelog.Option
		clear      func(t *testing.T, l *slidelog.Limiter, admitted slidelog.Result)
		wantSource slidelog.Source
		wantAllow  bool
	}{
		{name: "cached", wantSource: slidelog.SourceDenyCache},
		{name: "off", opts: []slidelog.Option{slidelog.WithDenyCache(0)}, wantSource: memstore.Source},
		{name: "reset", clear: func(t *testing.T, l *slidelog.Limiter, _ slidelog.Result) {
			require.NoError(t, l.Reset(t.Context(), "k"))
		}, wantSource: memstore.Source, wantAllow: true},
		{name: "refund", clear: func(t *testing.T, l *slidelog.Limiter, admitted slidelog.Result) {
			require.NoError(t, l.Refund(t.Context(), admitted))
		}, wantSource: memstore.Source, wantAllow: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A MemoryStore gets a deny cache only when asked for one.
			opts := append([]slidelog.Option{slidelog.WithDenyCache(10_000)}, tt.opts...)
			l := newResilientLimiter(t, newMemoryStore(t), p, opts...)
			admitted, err := l.Allow(t.Context(), "k")
			require.NoError(t, err)
			res, err := l.Allow(t.Context(), "k")
			require.NoError(t, err)
			require.False(t, res.Allowed)
			if tt.clear != nil {
				tt.clear(t, l, admitted)
			}
			res, err = l.Allow(t.Context(), "k")
			require.NoError(t, err)
			assert.Equal(t, tt.wantSource, res.Source)
			assert.Equal(t, tt.wantAllow, res.Allowed)
			if !res.Allowed {
				assert.ErrorIs(t, l.Refund(t.Context(), res), slidelog.ErrNotRefundable)
			}
		})
	}
}

func TestDenyCacheBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	l := newResilientLimiter(t, newMemoryStore(t), slidelog.Policy{Name: "p", Limit: 1, Window: time.Minute},
		slidelog.WithDenyCache(100), slidelog.WithObserver(prommetrics.New(reg)))
	for i := range 1000 {
		key := string(rune('a'+i%26)) + string(rune(i))
		for range 2 {
			_, err := l.Allow(t.Context(), key)
			require.NoError(t, err)
		}
	}
	assert.Equal(t, 100.0, metricValue(t, reg, prommetrics.MetricDenyCacheEntries))
}

func TestDenyCacheRedis(t *testing.T) {
	for name, client := range map[string]func(t *testing.T) slidelog.Store{
		"standalone": func(t *testing.T) slidelog.Store { return newRedisStore(t, redistest.RedisClient(t)) },
		"cluster":    func(t *testing.T) slidelog.Store { return newRedisStore(t, redistest.ClusterClient(t)) },
	} {
		t.Run(name, func(t *testing.T) {
			l := newResilientLimiter(t, client(t), slidelog.Policy{Name: "p", Limit: 3, Window: 10 * time.Second})
			for range 3 {
				res, err := l.Allow(t.Context(), "k")
				require.NoError(t, err)
				require.True(t, res.Allowed)
			}
			first, err := l.Allow(t.Context(), "k")
			require.NoError(t, err)
			require.Equal(t, redisstore.Source, first.Source)
			require.False(t, first.Allowed)
			for range 100 {
				res, err := l.Allow(t.Context(), "k")
				require.NoError(t, err)
				require.Equal(t, slidelog.SourceDenyCache, res.Source)
				require.False(t, res.Allowed)
				require.Positive(t, res.RetryAfter)
				require.LessOrEqual(t, res.RetryAfter, first.RetryAfter)
			}
		})
	}
}
