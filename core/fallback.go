package slidelog

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/slidelog/slidelog/core/internal/memlog"
	"github.com/slidelog/slidelog/core/internal/window"
)

// fallback is a limiter's local, per-instance limiter: in-memory logs
// (the mechanism of package memstore) enforcing the fallback policies.
// Its table is created on first use.
type fallback struct {
	policies []Policy
	windows  []window.Policy
	minLimit int
	maxKeys  int
	clock    memlog.StoreClock // the monotonic clock, in microseconds
	// divideBy, when not zero, makes the fallback enforce each request's
	// own policies divided by it (WithPolicyFunc) instead of policies.
	divideBy int

	mu     sync.Mutex // serialises creation and close of the table
	table  atomic.Pointer[memlog.Table]
	closed atomic.Bool
}

func newFallback(policies []Policy, maxKeys int) *fallback {
	minLimit := policies[0].Limit
	for _, p := range policies {
		minLimit = min(minLimit, p.Limit)
	}
	return &fallback{policies: policies, windows: windowsOf(policies), minLimit: minLimit, maxKeys: maxKeys, clock: memlog.NewStoreClock(nil)}
}

// get returns the fallback's table, creating it on first use; nil after
// close. Once the table exists it takes no lock.
func (f *fallback) get(create bool) *memlog.Table {
	if t := f.table.Load(); t != nil || !create {
		if f.closed.Load() {
			return nil
		}
		return t
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed.Load() {
		return nil
	}
	t := f.table.Load()
	if t == nil {
		t = memlog.NewTable(f.maxKeys)
		f.table.Store(t)
	}
	return t
}

// take decides req locally. A cost above the fallback's smallest limit is
// capped at it: such a request takes the whole local window. The request
// returned is the one recorded, for a refund.
func (f *fallback) take(ctx context.Context, req Request) (Result, Request, error) {
	t := f.get(true)
	if t == nil {
		return Result{}, req, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return Result{}, req, err
	}
	policies, windows, minLimit := f.policies, f.windows, f.minLimit
	if f.divideBy > 0 {
		policies = dividedPolicies(req.Policies, f.divideBy)
		windows = windowsOf(policies)
		minLimit = policies[0].Limit
		for _, p := range policies {
			minLimit = min(minLimit, p.Limit)
		}
	}
	req.Policies = policies
	req.Cost = min(req.Cost, minLimit)
	var res Result
	r := f.request(req)
	decideMemory(&res, t, &f.clock, &r, policies, windows, SourceFallback)
	return res, req, nil
}

func (f *fallback) request(req Request) memlog.Request {
	return memlog.Request{Namespace: req.Namespace, Key: req.Key, ID: req.ID, Cost: int64(req.Cost)}
}

func (f *fallback) refund(_ context.Context, req Request) error {
	if t := f.get(false); t != nil {
		t.Refund(f.request(req))
	}
	return nil
}

func (f *fallback) reset(_ context.Context, req Request) error {
	if t := f.get(false); t != nil {
		t.Reset(f.request(req))
	}
	return nil
}

// len is how many keys the fallback tracks.
func (f *fallback) len() int {
	if t := f.get(false); t != nil {
		return t.Len()
	}
	return 0
}

func (f *fallback) close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed.Store(true)
	if t := f.table.Load(); t != nil {
		t.Purge()
	}
	return nil
}
