package slidelog

import (
	"context"
	"reflect"
)

// Request is what a Limiter asks of its Store for one decision.
type Request struct {
	// Namespace keeps apart the logs of limiters that share a store: the
	// same Key in two namespaces names two logs. A Limiter sets it to
	// PolicyNamespace of its policies, so limiters with different
	// policies never count each other's requests or evict each other's
	// entries, while limiters with identical policies share a log.
	Namespace string
	// Key is the client's identity, already validated by the limiter:
	// non-empty and within the limiter's maximum key length. A store maps
	// it to its own storage key.
	Key string
	// Cost is the number of units the request needs, 1 <= Cost <= the
	// smallest limit of Policies.
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
	// in all of them; a denial records nothing. A second Take with the
	// same ID and key reports the first one's admission without recording
	// it again.
	Take(ctx context.Context, req Request) (Result, error)
	// Refund removes the entries that the admitted request req recorded.
	// Refunding a request that recorded nothing, or was already refunded,
	// is not an error.
	Refund(ctx context.Context, req Request) error
	// Reset removes every entry of req.Key in req.Namespace; the other
	// fields are ignored.
	Reset(ctx context.Context, req Request) error
	// Close releases what the store owns. It does not close a Redis client
	// that was passed in.
	Close() error
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
