package slidelog

import (
	"context"
	"sync"
	"time"

	"github.com/slidelog/slidelog/core/internal/memlog"
)

// fallback is a limiter's local, per-instance limiter: in-memory logs
// (the mechanism of package memstore) enforcing the fallback policies.
// Its table is created on first use.
type fallback struct {
	policies []Policy
	windows  []memlog.Policy
	minLimit int
	maxKeys  int
	start    time.Time

	mu     sync.Mutex
	table  *memlog.Table
	closed bool
}

func newFallback(policies []Policy, maxKeys int) *fallback {
	minLimit := policies[0].Limit
	windows := make([]memlog.Policy, len(policies))
	for i, p := range policies {
		minLimit = min(minLimit, p.Limit)
		windows[i] = memlog.Policy{Limit: int64(p.Limit), Window: p.Window.Microseconds()}
	}
	return &fallback{policies: policies, windows: windows, minLimit: minLimit, maxKeys: maxKeys, start: time.Now()}
}

// get returns the fallback's table, creating it on first use; nil after
// close.
func (f *fallback) get(create bool) *memlog.Table {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	if f.table == nil && create {
		f.table = memlog.NewTable(f.maxKeys)
	}
	return f.table
}

// now is the fallback's time in microseconds, from the monotonic clock.
func (f *fallback) now() int64 { return f.start.UnixMicro() + time.Since(f.start).Microseconds() }

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
	req.Policies = f.policies
	req.Cost = min(req.Cost, f.minLimit)
	now := f.now()
	states := make([]memlog.State, len(f.windows))
	allowed, _ := t.Take(now, f.request(req), states)
	out := make([]PolicyResult, len(states))
	for i, st := range states {
		out[i] = PolicyResult{
			Policy: f.policies[i], Allowed: allowed || st.Allowed, Remaining: int(st.Remaining),
			RetryAfter: time.Duration(st.RetryAfter) * time.Microsecond,
			ResetAfter: time.Duration(st.ResetAfter) * time.Microsecond,
		}
	}
	res := NewResult(out, SourceFallback)
	res.DecidedAt = time.UnixMicro(now)
	return res, req, nil
}

func (f *fallback) request(req Request) memlog.Request {
	return memlog.Request{Namespace: req.Namespace, Key: req.Key, ID: req.ID, Cost: int64(req.Cost), Policies: f.windows}
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
	f.closed = true
	if f.table != nil {
		f.table.Purge()
	}
	return nil
}
