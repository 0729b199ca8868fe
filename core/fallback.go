package slidelog

import (
	"context"
	"sync"
)

// fallback is a limiter's local, per-instance limiter: a MemoryStore
// enforcing the fallback policies. It is created on first use, so a
// limiter whose store never fails starts no goroutine for it.
type fallback struct {
	policies []Policy
	minLimit int
	maxKeys  int

	mu     sync.Mutex
	store  *MemoryStore
	closed bool
}

func newFallback(policies []Policy, maxKeys int) *fallback {
	minLimit := policies[0].Limit
	for _, p := range policies {
		minLimit = min(minLimit, p.Limit)
	}
	return &fallback{policies: policies, minLimit: minLimit, maxKeys: maxKeys}
}

// get returns the fallback's store, creating it on first use; nil after
// close.
func (f *fallback) get() *MemoryStore {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	if f.store == nil {
		f.store = NewMemoryStore(WithMaxKeys(f.maxKeys))
	}
	return f.store
}

// current returns the store if it exists.
func (f *fallback) current() *MemoryStore {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.store
}

// take decides req locally. A cost above the fallback's smallest limit is
// capped at it: such a request takes the whole local window.
func (f *fallback) take(ctx context.Context, req Request) (Result, Request, error) {
	s := f.get()
	if s == nil {
		return Result{}, req, ErrClosed
	}
	req.Policies = f.policies
	req.Cost = min(req.Cost, f.minLimit)
	res, err := s.Take(ctx, req)
	if err != nil {
		return Result{}, req, err
	}
	res.Source = SourceFallback
	return res, req, nil
}

func (f *fallback) refund(ctx context.Context, req Request) error {
	s := f.current()
	if s == nil {
		return nil
	}
	return s.Refund(ctx, req)
}

func (f *fallback) reset(ctx context.Context, req Request) error {
	s := f.current()
	if s == nil {
		return nil
	}
	return s.Reset(ctx, req)
}

// len is how many keys the fallback tracks.
func (f *fallback) len() int {
	s := f.current()
	if s == nil {
		return 0
	}
	return s.Len()
}

func (f *fallback) close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	if f.store == nil {
		return nil
	}
	return f.store.Close()
}
