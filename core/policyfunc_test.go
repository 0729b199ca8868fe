package slidelog_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/slidelogtest"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// planKey is the context key under which the tests store a client's plan.
type planKey struct{}

// plans is a policy func that reads the plan from the context: "pro" has
// 10 a minute, "tiny" 2 a minute and 5 an hour, anything else the
// limiter's own policies.
func plans(ctx context.Context, _ string) ([]slidelog.Policy, error) {
	switch ctx.Value(planKey{}) {
	case "pro":
		return []slidelog.Policy{slidelog.PerMinute(10)}, nil
	case "tiny":
		return []slidelog.Policy{slidelog.PerMinute(2), slidelog.PerHour(5)}, nil
	}
	return nil, nil
}

func withPlan(ctx context.Context, plan string) context.Context {
	return context.WithValue(ctx, planKey{}, plan)
}

// policyFuncStores are the stores the policy func is tested on: memory and,
// with Redis, a standalone server and a Cluster.
func policyFuncStores(t *testing.T) map[string]func(t *testing.T) slidelog.Store {
	return map[string]func(t *testing.T) slidelog.Store{
		"memory":     func(t *testing.T) slidelog.Store { return newMemoryStore(t) },
		"standalone": func(t *testing.T) slidelog.Store { return newRedisStore(t, redistest.RedisClient(t)) },
		"cluster":    func(t *testing.T) slidelog.Store { return newRedisStore(t, redistest.ClusterClient(t)) },
	}
}

func TestPolicyFuncPlans(t *testing.T) {
	for name, newStore := range policyFuncStores(t) {
		t.Run(name, func(t *testing.T) {
			l, err := slidelog.New(newStore(t), slidelog.PerMinute(3), slidelog.WithName("plans"), slidelog.WithPolicyFunc(plans))
			require.NoError(t, err)
			t.Cleanup(func() { _ = l.Close() })
			free, pro := t.Context(), withPlan(t.Context(), "pro")

			// The free plan: New's 3 a minute.
			for i := range 3 {
				res, err := l.Allow(free, "acct:1")
				require.NoError(t, err)
				assert.True(t, res.Allowed, "free request %d", i+1)
				assert.Equal(t, 3, res.Limit)
			}
			res, err := l.Allow(free, "acct:1")
			require.NoError(t, err)
			assert.False(t, res.Allowed, "got the 4th free request admitted, want denied")

			// An upgrade keeps the minute's 3 admissions: 7 more, not 10.
			peek, err := l.Peek(pro, "acct:1")
			require.NoError(t, err)
			assert.Equal(t, 10, peek.Limit)
			assert.Equal(t, 7, peek.Remaining, "got %d remaining after the upgrade, want 7", peek.Remaining)
			admitted := 0
			for range 12 {
				res, err := l.Allow(pro, "acct:1")
				require.NoError(t, err)
				assert.Equal(t, "per-minute", res.Policy.Name)
				assert.Equal(t, 10, res.Limit, "got the decision's limit %d, want the plan's 10", res.Limit)
				if res.Allowed {
					admitted++
				}
			}
			assert.Equal(t, 7, admitted, "got %d admitted on the pro plan, want 7 (10 less the 3 of the free plan)", admitted)

			// A downgrade to two policies counts every admission: the
			// minute holds 10, so "tiny" (2 a minute, 5 an hour) denies,
			// and reports both its policies.
			res, err = l.Allow(withPlan(t.Context(), "tiny"), "acct:1")
			require.NoError(t, err)
			assert.False(t, res.Allowed)
			require.Len(t, res.States(), 2)
			assert.Equal(t, "per-minute", res.States()[0].Policy.Name)
			assert.Equal(t, 2, res.States()[0].Policy.Limit)
			assert.Equal(t, "per-hour", res.States()[1].Policy.Name)
			assert.ElementsMatch(t, []string{"per-minute", "per-hour"}, res.Violated())

			// Another key on the pro plan starts empty.
			res, err = l.Allow(pro, "acct:2")
			require.NoError(t, err)
			assert.True(t, res.Allowed)
			assert.Equal(t, 9, res.Remaining)
		})
	}
}

// TestPolicyFuncStrictUnderPlanChanges alternates plans at random on one key
// with a clock moved by hand, and checks every rolling window of every
// decision's policies against a model: no window holds more than the
// limit of the policies that admitted into it.
func TestPolicyFuncStrictUnderPlanChanges(t *testing.T) {
	clock := slidelogtest.NewClock(time.Unix(1_700_000_000, 0))
	store := newMemoryStore(t, memstore.WithClock(clock.Now))
	perWindow := []slidelog.Policy{
		{Name: "per-10s", Limit: 4, Window: 10 * time.Second},
		{Name: "per-10s", Limit: 9, Window: 10 * time.Second},
		{Name: "per-10s", Limit: 1, Window: 10 * time.Second},
	}
	var plan atomic.Int64
	l, err := slidelog.New(store, perWindow[0], slidelog.WithName("strict"),
		slidelog.WithPolicyFunc(func(context.Context, string) ([]slidelog.Policy, error) {
			return []slidelog.Policy{perWindow[plan.Load()]}, nil
		}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })

	var admitted []time.Time
	for i := range 600 {
		plan.Store(int64(i / 7 % 3))
		p := perWindow[plan.Load()]
		res, err := l.Allow(t.Context(), "k")
		require.NoError(t, err)
		now := clock.Now()
		inWindow := 0
		for _, at := range admitted {
			if now.Sub(at) < p.Window {
				inWindow++
			}
		}
		if want := inWindow < p.Limit; res.Allowed != want {
			t.Fatalf("request %d under limit %d with %d admitted in the window: got allowed %v, want %v", i, p.Limit, inWindow, res.Allowed, want)
		}
		if res.Allowed {
			admitted = append(admitted, now)
		}
		clock.Advance(700 * time.Millisecond)
	}
	assert.Greater(t, len(admitted), 60, "got %d admissions in 600 requests, want the limits used", len(admitted))
}

