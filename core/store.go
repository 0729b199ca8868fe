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
	// ID is unique per call (a limiter draws it at random). A store
	// records the request under it, in the log of Namespace and Key, where
	// alone it looks the ID up: so that a retried call with the same ID is
	// not counted twice, and so that Refund can remove exactly what this
	// call recorded.
	ID uint64
	// Route is what the store's Route returned for this request (Router);
	// zero for a store that does not route, or a call not made by a
	// limiter.
	Route Route
}

// Store keeps the sliding-window logs and makes decisions atomically.
// Implementations must be safe for concurrent use, and pointers: New
// tells stores apart by pointer, to refuse a second open limiter of one
// name on one store (ErrNameTaken). Package memstore keeps the logs in
// process memory and package redisstore in Redis; the conformance suite
// of package slidelogtest checks any implementation.
//
// The limiter validates every request before a store sees it (the key, the
// cost, the policies: Request.Validate holds), so a store need not check
// them again. A store decides by its own clock (StoreInfo.Clock), in whole
// microseconds, read once per call; the conformance suite hands it a clock
// to follow (slidelogtest.NewStoreFunc). Take fills every field of its
// Result but Source: each policy's state, through NewResult, which chooses
// the binding policy; DecidedAt, by the store's clock; and StableFor, or
// zero. The limiter hands them on as they are, and its deny cache repeats
// a denial for StableFor.
//
// An error from Take means no decision could be made (a remote call that
// failed on its way back may still have recorded the request); a denial
// is a Result with Allowed == false. A call whose context is done when it
// starts fails with an error wrapping the context's error; calls after
// Close fail with one wrapping ErrClosed. Every other error should wrap
// one of this package's sentinel errors, ErrUnavailable for failures of
// the backing service.
//
// A call of Take, Refund or Reset whose context ends while it waits (on
// a backend that stopped answering, a connection, a lock) returns at
// once, and within a second of the context's end at most, with an error
// wrapping the context's error, or ErrUnavailable when the store gave up
// on the call itself first: an error means no decision, so the caller's
// deadline bounds every call on a store that stalls, and Limiter.Allow
// with it. A request already sent may still take effect on the backend;
// the caller does not wait for it. The conformance suite checks this on
// a backend the test stops (slidelogtest.WithStall).
//
// A store may count more than the log holds, never less: it may forget
// the IDs of old admissions into buckets (memstore keeps a key's 16
// latest, redisstore its 128 latest of the last minute), and then keeps
// counting a refund it cannot find, and counts a resent Take or a Record
// it cannot find again.
//
// The four methods are all a store must have. What else a limiter should
// know of it, a store says in one place (see the package documentation,
// "Writing a store"): Describe (Describer) names its decisions' Source
// and says whether it is local and which clock it follows; Route (Router)
// places a request on a node once per decision, for a circuit breaker
// per node; Record (Recorder) writes the fallback's
// admissions back; Keep (Keeper) takes them over, to write each within
// its key's next decision.
type Store interface {
	// Take admits the request only if every policy has room for its cost,
	// and records it in all of them as one entry carrying its cost; a
	// denial records nothing. A store that does not say it is local
	// (StoreInfo.Local), since a call over a network may be sent twice,
	// must treat a second Take with the same ID and key as a retry: it
	// reports the first one's admission without recording it again. The
	// limiter sets the Result's Source (Describer); a store may leave it
	// zero.
	//
	// A policy without a Precision is decided on the exact log: an entry
	// made at s counts while now < s + Window. A policy with one is decided
	// on buckets of that width aligned to the Unix epoch (see Policy): an
	// entry in a bucket ending at b counts while now < b + Window, and
	// RetryAfter and ResetAfter run to those instants. The conformance
	// suite checks both to the microsecond.
	//
	// The log is the key's, not its policies': an entry stays as long as
	// any window used on the key within that window's length counts it,
	// so that a request with a short window (another instance, during a
	// rolling deploy) never evicts what one with a long window counts.
	Take(ctx context.Context, req Request) (Result, error)
	// Refund removes the entry that the admitted request req recorded,
	// found by req.ID in req's log, with the cost recorded in it (req.Cost
	// is not trusted), from every window that still counts it. Refunding
	// a request that recorded nothing, was already refunded, has left
	// every window or was removed by Reset changes nothing and is not an
	// error.
	Refund(ctx context.Context, req Request) error
	// Reset removes everything the log of req.Key in req.Namespace holds
	// (entries, buckets, the IDs it knows), so that the key decides as one
	// never seen; other keys and namespaces keep theirs. The other fields
	// are ignored.
	Reset(ctx context.Context, req Request) error
	// Close releases what the store owns; calling it again does nothing.
	// It does not close a Redis client that was passed in.
	Close() error
}

