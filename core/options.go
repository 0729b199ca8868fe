package slidelog

import (
	"context"
	"fmt"
	"log/slog"
)

// Option configures a Limiter. Options are created by the With* functions
// of this package; the interface is sealed.
type Option interface {
	applyLimiter(*limiterConfig) error
}

// defaultMaxKeyLength is the longest identity, in bytes, a limiter accepts
// unless WithMaxKeyLength says otherwise.
const defaultMaxKeyLength = 256

type limiterConfig struct {
	policies     []Policy
	policyFunc   func(context.Context, string) ([]Policy, error)
	maxKeyLength int
	limiterResilience
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
// The default is 256.
func WithMaxKeyLength(n int) Option {
	return limiterOptionFunc(func(c *limiterConfig) error {
		if n <= 0 {
			return fmt.Errorf("%w: max key length %d, want > 0", ErrInvalidOption, n)
		}
		c.maxKeyLength = n
		return nil
	})
}

// limiterResilience is the part of limiterConfig that says what a limiter
// does when its store cannot decide, and what it reports.
type limiterResilience struct {
	failureMode       FailureMode
	fallbackPolicies  []Policy
	fallbackInstances int
	fallbackMaxKeys   int
	breaker           BreakerSettings
	denyCacheSize     int
	denyCacheSet      bool
	observers         []Observer
	name              string
	logger            *slog.Logger
}

// WithFailureMode sets what the limiter does when its store cannot decide:
// FailFallback (the default), FailOpen, FailClosed or FailError.
func WithFailureMode(m FailureMode) Option {
	return limiterOptionFunc(func(c *limiterConfig) error {
		if m > FailError {
			return fmt.Errorf("%w: failure mode %d", ErrInvalidOption, m)
		}
		c.failureMode = m
		return nil
	})
}

// WithFallbackInstances makes the local fallback enforce each policy's
// limit divided by n (rounded up, at least 1), so that n app instances
// falling back together admit about the global limit. The default is 1:
// each instance enforces the full limit on its own.
func WithFallbackInstances(n int) Option {
	return limiterOptionFunc(func(c *limiterConfig) error {
		if n < 1 {
			return fmt.Errorf("%w: fallback instances %d, want >= 1", ErrInvalidOption, n)
		}
		c.fallbackInstances = n
		return nil
	})
}

// WithFallbackPolicies replaces the policies the local fallback enforces
// (by default the limiter's own, divided by WithFallbackInstances).
func WithFallbackPolicies(policies ...Policy) Option {
	return limiterOptionFunc(func(c *limiterConfig) error {
		if len(policies) == 0 {
			return fmt.Errorf("%w: no fallback policies", ErrInvalidOption)
		}
		for _, p := range policies {
			if err := p.Validate(); err != nil {
				return err
			}
		}
		c.fallbackPolicies = append([]Policy(nil), policies...)
		return nil
	})
}

// WithFallbackMaxKeys bounds the keys the local fallback tracks (default
// 100,000); past it, new keys share one overflow log, as in package
// memstore, so no tracked key's window is ever reset.
func WithFallbackMaxKeys(n int) Option {
	return limiterOptionFunc(func(c *limiterConfig) error {
		if n < 1 {
			return fmt.Errorf("%w: fallback max keys %d, want >= 1", ErrInvalidOption, n)
		}
		c.fallbackMaxKeys = n
		return nil
	})
}

// WithBreaker configures the circuit breaker in front of the store; zero
// fields keep their defaults (see BreakerSettings).
func WithBreaker(s BreakerSettings) Option {
	return limiterOptionFunc(func(c *limiterConfig) error {
		if s.ConsecutiveFailures < 0 || s.OpenTimeout < 0 || s.HalfOpenProbes < 0 {
			return fmt.Errorf("%w: negative breaker setting %+v", ErrInvalidOption, s)
		}
		c.breaker = s
		return nil
	})
}

// WithDenyCache sets how many denied keys the local deny cache holds
// (default 10,000); 0 switches the cache off. The cache is on by default,
// but for a Local store (StoreInfo.Local, such as memstore), which
// answers as fast as the cache would: a limiter on one gets a cache, and
// pays for its bookkeeping, only when this option asks.
func WithDenyCache(size int) Option {
	return limiterOptionFunc(func(c *limiterConfig) error {
		if size < 0 {
			return fmt.Errorf("%w: deny cache size %d, want >= 0", ErrInvalidOption, size)
		}
		c.denyCacheSize, c.denyCacheSet = size, true
		return nil
	})
}

// WithObserver gives the limiter's events and gauges to o (see Observer),
// beside any other observer. Package prommetrics builds one that keeps
// Prometheus metrics, package otelmetrics one that records OpenTelemetry
// metrics. Without an observer no metric is kept.
func WithObserver(o Observer) Option {
	return limiterOptionFunc(func(c *limiterConfig) error {
		if o == nil {
			return fmt.Errorf("%w: nil observer", ErrInvalidOption)
		}
		c.observers = append(c.observers, o)
		return nil
	})
}

// WithName names the limiter in metric labels and log records, and keys
// its logs in the store (Request.Namespace). Limiters with the same name
// on one Redis, in separate processes, share each key's budget (the
// instances of one service should); within one process a second open
// limiter with the same name on the same store fails New with
// ErrNameTaken. The name stays when policies change, and so do the logs:
// name every limiter on a shared store.
//
// The default name is the policies' names joined with "+", such as
// "per-second+per-hour". On a store shared between programs (one that is
// not Local, such as Redis), the logs of a limiter without WithName are
// also keyed by the program's path (see Limiter.Name): instances of
// one program share them, two programs never do, and a program whose
// main package moves starts new logs.
func WithName(name string) Option {
	return limiterOptionFunc(func(c *limiterConfig) error {
		if name == "" {
			return fmt.Errorf("%w: empty limiter name", ErrInvalidOption)
		}
		c.name = name
		return nil
	})
}

// WithLogger sets where the limiter logs warnings, such as an evicting
// maxmemory-policy, a breaker opening, or a store node's decisions going
// to the failure mode, each with its cause (at most one record per node
// every 10 seconds while the failures last) (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return limiterOptionFunc(func(c *limiterConfig) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", ErrInvalidOption)
		}
		c.logger = l
		return nil
	})
}
