package slidelog

import (
	"context"
	"fmt"
	"reflect"
	"time"
)

// Request is what a Limiter asks of its Store for one decision.
type Request struct {
	// Namespace keeps apart the logs of limiters that share a store: the
	// same Key in two namespaces names two logs. A Limiter sets it to its
	// name (WithName), so a log outlives a change of the limiter's
	// policies, and instances share a budget exactly when their limiters
	// share a name.
	Namespace string
	// Key is the client's identity, already validated by the limiter:
	// non-empty and within the limiter's maximum key length. A store maps
	// it to its own storage key.
	Key string
	// Cost is the number of units the request needs, 1 <= Cost <= the
	// smallest limit of Policies. A store records it as one entry
	// carrying its cost, whatever the cost.
	Cost int
	// Policies are checked and recorded together: the request is admitted
	// only if every policy has room, and then recorded in all of them.
	Policies []Policy
	// ID is unique per call. A store records the request under it, so that
	// a retried call with the same ID is not counted twice, and so that
	// Refund can remove exactly what this call recorded.
	ID uint64
}

// Store keeps the sliding-window logs and makes decisions atomically.
// Implementations must be safe for concurrent use. Package memstore keeps
// them in process memory and package redisstore in Redis; the conformance
// suite of package slidelogtest checks any implementation.
//
// An error from Take means no decision could be made; a denial is a Result
// with Allowed == false (built with NewResult). Every error wraps one of
// this package's sentinel errors, ErrUnavailable for failures of the
// backing service.
//
// A store may offer more through the optional interfaces NodeStore (a
// circuit breaker and stall watch per node), Recorder (write-back of the
// fallback's admissions) and LocalStore (no breaker, fallback or deny
// cache needed). A store whose decisions follow a clock of its own, such
// as a test clock, may also have a method Clock() func() time.Time
// returning it (nil for the process's clock): the limiter's deny cache
// then measures elapsed time by it.
type Store interface {
	// Take evicts entries that left each policy's window, admits the
	// request only if every policy has room for its cost, and records it
	// in all of them as one entry carrying its cost; a denial records
	// nothing. A request with an invalid policy fails with
	// ErrInvalidPolicy, and one whose cost is below 1 or above a limit
	// with ErrInvalidCost, on every store alike (Request.Validate). A
	// store reached over a network, where a call may be sent twice, must
	// treat a second Take with the same ID and key as a retry: it reports
	// the first one's admission without recording it again.
	Take(ctx context.Context, req Request) (Result, error)
	// Refund removes the entry that the admitted request req recorded,
	// found by req.ID, with the cost recorded in it (req.Cost is not
	// trusted). Refunding a request that recorded nothing, or was already
	// refunded, is not an error.
	Refund(ctx context.Context, req Request) error
	// Reset removes every entry of req.Key in req.Namespace; the other
	// fields are ignored.
	Reset(ctx context.Context, req Request) error
	// Close releases what the store owns. It does not close a Redis client
	// that was passed in.
	Close() error
}

// Validate checks what every store checks before it decides, so that
// stores answer bad input alike: at least one valid policy (ErrInvalidPolicy)
// and 1 <= Cost <= the smallest limit (ErrInvalidCost).
func (req Request) Validate() error {
	if len(req.Policies) == 0 {
		return fmt.Errorf("%w: no policies", ErrInvalidPolicy)
	}
	minLimit := req.Policies[0].Limit
	for _, p := range req.Policies {
		if err := p.Validate(); err != nil {
			return err
		}
		minLimit = min(minLimit, p.Limit)
	}
	if req.Cost < 1 || req.Cost > minLimit {
		return fmt.Errorf("%w: cost %d, want 1..%d", ErrInvalidCost, req.Cost, minLimit)
	}
	return nil
}

// ValidateRecord checks a request to record without a check (see
// Recorder): valid policies (ErrInvalidPolicy), 1 <= Cost <= MaxLimit
// (ErrInvalidCost), and a time after the Unix epoch (ErrInvalidOption).
func (req Request) ValidateRecord(at time.Time) error {
	if len(req.Policies) == 0 {
		return fmt.Errorf("%w: no policies", ErrInvalidPolicy)
	}
	for _, p := range req.Policies {
		if err := p.Validate(); err != nil {
			return err
		}
	}
	if req.Cost < 1 || req.Cost > MaxLimit {
		return fmt.Errorf("%w: cost %d, want 1..%d", ErrInvalidCost, req.Cost, MaxLimit)
	}
	if at.UnixMicro() <= 0 {
		return fmt.Errorf("%w: admission time %v before 1970", ErrInvalidOption, at)
	}
	return nil
}

// isNilStore reports whether s is nil or holds a nil pointer, such as
// (*memstore.Store)(nil), whose methods would panic on the first request.
func isNilStore(s Store) bool {
	if s == nil {
		return true
	}
	v := reflect.ValueOf(s)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// NodeStore is a Store spread over several nodes, such as the masters of a
// Redis Cluster. A limiter on it keeps one circuit breaker and one stall
// watch per node, so a failing node sends only its own keys to the
// failure mode.
//
// Each call the limiter makes carries a Watch in its context (WatchFrom).
// The store reports every reply of the call's node to it, which keeps the
// node from being judged stalled while it answers, however long a
// decision queues; when the node is judged stalled, the call's context is
// cancelled with cause ErrStalled and the store should give up at once.
type NodeStore interface {
	Store
	// Node returns the address of the node that holds req's log, or ""
	// when the store does not know it yet.
	Node(ctx context.Context, req Request) string
}

// Recorder is a Store that can write into its log an admission decided
// elsewhere: a limiter's local fallback admits requests while the store
// cannot decide, and records them once it answers again, so that they
// count against the decisions that follow.
//
// Record writes req (Namespace, Key, ID, Cost and Policies) as admitted at
// time at, to the microsecond, without checking any limit. It is
// idempotent by req.ID: recording an ID twice, or one that Take already
// recorded, counts it once. The entry counts against later decisions
// until at plus each policy's window and is then gone, like an entry of
// Take; one that already left every window is not written. It fails as
// Request.ValidateRecord does, or with ErrUnavailable.
type Recorder interface {
	Store
	Record(ctx context.Context, req Request, at time.Time) error
}

// LocalStore is a Store that decides in this process's memory: it cannot
// fail, stall or be slow, so a limiter on it keeps no circuit breaker,
// fallback or write-back journal, and a deny cache only when WithDenyCache
// asks for one.
type LocalStore interface {
	Store
	// Local marks the store as local; it does nothing.
	Local()
}
