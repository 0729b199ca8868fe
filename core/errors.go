package slidelog

import "errors"

// Sentinel errors. Every error returned by this package wraps one of them,
// so callers can test with errors.Is. A denial is never an error: it is a
// Result with Allowed == false. An error means no decision could be made.
var (
	// ErrInvalidPolicy reports a policy with a Limit outside 1..MaxLimit, a
	// Window outside 1 ms..100 years, a Precision Validate refuses, or two policies of one limiter
	// with the same name.
	ErrInvalidPolicy = errors.New("slidelog: invalid policy")

	// ErrInvalidCost reports a cost below 1 or above the smallest limit of
	// the limiter's policies (such a request could never be admitted).
	ErrInvalidCost = errors.New("slidelog: invalid cost")

	// ErrInvalidKey reports an empty identity, or one longer than the
	// limiter's maximum key length. HTTP adapters answer it with a 4xx
	// before any store is called.
	ErrInvalidKey = errors.New("slidelog: invalid key")

	// ErrInvalidOption reports an option with a value it cannot take, such
	// as a key prefix containing a brace.
	ErrInvalidOption = errors.New("slidelog: invalid option")

	// ErrNilStore reports a nil Store, or a Store holding a nil pointer,
	// passed to New.
	ErrNilStore = errors.New("slidelog: nil store")

	// ErrClosed reports a call on a limiter or store after Close.
	ErrClosed = errors.New("slidelog: closed")

	// ErrUnavailable reports that the store could not make a decision: Redis
	// was unreachable, stalled, out of memory or answered with an error.
	// The underlying cause is wrapped.
	ErrUnavailable = errors.New("slidelog: store unavailable")

	// ErrStalled is the cause of a store call given up because its node
	// sent nothing for the store's stall timeout while calls waited on it
	// (redisstore.WithStallTimeout). It comes wrapped in ErrUnavailable; a
	// limiter hands the decision to its failure mode with the reason
	// "stalled".
	ErrStalled = errors.New("slidelog: store node made no progress")

	// ErrDamagedKey is the cause of a store call that failed because of
	// what the store holds for the request's key (data of the wrong kind
	// that the store could not rebuild), not because of the node. It comes
	// wrapped in ErrUnavailable; a limiter hands the decision to its
	// failure mode but does not count it against the node's circuit
	// breaker, so one bad key never sends other keys to the failure mode.
	ErrDamagedKey = errors.New("slidelog: store data of the key is damaged")

	// ErrUnservedKey is the cause of a store call that failed because no
	// node serves the request's key just then (a Redis Cluster hash slot
	// that has no master in the view of the node asked, as a failover can
	// leave one for a moment), not because of the node: it answered. It
	// comes wrapped in ErrUnavailable; a limiter hands the decision to its
	// failure mode but does not count it against the node's circuit
	// breaker, so the keys the node does serve stay on it.
	ErrUnservedKey = errors.New("slidelog: no store node serves the key")

	// ErrNameTaken reports a second limiter with the name of a limiter
	// that is still open on the same store in this process (WithName). A
	// limiter's name keys its logs, so two such limiters would share one
	// budget; instances of one service share a budget on purpose by
	// giving their limiters the same name in separate processes.
	ErrNameTaken = errors.New("slidelog: limiter name taken")

	// ErrNotRefundable reports a Refund of a Result that recorded nothing:
	// a denial, a zero Result, a decision of the deny cache, or an
	// admission of FailOpen, which recorded nothing anywhere.
	ErrNotRefundable = errors.New("slidelog: result cannot be refunded")

	// ErrPolicyFunc reports that the limiter's policy function
	// (WithPolicyFunc) failed, so no policies and no decision: it wraps
	// the function's error.
	ErrPolicyFunc = errors.New("slidelog: policy func failed")
)
