// Package memstore keeps sliding-window logs in process memory.
//
// A Store has exactly the semantics of the Redis store (both pass the same
// conformance suite, slidelogtest.RunStoreSuite) but for one process only. It
// is the store to use without Redis and in tests; a limiter on Redis uses
// the same mechanism as its local fallback.
//
//	store := memstore.New()
//	defer store.Close()
//	limiter := slidelog.MustNew(store, slidelog.PerMinute(100))
//
// The number of identities with a log of their own is bounded (WithMaxKeys).
// A new identity at a full store takes the place of a log whose entries
// have all left their windows; a log that still holds entries is never
// dropped, so minting identities never resets anyone's window. When every
// log is live, new identities share one overflow log per limiter until a
// log expires: together they get one identity's budget. An identity that
// then gets a log of its own starts with a copy of the overflow log, while
// that still counts admissions, so it keeps what it was admitted there
// (and over-counts the others' until they leave). Expired logs are
// dropped as new identities arrive, so a Store runs no goroutine.
//
// A limiter on a *Store decides on the store's logs itself, whatever its
// options: the decisions are those of Take, without the request and the
// Result passing through the Store interface. A store that embeds a
// *Store is a store of its own: a limiter calls its Take.
package memstore

import (
	"context"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/internal/memlog"
	"github.com/slidelog/slidelog/core/internal/window"
)

// DefaultMaxKeys is how many identities a Store tracks with a log of their
// own unless WithMaxKeys says otherwise.
const DefaultMaxKeys = 100_000

// Store keeps each identity's log in process memory. It implements
// slidelog.Store, slidelog.Describer (a local store named "memory") and
// slidelog.Recorder, and is safe for concurrent use. Each decision reads
// the time while it holds its key's lock, so that the decisions on a key
// follow each other in time however long they waited for it.
type Store struct {
	mem   memlog.Memory
	table *memlog.Table    // mem.Table
	clock func() time.Time // WithClock's, which mem.Clock reads
}

// Option configures a Store.
type Option func(*config)

type config struct {
	maxKeys int
	clock   func() time.Time
}

// WithMaxKeys bounds how many identities a Store keeps a log of their own
// for (default DefaultMaxKeys; n <= 0 keeps the default). Size it above
// the number of identities active within the longest window, so that
// real clients never share the overflow log.
func WithMaxKeys(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.maxKeys = n
		}
	}
}

// WithClock makes the store take the time from clock instead of the
// process's monotonic clock. It exists for tests that move time by hand
// (slidelogtest.Clock); times are truncated to microseconds. A nil clock
// keeps the default.
func WithClock(clock func() time.Time) Option {
	return func(c *config) { c.clock = clock }
}

// New returns an empty store.
func New(opts ...Option) *Store {
	cfg := config{maxKeys: DefaultMaxKeys}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	s := &Store{table: memlog.NewTable(cfg.maxKeys), clock: cfg.clock}
	s.mem.Table, s.mem.Clock, s.mem.Owner = s.table, memlog.NewStoreClock(cfg.clock), s
	return s
}

// Memory returns the store's logs, for slidelog.New: a limiter on the
// store decides on them itself. Its type is internal to the core module.
func (s *Store) Memory() *memlog.Memory { return &s.mem }

// Source is the Source of a memory store's decisions.
const Source slidelog.Source = "memory"

// Describe implements slidelog.Describer: a local store named "memory",
// on the clock given with WithClock.
func (s *Store) Describe() slidelog.StoreInfo {
	return slidelog.StoreInfo{Name: string(Source), Local: true, Clock: s.clock}
}

// Len returns how many identities have a log of their own now.
func (s *Store) Len() int { return s.table.Len() }

// now returns the store's time in microseconds: monotonic unless a test
// clock was given.
func (s *Store) now() int64 { return s.Now() }

// Now implements memlog.Clock: the store's time in microseconds.
func (s *Store) Now() int64 { return s.mem.Clock.Now() }

func (s *Store) usable(ctx context.Context) error {
	if s.mem.Closed.Load() {
		return slidelog.ErrClosed
	}
	return ctx.Err()
}

