package slidelog

import "time"

// Source tells which part of the limiter made a decision: the store,
// under the name its StoreInfo gives ("redis" for redisstore, "memory" for
// memstore), or one of the limiter's own parts below. Its value is the
// name metrics label decisions with.
type Source string

// The limiter's own decision sources. Any other non-empty Source is a
// store's name.
const (
	// SourceNone is the zero Source: no decision was made.
	SourceNone Source = ""
	// SourceFallback is a decision of the local fallback limiter, taken
	// because the primary store could not decide.
	SourceFallback Source = "fallback"
	// SourceFailOpen is an admission without any check, taken because the
	// store could not decide and the failure mode is FailOpen.
	SourceFailOpen Source = "fail_open"
	// SourceFailClosed is a denial without any check, taken because the
	// store could not decide and the failure mode is FailClosed.
	SourceFailClosed Source = "fail_closed"
	// SourceDenyCache is a denial answered locally from an earlier denial of
	// the same key whose RetryAfter has not yet passed.
	SourceDenyCache Source = "deny_cache"
)

// defaultStoreName is the Source of a store that gives no name.
const defaultStoreName = "store"

// String returns the source's name as used in metric labels, such as
// "redis" or "fallback"; "none" for SourceNone.
func (s Source) String() string {
	if s == SourceNone {
		return "none"
	}
	return string(s)
}

// FromStore reports whether the store decided: s is neither SourceNone
// nor one of the limiter's own sources.
func (s Source) FromStore() bool {
	switch s {
	case SourceNone, SourceFallback, SourceFailOpen, SourceFailClosed, SourceDenyCache, "none":
		return false
	}
	return true
}

// PolicyResult is the state of one policy after a decision.
type PolicyResult struct {
	// Policy is the policy this state belongs to.
	Policy Policy
	// Allowed reports whether this policy had room for the request's cost.
	Allowed bool
	// Remaining is the number of units still free in the rolling window
	// after this decision (a denial records nothing, so it is what was
	// free before it), from 0 to the policy's limit: admissions written
	// without a check (Recorder) may hold more than the limit.
	Remaining int
	// RetryAfter is, on a denial by this policy, exactly how long until
	// enough entries leave the window for the request's cost to fit. It is
	// zero when the policy had room.
	RetryAfter time.Duration
	// ResetAfter is how long until the window holds no entries at all.
	ResetAfter time.Duration
}

// Result is a limiter's decision. A denial is Allowed == false, never an
// error.
//
// The top-level fields describe the binding policy: on a denial the
// violated policy that frees up last, otherwise the policy with the fewest
// units remaining. With several policies, Policies holds every policy's
// state; a decision on a single policy leaves Policies nil, since the
// top-level fields are that policy's state (so that a decision allocates
// nothing). States returns every policy's state in either case.
type Result struct {
	// Allowed reports whether the request was admitted and recorded.
	Allowed bool
	// Limit is the binding policy's limit.
	Limit int
	// Remaining is the number of units the binding policy still has free.
	Remaining int
	// RetryAfter is zero when Allowed; otherwise exactly how long until
	// every violated policy has room for the request's cost.
	RetryAfter time.Duration
	// ResetAfter is how long until the binding policy's window is empty.
	ResetAfter time.Duration
	// Policy is the binding policy.
	Policy Policy
	// Policies is the state of each of the limiter's policies, in the
	// order they were configured, when there are several; nil for a
	// decision on one policy. Use States to read either.
	Policies []PolicyResult
	// Source tells what made the decision.
	Source Source
	// DecidedAt is when the decision was made, by the deciding store's
	// clock (the Redis server's for redisstore), to the microsecond.
	DecidedAt time.Time
	// StableFor is, on a denial, how long until the first entry leaves
	// any policy's window: until then every field of the denial stays
	// true but for the elapsed time, so a limiter's deny cache may repeat
	// it without asking the store. Zero when the store does not say.
	StableFor time.Duration

	// ticket identifies what was recorded, for Refund; zero when nothing
	// was.
	ticket ticket
}

// ticket is what Limiter.Refund needs of an admission: the limiter that
// made it (whose namespace and policies complete the request) and what
// only the call knew. It is small because a Result is copied on every
// decision.
type ticket struct {
	from *Limiter // nil when nothing was recorded
	key  string
	id   uint64
	cost int
}

// ticketOf returns the ticket of req, recorded by l.
func ticketOf(l *Limiter, req *Request) ticket {
	return ticket{from: l, key: req.Key, id: req.ID, cost: req.Cost}
}

// NewResult builds a Result from the state of every policy: allowed only
// when every policy allowed, with the binding policy chosen as documented
// on Result. Stores use it (package memstore and package redisstore do),
// and so does the limiter for its own decisions. With one policy it
// leaves Policies nil, that policy's state being the top-level fields;
// with several, Policies is a copy of policies. It keeps no reference to
// policies, so a store may pass a slice of an array on its stack and
// build a Result of one policy without allocating.
func NewResult(policies []PolicyResult, source Source) Result {
	r := Result{Allowed: true, Source: source}
	if len(policies) > 1 {
		r.Policies = append([]PolicyResult(nil), policies...)
	}
	bind := -1
	for i, p := range policies {
		if !p.Allowed {
			if r.Allowed || p.RetryAfter > r.RetryAfter {
				bind = i
				r.RetryAfter = p.RetryAfter
			}
			r.Allowed = false
			continue
		}
		if r.Allowed && (bind < 0 || p.Remaining < policies[bind].Remaining) {
			bind = i
		}
	}
	if bind >= 0 {
		b := policies[bind]
		r.Policy, r.Limit, r.Remaining, r.ResetAfter = b.Policy, b.Policy.Limit, b.Remaining, b.ResetAfter
	}
	if len(policies) == 0 {
		r.Allowed = false
	}
	return r
}

// Unchecked reports whether the decision was made without asking the
// store or checking any policy: by FailOpen or FailClosed. Its policy
// states are then not known, and it violated none.
func (r Result) Unchecked() bool {
	return r.Source == SourceFailOpen || r.Source == SourceFailClosed
}

// States returns the state of each policy of the decision, in the order
// they were configured: Policies when the decision had several, otherwise
// the one policy's state made of the top-level fields (a new slice), and
// nil for the zero Result.
func (r Result) States() []PolicyResult {
	if r.Policies != nil {
		return r.Policies
	}
	if r.Policy == (Policy{}) {
		return nil
	}
	return []PolicyResult{{
		Policy: r.Policy, Allowed: r.Allowed, Remaining: r.Remaining,
		RetryAfter: r.RetryAfter, ResetAfter: r.ResetAfter,
	}}
}

// Violated returns the names of the policies that denied the request, in
// configuration order; nil when the request was allowed.
func (r Result) Violated() []string {
	if r.Allowed {
		return nil
	}
	var names []string
	for _, p := range r.States() {
		if !p.Allowed {
			names = append(names, p.Policy.String())
		}
	}
	return names
}
