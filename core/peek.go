package slidelog

import (
	"context"
	"fmt"
)

// Peeker is a Store that can read a key's usage without recording
// anything: the state a request would find, for showing a client how much
// of its quota it has used. Package memstore and package redisstore
// implement it.
type Peeker interface {
	Store
	// Peek returns the Result a Take of req would return if it recorded
	// nothing: per policy, the units free now (Remaining, before req's
	// cost), whether req.Cost would fit (Allowed), RetryAfter when it
	// would not, and ResetAfter. It changes no count. It fails as Take
	// does, and a Peek whose context ends while it waits returns as
	// Store says of Take, Refund and Reset: at once, with an error.
	Peek(ctx context.Context, req Request) (Result, error)
}

// Peek reports key's usage of every policy now without consuming any:
// the Result an Allow would return, except that nothing is recorded and
// each policy's Remaining is what is free before a request (Limit -
// Remaining units are used). Allowed reports whether a request of cost 1
// would be admitted now. It reads the store each time (no deny cache);
// Source is the store's.
//
// Bucketed policies (Precision) report what they enforce: an admission
// counts until the end of its bucket has left the window, so usage can be
// higher than the exact count by the admissions of at most one bucket.
//
// With WithPolicyFunc, Peek reports the policies the function chooses for
// key now.
//
// Peek fails with ErrInvalidKey, ErrClosed, ErrPolicyFunc, the context's error,
// ErrUnavailable when the store cannot answer or the breaker of the key's
// node is open (no failure mode applies: a usage read is never invented),
// and ErrInvalidOption when the store does not implement Peeker. It waits
// for the store as the package documentation's "Waiting" says.
func (l *Limiter) Peek(ctx context.Context, key string) (Result, error) {
	if err := l.check(ctx, key); err != nil {
		return Result{}, err
	}
	if l.memory != nil {
		policies, _, err := l.policiesFor(ctx, key)
		if err != nil {
			return Result{}, err
		}
		return l.peekMemory(key, policies)
	}
	p, ok := l.store.(Peeker)
	if !ok {
		return Result{}, fmt.Errorf("%w: store %T cannot report usage (it does not implement slidelog.Peeker)", ErrInvalidOption, l.store)
	}
	policies, _, err := l.policiesFor(ctx, key)
	if err != nil {
		return Result{}, err
	}
	req := Request{Namespace: l.namespace, Key: key, Cost: 1, Policies: policies}
	var res Result
	err = l.call(ctx, &req, func(ctx context.Context, req Request) error {
		res, err = p.Peek(ctx, req)
		return err
	})
	if err != nil {
		return Result{}, err
	}
	return res, nil
}