// maxStack is how many policies a decision converts in arrays on the
// stack; a request with more allocates.
const maxStack = 4

// request converts req for the table.
func request(req *slidelog.Request) memlog.Request {
	return memlog.Request{Namespace: req.Namespace, Key: req.Key, ID: req.ID, Cost: int64(req.Cost)}
}

// policies appends req's policies, in microseconds, to ps: a slice of the
// caller's stack array when they fit.
func policies(req slidelog.Request, ps []window.Policy) []window.Policy {
	for _, p := range req.Policies {
		ps = append(ps, window.Policy{Limit: int64(p.Limit), Window: p.Window.Microseconds(), Precision: p.Precision.Microseconds()})
	}
	return ps
}

// Take implements slidelog.Store. Within one process a call is never sent
// twice, so Take does not look for an earlier call with the same ID. A
// decision on a key the store tracks, with one policy, allocates nothing.
// A limiter validates its requests before; called directly, Take fails
// as slidelog.Request.Validate does (checked at the price of a few
// comparisons for one exact policy).
func (s *Store) Take(ctx context.Context, req slidelog.Request) (res slidelog.Result, err error) {
	if err := s.usable(ctx); err != nil {
		return res, err
	}
	if len(req.Policies) != 1 || !validExact(&req.Policies[0], req.Cost) {
		if err := req.Validate(); err != nil {
			return res, err
		}
	}
	if len(req.Policies) == 1 {
		// Arrays of one: clearing arrays for several shows on a decision.
		p := &req.Policies[0]
		var st [1]window.State
		ps := [1]window.Policy{{Limit: int64(p.Limit), Window: p.Window.Microseconds(), Precision: p.Precision.Microseconds()}}
		r := request(&req)
		d, now := s.table.Take(s, &r, ps[:], st[:])
		slidelog.WindowResult(&res, req.Policies, d, now, st[:], Source)
		return res, nil
	}
	var pbuf [maxStack]window.Policy
	var sbuf [maxStack]window.State
	states := sbuf[:]
	if n := len(req.Policies); n > maxStack {
		states = make([]window.State, n)
	}
	r := request(&req)
	d, now := s.table.Take(s, &r, policies(req, pbuf[:0]), states)
	slidelog.WindowResult(&res, req.Policies, d, now, states, Source)
	return res, nil
}

// validExact reports, cheaper than Request.Validate, that a request of
// cost on the one exact policy p is valid; false leaves the check (and
// the error) to Validate.
func validExact(p *slidelog.Policy, cost int) bool {
	return p.Precision == 0 && p.Limit <= slidelog.MaxLimit && cost >= 1 && cost <= p.Limit &&
		p.Window >= minWindow && p.Window <= maxWindow
}

// The window bounds of slidelog.Policy.Validate; TestValidExactAgreesWithValidate
// holds validExact to it.
const (
	minWindow = time.Millisecond
	maxWindow = 100 * 365 * 24 * time.Hour
)

// Record implements slidelog.Recorder.
func (s *Store) Record(ctx context.Context, req slidelog.Request, at time.Time) error {
	if err := s.usable(ctx); err != nil {
		return err
	}
	if err := req.ValidateRecord(at); err != nil {
		return err
	}
	var pbuf [maxStack]window.Policy
	s.table.Record(s, at.UnixMicro(), request(&req), policies(req, pbuf[:0]))
	return nil
}

// Refund implements slidelog.Store: it removes the request's entry, with
// the cost recorded in it (whatever req.Cost says).
func (s *Store) Refund(ctx context.Context, req slidelog.Request) error {
	if err := s.usable(ctx); err != nil {
		return err
	}
	s.table.Refund(request(&req))
	return nil
}

// Reset implements slidelog.Store.
func (s *Store) Reset(ctx context.Context, req slidelog.Request) error {
	if err := s.usable(ctx); err != nil {
		return err
	}
	s.table.Reset(request(&req))
	return nil
}

// Close forgets every log; later calls fail with slidelog.ErrClosed. It is
// idempotent.
func (s *Store) Close() error {
	if !s.mem.Closed.Swap(true) {
		s.table.Purge()
	}
	return nil
}
