package slidelog

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
)

// Limiter enforces one or more sliding-window policies per key on a Store.
// It is safe for concurrent use; create it with New and release it with
// Close.
type Limiter struct {
	store        Store
	policies     []Policy
	minLimit     int
	maxKeyLength int
	closed       atomic.Bool
}

// New returns a limiter that enforces policy, and any policies added with
// WithPolicy, on store. It fails with ErrNilStore, ErrInvalidPolicy or
// ErrInvalidOption.
func New(store Store, policy Policy, opts ...Option) (*Limiter, error) {
	if store == nil {
		return nil, ErrNilStore
	}
	cfg := limiterConfig{policies: []Policy{policy}, maxKeyLength: DefaultMaxKeyLength}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.applyLimiter(&cfg); err != nil {
			return nil, err
		}
	}
	names := make(map[string]bool, len(cfg.policies))
	minLimit := cfg.policies[0].Limit
	for _, p := range cfg.policies {
		if err := p.Validate(); err != nil {
			return nil, err
		}
		if names[p.String()] {
			return nil, fmt.Errorf("%w: two policies named %q", ErrInvalidPolicy, p.String())
		}
		names[p.String()] = true
		minLimit = min(minLimit, p.Limit)
	}
	return &Limiter{store: store, policies: cfg.policies, minLimit: minLimit, maxKeyLength: cfg.maxKeyLength}, nil
}

// Policies returns a copy of the limiter's policies, the first one first.
func (l *Limiter) Policies() []Policy { return append([]Policy(nil), l.policies...) }

// Allow is AllowN(ctx, key, 1).
func (l *Limiter) Allow(ctx context.Context, key string) (Result, error) {
	return l.AllowN(ctx, key, 1)
}

// AllowN decides whether a request of cost n by key may proceed now, and
// records it when it may. The request is admitted only if every policy has
// n free units; it is then recorded in all of them, otherwise in none.
//
// A denial is a Result with Allowed == false. An error means no decision
// was made: ErrInvalidKey for an empty or oversized key, ErrInvalidCost for
// n < 1 or n above the smallest limit, ErrClosed after Close, the
// context's error when it is done, and ErrUnavailable when the store
// failed.
func (l *Limiter) AllowN(ctx context.Context, key string, n int) (Result, error) {
	if err := l.check(ctx, key); err != nil {
		return Result{}, err
	}
	if n < 1 || n > l.minLimit {
		return Result{}, fmt.Errorf("%w: cost %d, want 1..%d", ErrInvalidCost, n, l.minLimit)
	}
	req := Request{Key: key, Cost: n, Policies: l.policies, ID: rand.Uint64()}
	res, err := l.store.Take(ctx, req)
	if err != nil {
		return Result{}, err
	}
	if res.Allowed {
		res.ticket = req
	}
	return res, nil
}

// Refund removes what the admitted result res recorded, so that the
// request no longer counts against its key. Adapters use it to give back a
// request the server failed (a 5xx). It fails with ErrNotRefundable when
// res recorded nothing.
func (l *Limiter) Refund(ctx context.Context, res Result) error {
	if res.ticket.Cost == 0 || !res.Allowed {
		return ErrNotRefundable
	}
	if err := l.check(ctx, res.ticket.Key); err != nil {
		return err
	}
	return l.store.Refund(ctx, res.ticket)
}

// Reset removes every entry of key, so that its next request sees empty
// windows.
func (l *Limiter) Reset(ctx context.Context, key string) error {
	if err := l.check(ctx, key); err != nil {
		return err
	}
	return l.store.Reset(ctx, key)
}

// Close closes the limiter's store. Calls after Close fail with ErrClosed.
// Close is idempotent.
func (l *Limiter) Close() error {
	if l.closed.Swap(true) {
		return nil
	}
	return l.store.Close()
}

// ValidateKey reports whether key is an identity the limiter accepts,
// with an error wrapping ErrInvalidKey when it is not. HTTP adapters call
// it to answer a bad identity with a 4xx before any store call.
func (l *Limiter) ValidateKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty", ErrInvalidKey)
	}
	if len(key) > l.maxKeyLength {
		return fmt.Errorf("%w: %d bytes, want at most %d", ErrInvalidKey, len(key), l.maxKeyLength)
	}
	return nil
}

func (l *Limiter) check(ctx context.Context, key string) error {
	if l.closed.Load() {
		return ErrClosed
	}
	if err := l.ValidateKey(key); err != nil {
		return err
	}
	return ctx.Err()
}
