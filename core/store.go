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
// Implementations must be safe for concurrent use.
//
// An error from Take means no decision could be made; a denial is a Result
// with Allowed == false. Every error wraps one of this package's sentinel
// errors, ErrUnavailable for failures of the backing service.
type Store interface {
	// Take evicts entries that left each policy's window, admits the
	// request only if every policy has room for its cost, and records it
	// in all of them as one entry carrying its cost; a denial records
	// nothing. A request with an invalid policy fails with
	// ErrInvalidPolicy, and one whose cost is below 1 or above a limit
	// with ErrInvalidCost, on every store alike. A second Take with the
	// same ID and key reports the first one's admission without recording
	// it again.
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

// validate checks what every store checks before it decides, so that
// stores answer bad input alike: at least one valid policy (ErrInvalidPolicy)
// and 1 <= Cost <= the smallest limit (ErrInvalidCost).
func (req Request) validate() error {
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

// longestWindow is the longest window of req's policies, in microseconds.
func (req Request) longestWindow() int64 {
	var longest int64
	for _, p := range req.Policies {
		longest = max(longest, p.windowMicros())
	}
	return longest
}

// validateRecord checks a request to record without a check: valid
// policies, 1 <= Cost <= MaxLimit, and a time after the Unix epoch.
func (req Request) validateRecord(at time.Time) error {
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
// (*MemoryStore)(nil), whose methods would panic on the first request.
func isNilStore(s Store) bool {
	if s == nil {
		return true
	}
	v := reflect.ValueOf(s)
	return v.Kind() == reflect.Pointer && v.IsNil()
}