func TestPolicyFuncErrors(t *testing.T) {
	lookup := errors.New("plans database: connection refused")
	var calls atomic.Int64
	store := &fakeStore{take: func(context.Context, slidelog.Request) (slidelog.Result, error) {
		return slidelog.Result{}, errors.New("the store was called")
	}}
	l := newResilientLimiter(t, store, slidelog.PerMinute(10), slidelog.WithPolicyFunc(func(_ context.Context, key string) ([]slidelog.Policy, error) {
		calls.Add(1)
		switch key {
		case "down":
			return nil, lookup
		case "invalid":
			return []slidelog.Policy{{Name: "x", Limit: 0, Window: time.Minute}}, nil
		case "twice":
			return []slidelog.Policy{slidelog.PerMinute(1), slidelog.PerMinute(2)}, nil
		}
		return []slidelog.Policy{slidelog.PerMinute(2)}, nil
	}))
	tests := []struct {
		give     string
		cost     int
		wantErrs []error
	}{
		{give: "down", cost: 1, wantErrs: []error{slidelog.ErrPolicyFunc, lookup}},
		{give: "invalid", cost: 1, wantErrs: []error{slidelog.ErrInvalidPolicy, slidelog.ErrInvalidOption}},
		{give: "twice", cost: 1, wantErrs: []error{slidelog.ErrInvalidPolicy, slidelog.ErrInvalidOption}},
		{give: "small", cost: 3, wantErrs: []error{slidelog.ErrInvalidCost}}, // 3 > the plan's 2, though New's policy has 10
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			_, err := l.AllowN(t.Context(), tt.give, tt.cost)
			for _, want := range tt.wantErrs {
				assert.ErrorIs(t, err, want)
			}
		})
	}
	assert.Zero(t, store.calls.Load(), "got %d store calls, want none for requests without valid policies", store.calls.Load())
	assert.Equal(t, int64(4), calls.Load())

	_, err := slidelog.New(store, slidelog.PerMinute(1), slidelog.WithPolicyFunc(nil))
	assert.ErrorIs(t, err, slidelog.ErrInvalidOption)
}

// TestPolicyFuncFallback checks that the local fallback enforces each
// decision's policies, divided by WithFallbackInstances.
func TestPolicyFuncFallback(t *testing.T) {
	l := newResilientLimiter(t, failingStore(), slidelog.PerMinute(100),
		slidelog.WithFallbackInstances(2), slidelog.WithPolicyFunc(plans))
	pro := withPlan(t.Context(), "pro")
	admitted := 0
	for range 8 {
		res, err := l.Allow(pro, "k")
		require.NoError(t, err)
		assert.Equal(t, slidelog.SourceFallback, res.Source)
		if res.Allowed {
			admitted++
		}
	}
	assert.Equal(t, 5, admitted, "got %d fallback admissions on the pro plan (10 a minute, 2 instances), want 5", admitted)
}

// TestPolicyFuncDenyCache checks that a denial cached under one plan does
// not answer a request under another, and that a policy func costs no
// Redis call more than fixed policies.
func TestPolicyFuncDenyCache(t *testing.T) {
	client := redistest.RedisClient(t)
	var calls atomic.Int64
	client.AddHook(countHook{&calls})
	l := newResilientLimiter(t, newRedisStore(t, client), slidelog.PerMinute(1), slidelog.WithName("deny"), slidelog.WithPolicyFunc(plans))
	_, err := l.Allow(t.Context(), "warm-up") // loads the script
	require.NoError(t, err)
	calls.Store(0)
	for range 3 {
		_, err := l.Allow(t.Context(), "k") // 1 admitted, 2 denied (the second by the deny cache)
		require.NoError(t, err)
	}
	assert.Equal(t, int64(2), calls.Load(), "got %d Redis commands for 3 decisions, want 2 (the third from the deny cache)", calls.Load())
	res, err := l.Allow(withPlan(t.Context(), "pro"), "k")
	require.NoError(t, err)
	assert.True(t, res.Allowed, "got a pro request denied by the free plan's cached denial")
	assert.Equal(t, int64(3), calls.Load(), "got %d Redis commands, want one per decision", calls.Load())
}

// countHook counts the commands a Redis client sends.
type countHook struct{ n *atomic.Int64 }

func (h countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}
func (h countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}