// StoreInfo is what a store tells a limiter about itself, once, when the
// limiter is created (Describer). The zero StoreInfo describes a remote
// store named "store" on the process's clock.
type StoreInfo struct {
	// Name is the Source of the store's decisions, as metrics label them:
	// "redis" for redisstore, "memory" for memstore. Empty means "store".
	// It may not be the name of one of the limiter's own sources
	// ("none", "fallback", "fail_open", "fail_closed", "deny_cache").
	Name string
	// Local reports that the store decides in this process's memory and
	// cannot fail, stall or be slow: a limiter on it keeps no circuit
	// breaker, fallback or write-back journal, and a deny
	// cache only when WithDenyCache asks for one.
	Local bool
	// Clock is the clock the store's decisions follow, such as a test
	// clock; nil for the process's. A limiter's deny cache measures
	// elapsed time by it.
	Clock func() time.Time
}

// Describer is a Store that describes itself (see StoreInfo). A limiter
// calls Describe once, in New.
type Describer interface {
	Store
	Describe() StoreInfo
}

// StoreEvent is something a store reports of its own, apart from any
// call (see Notifier). Its value is the "event" label of the metrics.
type StoreEvent string

// EventDataLost reports that a node lost the logs it held: a Redis master
// restarted without persistence, flushed, or whose keys were evicted or
// deleted. Every identity whose log it held starts a new window, so a
// rolling window that spans the loss may admit up to twice its limit
// (docs/operations.md, "Bounds").
const EventDataLost StoreEvent = "data_lost"

// Notifier is a Store that reports events of its own to the limiters on
// it, such as a node that lost its data (EventDataLost). A limiter with a
// StoreEventObserver calls Notify once, in New, and the function it
// returns once, in Close.
type Notifier interface {
	Store
	// Notify calls fn with each event from now on, from a goroutine of
	// the store's, until the function it returns is called; that
	// function returns once no call of fn runs, and calls none after.
	Notify(fn func(node string, event StoreEvent)) (stop func())
}

// Route is where a request's decision runs, as a Router computes it once
// per decision; the limiter passes it back in Request.Route.
type Route struct {
	// Node names the node that holds the request's log, such as the
	// address of a Redis Cluster master; "" when the store does not know
	// it. A limiter keeps a circuit breaker per node.
	Node string
	// LogKey is the store's own name for the request's log (redisstore:
	// the Redis key), opaque to the limiter; "" when the store computes
	// it later. Request.Key is the identity the log belongs to.
	LogKey string
}

// Router is a Store spread over several nodes, such as the masters of a
// Redis Cluster. A limiter on it keeps one circuit breaker per node, so a
// failing node sends only its own keys to the failure mode.
type Router interface {
	Store
	// Route returns where req runs. The limiter calls it once per
	// decision, before Take (and Record), and sets req.Route to what it
	// returns, so that the store need not compute the key or node again.
	Route(ctx context.Context, req Request) Route
}

// Validate checks what a limiter checks before a store decides: at least
// one valid policy (ErrInvalidPolicy) and 1 <= Cost <= the smallest limit
// (ErrInvalidCost). A store need not call it: a limiter validates its
// policies in New and each cost as it comes.
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
// Request.ValidateRecord does, or with ErrUnavailable. A Record whose
// context ends while it waits returns as Store says of Take, Refund and
// Reset: at once, with an error.
//
// A limiter writes the fallback's admissions back on goroutines of its
// own, where no caller would receive a panic (see Observer): a panic
// there in Record, a Keeper's WriteBack or a Router's Route is recovered,
// logged at ERROR with its value and stack (at most once per 10 s), and
// fails the write as an error would: the admissions stay for a later
// attempt.
type Recorder interface {
	Store
	Record(ctx context.Context, req Request, at time.Time) error
}

// Keeper is a Recorder that keeps the admissions of a limiter's fallback
// itself, in the journal where it keeps its own admissions that are not
// yet safe (redisstore: those no replica acknowledged), and writes each
// into its key's log within the key's next decision, before deciding, in
// the same atomic step: no decision of a key runs while the key's kept
// admissions are not in the store, however many decide it at once. A
// limiter on a Keeper hands it every fallback admission instead of
// journaling it.
type Keeper interface {
	Recorder
	// Keep takes over the admission req, decided elsewhere at at (as
	// Record would write it); an invalid one (Request.ValidateRecord) is
	// ignored. It must not wait on the backing service.
	Keep(req Request, at time.Time)
	// Forget drops the kept admission of req.ID under req's key, if any
	// (a refund of a fallback admission); Reset drops a key's.
	Forget(req Request)
	// WriteBack records every kept admission no server holds yet (as
	// Record), and returns how many it wrote and how many are left. A
	// limiter calls it in the background once the store answers again,
	// so that other processes soon count what its fallback admitted.
	WriteBack(ctx context.Context) (written, left int)
	// Unwritten is how many kept admissions no server holds yet; it is
	// called on every decision and must not block.
	Unwritten() int
}
