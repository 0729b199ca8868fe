package slidelog

import (
	"fmt"
	"time"
)

// Option configures a Limiter. Options are created by the With* functions
// of this package; the interface is sealed.
type Option interface {
	applyLimiter(*limiterConfig) error
}

// StoreOption configures a RedisStore or a MemoryStore. Options are created
// by the With* functions of this package; each documents which store it
// applies to, and the other store ignores it.
type StoreOption interface {
	applyStore(*storeConfig) error
}

// DefaultMaxKeyLength is the longest identity, in bytes, a limiter accepts
// unless WithMaxKeyLength says otherwise.
const DefaultMaxKeyLength = 256

type limiterConfig struct {
	policies     []Policy
	maxKeyLength int
}

type limiterOptionFunc func(*limiterConfig) error

func (f limiterOptionFunc) applyLimiter(c *limiterConfig) error { return f(c) }

// WithPolicy adds policies enforced together with the limiter's first
// policy on the same key: a request is admitted only when every policy has
// room, and is then recorded in all of them. For example,
// New(store, PerSecond(10), WithPolicy(PerHour(1000))).
func WithPolicy(policies ...Policy) Option {
	return limiterOptionFunc(func(c *limiterConfig) error {
		c.policies = append(c.policies, policies...)
		return nil
	})
}

// WithMaxKeyLength sets the longest identity, in bytes, the limiter
// accepts; longer ones fail with ErrInvalidKey before any store call.
// The default is DefaultMaxKeyLength.
func WithMaxKeyLength(n int) Option {
	return limiterOptionFunc(func(c *limiterConfig) error {
		if n <= 0 {
			return fmt.Errorf("%w: max key length %d, want > 0", ErrInvalidOption, n)
		}
		c.maxKeyLength = n
		return nil
	})
}

type storeConfig struct {
	keyPrefix     string
	keySecret     []byte
	clock         func() time.Time
	maxKeys       int
	sweepInterval time.Duration

	pipelinesPerNode int
	pipeliningSet    bool
}

type storeOptionFunc func(*storeConfig) error

func (f storeOptionFunc) applyStore(c *storeConfig) error { return f(c) }

// WithClock makes a store take the time from clock instead of the Redis
// server (RedisStore) or the process's monotonic clock (MemoryStore). It
// exists for tests that need to move time by hand; production code should
// not use it, since app instances with skewed clocks would disagree.
// Times are truncated to microseconds; a nil clock keeps the default.
// Applies to both stores.
func WithClock(clock func() time.Time) StoreOption {
	return storeOptionFunc(func(c *storeConfig) error {
		c.clock = clock
		return nil
	})
}
