package slidelog

import (
	"context"
	"fmt"
)

// WithPolicyFunc makes f choose the policies of each decision on key, such
// as the limits of a customer's plan looked up from ctx (what an
// authentication middleware stored there) or from key itself:
//
//	slidelog.New(store, slidelog.PerMinute(100), slidelog.WithName("api"),
//		slidelog.WithPolicyFunc(func(ctx context.Context, key string) ([]slidelog.Policy, error) {
//			switch plans.Of(ctx) {
//			case "pro":
//				return []slidelog.Policy{slidelog.PerMinute(10_000)}, nil
//			}
//			return nil, nil // New's policies: 100 a minute
//		}))
//
// AllowN and Peek call f once per call, after the key is validated and
// before the deny cache or the store: no decision costs a store call more
// than with fixed policies. When f returns no policies, the limiter's own
// (New's policy and WithPolicy's) apply. When f fails, no decision is
// made: AllowN and Peek return an error wrapping ErrPolicyFunc and f's
// error. Policies f returns are validated as New validates its own: an
// invalid one fails the call with an error wrapping both ErrInvalidOption
// and ErrInvalidPolicy. A cost is checked against their smallest limit
// (ErrInvalidCost).
//
// The guarantees are those of fixed policies. Each decision is strict
// under the policies it applies: no rolling window of one of them admits
// more than its limit. A key keeps one log under the limiter's name
// whatever its plan, and every policy counts every admission the log
// still holds, so a change of plan neither resets a key's usage nor lets
// it start afresh: a client that used 80 of a free plan's 100 a minute
// has 9,920 left after an upgrade to 10,000 a minute, and none after a
// downgrade to 50. Give a plan's policies the same names and windows
// across plans ("per-minute", "per-day"), so that the response header
// fields name the same policies whatever the plan. A log is kept as long as
// the longest window of the policies of its latest decision. A store's
// memory and work per decision depend on the policies, not on f: the
// limiter remembers nothing per key for f.
//
// Result reports the policies applied, as do the header fields the HTTP
// middleware sends. The local fallback enforces each decision's policies
// divided by WithFallbackInstances, unless WithFallbackPolicies sets its
// own; FailOpen and FailClosed report the decision's policies.
//
// f must be safe for concurrent use. A slow f delays each decision: keep
// plans in memory, or cache their lookups.
func WithPolicyFunc(f func(ctx context.Context, key string) ([]Policy, error)) Option {
	return limiterOptionFunc(func(c *limiterConfig) error {
		if f == nil {
			return fmt.Errorf("%w: nil policy func", ErrInvalidOption)
		}
		c.policyFunc = f
		return nil
	})
}

// policiesFor returns the policies of a decision on key and their smallest
// limit: the policy func's choice, or the limiter's own policies.
func (l *Limiter) policiesFor(ctx context.Context, key string) ([]Policy, int, error) {
	if l.policyFunc == nil {
		return l.policies, l.minLimit, nil
	}
	ps, err := l.policyFunc(ctx, key)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrPolicyFunc, err)
	}
	if len(ps) == 0 {
		return l.policies, l.minLimit, nil
	}
	minLimit, err := validatePolicies(ps)
	if err != nil {
		// The program's own mistake, not the client's: adapters answer
		// ErrInvalidOption as a misconfiguration (500, Internal).
		return nil, 0, fmt.Errorf("%w: policy func: %w", ErrInvalidOption, err)
	}
	return ps, minLimit, nil
}

// validatePolicies checks each policy and that no two share a name, and
// returns their smallest limit.
func validatePolicies(ps []Policy) (int, error) {
	minLimit := ps[0].Limit
	for i, p := range ps {
		if err := p.Validate(); err != nil {
			return 0, err
		}
		for _, q := range ps[:i] {
			if q.String() == p.String() {
				return 0, fmt.Errorf("%w: two policies named %q", ErrInvalidPolicy, p.String())
			}
		}
		minLimit = min(minLimit, p.Limit)
	}
	return minLimit, nil
}

// costErrorFor is AllowN's error for a cost n out of range of policies
// whose smallest limit is minLimit.
func costErrorFor(n, minLimit int) error {
	return fmt.Errorf("%w: cost %d, want 1..%d", ErrInvalidCost, n, minLimit)
}

// samePolicies reports whether res was decided under exactly ps, for the
// deny cache: a denial cached under one plan does not answer another.
func samePolicies(res *Result, ps []Policy) bool {
	if len(res.Policies) == 0 {
		return len(ps) == 1 && res.Policy == ps[0]
	}
	if len(res.Policies) != len(ps) {
		return false
	}
	for i := range ps {
		if res.Policies[i].Policy != ps[i] {
			return false
		}
	}
	return true
}

// policiesOf returns the policies res was decided under.
func policiesOf(res *Result) []Policy {
	if len(res.Policies) == 0 {
		return []Policy{res.Policy}
	}
	ps := make([]Policy, len(res.Policies))
	for i, p := range res.Policies {
		ps[i] = p.Policy
	}
	return ps
}

// dividedPolicies returns policies with each limit divided by instances,
// rounded up, at least 1: what the local fallback enforces of a decision's
// policies.
func dividedPolicies(policies []Policy, instances int) []Policy {
	if instances <= 1 {
		return policies
	}
	out := make([]Policy, len(policies))
	for i, p := range policies {
		p.Limit = max(1, ceilDiv(p.Limit, instances))
		out[i] = p
	}
	return out
}
