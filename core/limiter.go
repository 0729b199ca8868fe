package slidelog

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/slidelog/slidelog/core/internal/memlog"
	"github.com/slidelog/slidelog/core/internal/ratelog"
	"github.com/slidelog/slidelog/core/internal/window"
	"github.com/slidelog/slidelog/core/internal/writeback"
)

// Limiter enforces one or more sliding-window policies per key on a Store.
// It is safe for concurrent use; create it with New and release it with
// Close.
//
// A decision waits for the store as long as the store's node answers,
// however busy the process (redisstore.WithStallTimeout). A limiter
// never lets a store failure reach its caller as an error, a wait on a
// stalled node or an unaccounted admission: a request the store cannot
// decide (an error, a refused connection, a node that answers nothing for
// the stall timeout) goes to the failure mode (the local fallback by
// default), is counted in the metrics, and says so in its Result's
// Source; the fallback's admissions are written into the store's log once
// it answers again. A circuit breaker per store node (per master on a Redis
// Cluster) sends requests straight to the failure mode while that node is
// failing. A local deny cache answers repeated requests of a key the store
// just denied without a store call.
//
// A limiter's logs are keyed by its name (WithName; Request.Namespace):
// limiters with different names on one store never count each other's
// requests, a key's log outlives a change of the limiter's policies (a
// log of timestamps is valid under any limit, and it is kept for the
// longest window any of them uses), and instances of a service share one
// budget per key by giving their limiters the same name on a shared
// Redis. Within one process, New refuses a second open limiter with the
// same name on the same store (ErrNameTaken).
type Limiter struct {
	store        Store
	policies     []Policy
	minLimit     int
	policyFunc   func(context.Context, string) ([]Policy, error) // WithPolicyFunc
	maxKeyLength int
	closed       atomic.Bool

	name        string
	mode        FailureMode
	openTimeout time.Duration
	fallback    *fallback
	breakers    *breakers
	causes      *causeLog     // why store calls fail, for the log (causelog.go)
	errLog      ratelog.Every // errors of reason "other", and when they were last logged (causelog.go)
	deny        *denyCache
	metrics     *observers
	// stopEvents stops the store telling the observers of its events
	// (Notifier); nil when it does not.
	stopEvents func()
	router     Router // the store, when it is spread over nodes
	logger     *slog.Logger
	source     Source // the store's name (StoreInfo.Name)
	local      bool   // StoreInfo.Local: the store cannot fail or be slow
	// memory is the store's logs when the store keeps them in this
	// process's memory (package memstore): the limiter decides on them
	// itself (memory.go). windows are its policies in microseconds.
	memory    *memlog.Memory
	windows   []window.Policy
	namespace string
	release   func() // releases the limiter's name on its store

	// panicLog is when the panics recovered at each site were last
	// logged, and how many since (panics.go).
	panicLog [numPanicSites]ratelog.Every

	// Write-back of fallback admissions: to a Keeper, which keeps them
	// itself, or through the limiter's journal to a Recorder; neither
	// when the store cannot record or there is no fallback.
	recorder    Recorder
	keeper      Keeper
	journal     *journal
	flushMu     sync.Mutex
	flushing    bool
	flushCtx    context.Context
	flushCancel context.CancelFunc
	flushWG     sync.WaitGroup
}

// New returns a limiter that enforces policy, and any policies added with
// WithPolicy, on store. It fails with ErrNilStore, ErrInvalidPolicy,
// ErrInvalidOption, or ErrNameTaken (an open limiter of this process has
// the same name on store).
func New(store Store, policy Policy, opts ...Option) (_ *Limiter, err error) {
	if isNilStore(store) {
		return nil, ErrNilStore
	}
	cfg := limiterConfig{policies: []Policy{policy}, maxKeyLength: defaultMaxKeyLength}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.applyLimiter(&cfg); err != nil {
			return nil, err
		}
	}
	names := make(map[string]bool, len(cfg.policies))
	minLimit := cfg.policies[0].Limit
	for _, p := range cfg.policies {
		if err := p.Validate(); err != nil {
			return nil, err
		}
		if names[p.String()] {
			return nil, fmt.Errorf("%w: two policies named %q", ErrInvalidPolicy, p.String())
		}
		names[p.String()] = true
		minLimit = min(minLimit, p.Limit)
	}
	named := cfg.name != ""
	cfg.resolveResilience()
	release, err := claimName(store, cfg.name)
	if err != nil {
		return nil, err
	}
	claimed := true
	defer func() {
		if claimed {
			// New failed, or code it was given panicked (a store's
			// Describe, an observer's Bind).
			release()
		}
	}()
	l := &Limiter{
		store: store, policies: cfg.policies, minLimit: minLimit, policyFunc: cfg.policyFunc, maxKeyLength: cfg.maxKeyLength,
		name: cfg.name, mode: cfg.failureMode, openTimeout: cfg.breaker.OpenTimeout,
		logger: cfg.logger, release: release,
	}
	if l.logger == nil {
		l.logger = slog.Default()
	}
	var info StoreInfo
	if d, ok := store.(Describer); ok {
		info = d.Describe()
	}
	l.source, l.local = Source(cmp.Or(info.Name, defaultStoreName)), info.Local
	if !l.source.FromStore() {
		return nil, fmt.Errorf("%w: store name %q is one of the limiter's own sources", ErrInvalidOption, info.Name)
	}
	l.router, _ = store.(Router)
	l.namespace = l.name
	if !named {
		l.namespace = defaultNamespace(l.name, l.local)
	}
	if l.mode == FailFallback && !l.local {
		l.fallback = newFallback(cfg.fallbackPolicyList(), cfg.fallbackMaxKeys)
		if cfg.policyFunc != nil && cfg.fallbackPolicies == nil {
			l.fallback.divideBy = cfg.fallbackInstances
		}
		if k, ok := store.(Keeper); ok {
			l.recorder, l.keeper = k, k
			l.flushCtx, l.flushCancel = context.WithCancel(context.Background())
		} else if rec, ok := store.(Recorder); ok {
			l.recorder, l.journal = rec, newJournal(l.logger, l.name)
			l.flushCtx, l.flushCancel = context.WithCancel(context.Background())
		}
	}
	if cfg.denyCacheSize > 0 && (!l.local || cfg.denyCacheSet) {
		l.deny = newDenyCache(cfg.denyCacheSize, info.Clock)
	}
	if l.metrics, err = bindObservers(cfg.observers, l.name, l.sizes); err != nil {
		return nil, fmt.Errorf("%w: metrics: %w", ErrInvalidOption, err)
	}
	if l.memory = memoryOf(store); l.memory != nil {
		l.windows = windowsOf(l.policies)
	}
	if !l.local {
		l.causes = newCauseLog()
		l.breakers = newBreakers(cfg.breaker, l.breakerChanged, func(p any) { l.logPanic(panicTimer, p) })
	}
	l.stopEvents = l.notify(store)
	claimed = false // the limiter's until Close
	return l, nil
}

// notify has a Notifier store tell the limiter's observers that are a
// StoreEventObserver of its events, and returns the function that stops
// it (nil when there is nothing to tell).
func (l *Limiter) notify(store Store) (stop func()) {
	n, ok := store.(Notifier)
	if !ok || l.metrics == nil {
		return nil
	}
	var obs []StoreEventObserver
	for _, lo := range l.metrics.list {
		if o, ok := lo.(StoreEventObserver); ok {
			obs = append(obs, o)
		}
	}
	if len(obs) == 0 {
		return nil
	}
	done := false
	defer func() {
		if !done {
			// Notify panicked: New's panic goes on with the limiter
			// undone, as after a panic of Bind.
			l.breakers.close()
			l.metrics.unbind()
		}
	}()
	stop = n.Notify(func(node string, event StoreEvent) {
		for _, o := range obs {
			l.tellStoreEvent(o, nodeLabel(node), event)
		}
	})
	done = true
	return stop
}

// tellStoreEvent tells o of a store's event, recovering and logging a
// panic of its StoreEvent (see StoreEventObserver).
func (l *Limiter) tellStoreEvent(o StoreEventObserver, node string, event StoreEvent) {
	defer l.recovered(panicObserver)
	o.StoreEvent(node, event)
}

// MustNew is New for policies and options known to be valid, such as
// constants: it panics where New would fail. Use it in a program's set-up,
// like regexp.MustCompile.
func MustNew(store Store, policy Policy, opts ...Option) *Limiter {
	l, err := New(store, policy, opts...)
	if err != nil {
		panic(err)
	}
	return l
}

// Policies returns a copy of the limiter's policies, the first one first:
// with WithPolicyFunc, those of the keys for which the function returns
// none.
func (l *Limiter) Policies() []Policy { return append([]Policy(nil), l.policies...) }

// Name returns the limiter's name (WithName, or the default: its
// policies' names joined with "+"), as metric labels and log records
// give it. Its logs in the store are keyed by the name
// (Request.Namespace); without WithName, on a store that is not Local
// (such as Redis), by the program's path (the import path of its main
// package, such as "example.com/shop/cmd/api"), ":" and the name, so that
// two programs sharing a Redis never share a budget by accident, while
// the instances of one program do.
func (l *Limiter) Name() string { return l.name }

// Logger returns the logger the limiter logs to (WithLogger, or
// slog.Default()). The HTTP middleware (package httplimit) logs there
// what it could not decide because of the server's own setup.
func (l *Limiter) Logger() *slog.Logger { return l.logger }

// Allow is AllowN(ctx, key, 1).
func (l *Limiter) Allow(ctx context.Context, key string) (res Result, err error) {
	err = l.decide(ctx, &res, key, 1)
	return res, err
}

// AllowN decides whether a request of cost n by key may proceed now, and
// records it when it may. The request is admitted only if every policy has
// n free units; it is then recorded in all of them, otherwise in none.
//
// A denial is a Result with Allowed == false. When the store cannot decide
// (it fails, or its node stalls), the failure mode decides, and Source says
// which part decided. An error means no decision was made: ErrInvalidKey
// for an empty or oversized key, ErrInvalidCost for n < 1 or n above the
// smallest limit, ErrClosed after Close, the context's error when the
// caller's context is done, and, with FailError only, ErrUnavailable when
// the store failed.
func (l *Limiter) AllowN(ctx context.Context, key string, n int) (res Result, err error) {
	err = l.decide(ctx, &res, key, n)
	return res, err
}

// decide is AllowN, writing the Result to res (left zero on an error):
// Allow and AllowN share it so that neither copies a Result. After the
// checks and the deny cache, a decision takes one of two paths: on a
// memory store, the limiter decides on the store's logs itself
// (allowMemory, memory.go); on any other store, it calls the store's
// Take, through the breaker of the key's node, and the failure mode
// decides what the store cannot (allowStore).
func (l *Limiter) decide(ctx context.Context, res *Result, key string, n int) error {
	// check's tests written out, so that a valid call makes no call for
	// them but the context's.
	if l.closed.Load() || key == "" || len(key) > l.maxKeyLength {
		err := l.check(ctx, key)
		l.noDecision(err)
		return err
	}
	if err := ctx.Err(); err != nil {
		l.noDecision(err)
		return err
	}
	policies, minLimit := l.policies, l.minLimit
	if l.policyFunc != nil {
		var err error
		if policies, minLimit, err = l.policiesFor(ctx, key); err != nil {
			l.noDecision(err)
			return err
		}
	}
	if n < 1 || n > minLimit {
		err := costErrorFor(n, minLimit)
		l.noDecision(err)
		return err
	}
	if l.deny != nil {
		if r, ok := l.deny.get(key, n); ok && (l.policyFunc == nil || samePolicies(&r, policies)) {
			l.metrics.decision(r)
			*res = r
			return nil
		}
	}
	if l.memory != nil {
		return l.allowMemory(ctx, res, key, n, policies)
	}
	r, err := l.allowStore(ctx, key, n, policies)
	if err == nil {
		*res = r
	}
	return err
}

// allowStore decides a request on the store through its Take, after
// AllowN's checks: through the breaker of the key's node, writing back
// the fallback's admissions of the key first, and by the failure mode
// when the store cannot decide.
func (l *Limiter) allowStore(ctx context.Context, key string, n int, policies []Policy) (res Result, err error) {
	req := Request{Namespace: l.namespace, Key: key, Cost: n, Policies: policies, ID: rand.Uint64()}
	sent := time.Now()
	l.route(ctx, &req)
	node := req.Route.Node
	var done func(error)
	if l.breakers != nil {
		d, err := l.breakers.get(node).Allow()
		if err != nil {
			return l.failover(ctx, req, reasonBreakerOpen, err)
		}
		done = d
	}
	if l.journal.Len() > 0 {
		// A write-back that fails means the node fails: the decision goes
		// to the failure mode at once, not after a second wait.
		err = l.writeBackKey(ctx, req)
	}
	if err == nil {
		res, err = l.take(ctx, req, done)
	}
	took := time.Since(sent)
	if err == nil {
		if done != nil {
			done(nil)
		}
		if l.journal.Len() > 0 || (l.keeper != nil && l.keeper.Unwritten() > 0) {
			l.startFlush()
		}
		l.metrics.commandDone("ok", took)
		res.Source = l.source
		if res.Allowed {
			res.ticket = ticketOf(l, &req)
			if l.deny != nil {
				l.deny.remove(key) // a denial cached before it no longer holds
			}
		} else if l.deny != nil {
			l.deny.put(key, n, sent, res)
		}
		l.metrics.decision(res)
		return res, nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		// The caller gave up: no decision, and no fault of the store.
		if done != nil {
			done(errCallerGone)
		}
		l.metrics.commandDone("canceled", took)
		l.metrics.error("canceled")
		return Result{}, ctxErr
	}
	if l.closed.Load() {
		// Closed while the decision waited: no decision, and no fault
		// of the store.
		if done != nil {
			done(errCallerGone)
		}
		l.metrics.commandDone("canceled", took)
		l.metrics.error("closed")
		return Result{}, ErrClosed
	}
	l.causes.note(node, err) // before done: the breaker may open on it
	if done != nil {
		if keyFault(err) {
			// One key's data or slot, not the node: the breaker does
			// not count it.
			done(errCallerGone)
		} else {
			done(err)
		}
	}
	reason := reasonError
	if errors.Is(err, ErrStalled) {
		reason = reasonStalled
	}
	l.metrics.commandDone(reason, took)
	return l.failover(ctx, req, reason, err)
}

// keyFault reports whether err concerns the request's key, not its node:
// the key's data is damaged (ErrDamagedKey) or no node serves the key
// (ErrUnservedKey). A breaker does not count such errors.
func keyFault(err error) bool {
	return errors.Is(err, ErrDamagedKey) || errors.Is(err, ErrUnservedKey)
}

// route sets req.Route, asking the store once per decision where req
// runs (Router). A Router answers from what it knows (a Cluster's slot
// map), so the call takes no context of its own.
func (l *Limiter) route(ctx context.Context, req *Request) {
	if l.router != nil {
		req.Route = l.router.Route(ctx, *req)
	}
}

// take asks the store to decide req, under done, the permission of the
// breaker of req's node (nil without a breaker). How long it waits is
// the store's to bound (redisstore ends a call on a node that stalls),
// and the caller's context's. A Take that panics gives the permission
// back before the panic goes on (giveBackOnPanic).
func (l *Limiter) take(ctx context.Context, req Request, done func(error)) (res Result, err error) {
	returned := false
	defer giveBackOnPanic(done, &returned)
	res, err = l.store.Take(ctx, req)
	returned = true
	return res, err
}

// giveBackOnPanic, deferred by a store call made under done, a breaker's
// permission (nil without a breaker), reports the call to done as no
// verdict on the node when it panicked (returned is still false). The
// panic goes on to the caller, on whose goroutine the call runs; a
// half-open breaker does not lose the probe the call took (gobreaker
// counts its probes out and in, and would refuse every request of the
// node from then on).
func giveBackOnPanic(done func(error), returned *bool) {
	if !*returned && done != nil {
		done(errCallerGone)
	}
}

// callStore is f(ctx, req), made under done as take makes a Take.
func callStore(ctx context.Context, req Request, f func(context.Context, Request) error, done func(error)) (err error) {
	returned := false
	defer giveBackOnPanic(done, &returned)
	err = f(ctx, req)
	returned = true
	return err
}

// writeBackKey writes the fallback admissions of req's key into the store
// before the store decides the key again, so that its windows count them.
// They stay in the journal until written: every decision of the key that
// starts meanwhile writes them too (Record is idempotent by ID), so none
// decides before they are in the store. Those that cannot be written now
// stay for a later attempt.
func (l *Limiter) writeBackKey(ctx context.Context, req Request) error {
	jk := journalKey(req.Namespace, req.Key)
	es := l.journal.Pending(jk, time.Now(), nil)
	if len(es) == 0 {
		return nil
	}
	written, err := l.recordAll(ctx, es, func(journalEntry) Route { return req.Route })
	l.journal.Settle(jk, written, writeback.Unknown, true, time.Now())
	return err
}

// errWriteBackStopped marks the journaled admissions not tried because
// an earlier write of the same round failed.
var errWriteBackStopped = fmt.Errorf("%w: an earlier write-back failed", ErrUnavailable)

// writeBackConcurrency is how many journaled admissions a limiter writes
// back at once: concurrent calls leave in one pipeline per node.
const writeBackConcurrency = 64

// recordAll writes es into the store, up to writeBackConcurrency at once,
// each at the node at gives it, and returns those it wrote, with the
// first error.
func (l *Limiter) recordAll(ctx context.Context, es []journalEntry, at func(journalEntry) Route) ([]journalEntry, error) {
	errs := make([]error, len(es))
	sem := make(chan struct{}, writeBackConcurrency)
	var wg sync.WaitGroup
	var failing atomic.Bool
	for i, e := range es {
		sem <- struct{}{}
		if failing.Load() {
			// A node that failed one write fails the rest: they wait
			// for the next attempt instead of one stall timeout per
			// round of writeBackConcurrency.
			<-sem
			errs[i] = errWriteBackStopped
			continue
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if errs[i] = l.record(ctx, e, at); errs[i] != nil {
				failing.Store(true)
			}
		})
	}
	wg.Wait()
	var written []journalEntry
	var first error
	for i, err := range errs {
		if err != nil {
			first = cmp.Or(first, err)
		} else {
			written = append(written, es[i])
		}
	}
	return written, first
}

// startFlush writes every journaled fallback admission back into the
// store, in a goroutine of its own (one at a time, stopped by Close): the
// store answers again, and other instances should see what this one
// admitted while it could not. Entries of a node that still fails (each
// such call ends within the stall timeout) stay for the next attempt.
func (l *Limiter) startFlush() {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	if l.flushing || l.flushCtx.Err() != nil {
		return
	}
	l.flushing = true
	l.flushWG.Add(1)
	go func() {
		defer l.flushWG.Done()
		defer func() {
			l.flushMu.Lock()
			l.flushing = false
			l.flushMu.Unlock()
		}()
		// A panic of the store's (a Keeper's WriteBack) is recovered
		// and logged: the admissions it did not write stay for the
		// next attempt.
		defer l.recovered(panicWriteBack)
		var written, left int
		if l.keeper != nil {
			written, left = l.keeper.WriteBack(l.flushCtx)
		} else {
			// One round over every key, so that a node that fails one
			// write fails the rest at once (recordAll).
			var es []journalEntry
			for _, jk := range l.journal.Keys() {
				es = l.journal.Pending(jk, time.Now(), es)
			}
			w, _ := l.recordAll(l.flushCtx, es, func(e journalEntry) Route {
				req := e.Req
				l.route(l.flushCtx, &req)
				return req.Route
			})
			for _, e := range w {
				l.journal.Settle(journalKey(e.Req.Namespace, e.Req.Key), []journalEntry{e}, writeback.Unknown, true, time.Now())
			}
			written, left = len(w), len(es)-len(w)
		}
		if written > 0 {
			l.logger.Info("slidelog: wrote fallback admissions back into the store", "limiter", l.name, "written", written, "left", left)
		}
	}()
}

// record writes one journaled admission into the store, at the node at
// gives it. It runs on a goroutine of recordAll's, where no caller would
// receive a panic: a panic of the store's (its Route, its Record) is
// recovered, logged, and fails the write with an error wrapping
// ErrUnavailable.
func (l *Limiter) record(ctx context.Context, e journalEntry, at func(journalEntry) Route) (err error) {
	defer func() {
		if p := recover(); p != nil {
			l.logPanic(panicWriteBack, p)
			err = fmt.Errorf("%w: the store panicked writing an admission back: %v", ErrUnavailable, p)
		}
	}()
	req := e.Req
	req.Route = at(e)
	return l.recorder.Record(ctx, req, e.At)
}

// failover decides req by the failure mode, because the store could not.
// Under FailFallback a Local store (StoreInfo.Local; a memory store among
// them) has no fallback: nothing fails over, and the call fails with
// cause, counted as an error (reason "closed" for a closed store), not as
// a failover.
func (l *Limiter) failover(ctx context.Context, req Request, reason string, cause error) (Result, error) {
	if l.mode == FailFallback && l.fallback == nil {
		// A Local store fails only when closed, misconfigured or out of
		// time, and says so.
		l.noDecision(cause)
		return Result{}, cause
	}
	l.metrics.failover(reason, l.mode)
	l.logFailover(req.Route.Node, reason, cause)
	var res Result
	switch l.mode {
	case FailOpen:
		res = l.unchecked(req, true)
	case FailClosed:
		res = l.unchecked(req, false)
	case FailError:
		l.metrics.error("unavailable")
		if !errors.Is(cause, ErrUnavailable) {
			cause = fmt.Errorf("%w: %w", ErrUnavailable, cause)
		}
		return Result{}, cause
	default:
		r, taken, err := l.fallback.take(ctx, req)
		if err != nil {
			l.noDecision(err)
			return Result{}, err
		}
		if r.Allowed {
			r.ticket = ticketOf(l, &taken)
			switch {
			case l.keeper != nil:
				l.keeper.Keep(req, r.DecidedAt)
			case l.journal != nil:
				l.journal.Add(journalKey(req.Namespace, req.Key), newJournalEntry(req, r.DecidedAt))
			}
		}
		res = r
	}
	l.metrics.decision(res)
	return res, nil
}

// unchecked is the result of FailOpen (allowed) or FailClosed (denied):
// nothing was checked or recorded, so every policy reports no room left;
// a denial asks the client to come back when the breaker probes again.
func (l *Limiter) unchecked(req Request, allowed bool) Result {
	var buf [maxStackPolicies]PolicyResult
	states := buf[:0]
	for _, p := range req.Policies {
		st := PolicyResult{Policy: p, Allowed: allowed}
		if !allowed {
			st.RetryAfter = min(l.openTimeout, p.Window)
		}
		states = append(states, st)
	}
	src := SourceFailOpen
	if !allowed {
		src = SourceFailClosed
	}
	res := NewResult(states, src)
	res.DecidedAt = time.Now().Truncate(time.Microsecond)
	return res
}

// Refund removes what the admitted result res recorded, so that the
// request no longer counts against its key. Adapters use it to give back a
// request the server failed (a 5xx). A fallback admission is refunded to
// the fallback. It fails with ErrNotRefundable when res recorded nothing
// or was not admitted by l (a Result of another limiter), and never
// touches another limiter's store. It waits for the store as the package
// documentation's "Waiting" says: as long as ctx allows, through the
// breaker of the key's node (an open one fails it at once with
// ErrUnavailable).
func (l *Limiter) Refund(ctx context.Context, res Result) error {
	t := res.ticket
	if t.from != l || !res.Allowed {
		return ErrNotRefundable
	}
	if err := l.check(ctx, t.key); err != nil {
		return err
	}
	req := Request{Namespace: l.namespace, Key: t.key, Cost: t.cost, Policies: l.policies, ID: t.id}
	if l.policyFunc != nil {
		req.Policies = policiesOf(&res) // the policies it was recorded under
	}
	if res.Source == SourceFallback {
		if l.fallback == nil {
			return ErrNotRefundable
		}
		req.Policies = l.fallback.policies
		if l.keeper != nil {
			l.keeper.Forget(req)
		}
		l.journal.Forget(journalKey(req.Namespace, req.Key), req.ID)
		return l.fallback.refund(ctx, req)
	}
	if !res.Source.FromStore() {
		return ErrNotRefundable
	}
	if l.deny != nil {
		l.deny.remove(t.key)
	}
	return l.call(ctx, &req, func(ctx context.Context, req Request) error {
		return l.store.Refund(ctx, req)
	})
}

// call makes a store call other than a decision (Refund's, Reset's,
// Peek's) under the rule a decision follows (the package
// documentation's "Waiting"): no deadline of the limiter's own, so it
// waits as long as ctx allows and the store answers; through the breaker
// of req's node, so that an open breaker fails it at once with the error a
// decision gets under FailError, and its outcome counts as a decision's
// does. No failure mode applies: a refund, a reset or a read of usage is
// never invented. When ctx ends first, it fails with ctx's error, as a
// decision does. It sets req.Route.
func (l *Limiter) call(ctx context.Context, req *Request, f func(context.Context, Request) error) error {
	if l.breakers == nil {
		if err := f(ctx, *req); err != nil {
			return cmp.Or(ctx.Err(), err)
		}
		return nil
	}
	l.route(ctx, req)
	node := req.Route.Node
	done, err := l.breakers.get(node).Allow()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	err = callStore(ctx, *req, f, done)
	switch {
	case err == nil:
		done(nil)
	case ctx.Err() != nil:
		// The caller gave up: no fault of the node.
		done(errCallerGone)
		return ctx.Err()
	case l.closed.Load() || keyFault(err):
		// The limiter closed, or the fault is one key's data or slot:
		// no fault of the node.
		done(errCallerGone)
	default:
		l.causes.note(node, err) // before done: the breaker may open on it
		done(err)
	}
	return err
}

// Reset removes every entry of key, in the store, the deny cache and the
// fallback, so that its next request sees empty windows. It waits for the
// store as the package documentation's "Waiting" says: as long as ctx
// allows, through the breaker of the key's node (an open one fails the
// store's part at once with ErrUnavailable; the deny cache and the
// fallback are reset all the same).
func (l *Limiter) Reset(ctx context.Context, key string) error {
	if err := l.check(ctx, key); err != nil {
		return err
	}
	if l.deny != nil {
		l.deny.remove(key)
	}
	req := Request{Namespace: l.namespace, Key: key}
	if l.fallback != nil {
		_ = l.fallback.reset(ctx, req)
	}
	l.journal.ForgetKey(journalKey(req.Namespace, req.Key))
	return l.call(ctx, &req, func(ctx context.Context, req Request) error {
		return l.store.Reset(ctx, req)
	})
}

// Close stops the limiter's fallback and releases its name on the store.
// It does not close the store, which whoever created it closes (other
// limiters may share it). Calls after Close fail with ErrClosed, and so
// do decisions still waiting on the store when it is called, once their
// wait ends: a Redis store ends a wait on a node that answers nothing
// within its stall timeout. Close is idempotent.
func (l *Limiter) Close() error {
	if l.closed.Swap(true) {
		return nil
	}
	if l.flushCtx != nil {
		l.flushMu.Lock()
		l.flushCancel()
		l.flushMu.Unlock()
		l.flushWG.Wait()
	}
	if l.fallback != nil {
		_ = l.fallback.close()
	}
	l.breakers.close()
	if l.stopEvents != nil {
		l.stopEvents()
	}
	// The name is released after the observers are unbound, so that a
	// new limiter of the name binds them only once this one let go,
	// and also when an Unbind panics.
	defer l.release()
	l.metrics.unbind()
	return nil
}

// ValidateKey reports whether key is an identity the limiter accepts,
// with an error wrapping ErrInvalidKey when it is not. HTTP adapters call
// it to answer a bad identity with a 4xx before any store call.
func (l *Limiter) ValidateKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty", ErrInvalidKey)
	}
	if len(key) > l.maxKeyLength {
		return fmt.Errorf("%w: %d bytes, want at most %d", ErrInvalidKey, len(key), l.maxKeyLength)
	}
	return nil
}

func (l *Limiter) check(ctx context.Context, key string) error {
	if l.closed.Load() {
		return ErrClosed
	}
	if err := l.ValidateKey(key); err != nil {
		return err
	}
	return ctx.Err()
}

// sizes reports the deny cache's and the fallback's key counts.
func (l *Limiter) sizes() Gauges {
	var g Gauges
	if l.deny != nil {
		g.DenyCacheEntries = l.deny.len()
	}
	if l.fallback != nil {
		g.FallbackKeys = l.fallback.len()
	}
	return g
}

// breakerChanged reports and logs a breaker's change of state. It runs
// wherever the breaker changes: on the goroutine of the call that finds
// it changed, or on its open timer's (breakers.halfOpen).
func (l *Limiter) breakerChanged(node string, from, to gobreaker.State) {
	if l.metrics != nil {
		label, st := nodeLabel(node), breakerState(to)
		for _, lo := range l.metrics.list {
			l.tellBreakerState(lo, label, st)
		}
	}
	level := slog.LevelInfo
	args := []any{"limiter", l.name, "node", nodeLabel(node), "from", from.String(), "to", to.String()}
	if to == gobreaker.StateOpen {
		level = slog.LevelWarn
		args = append(args, l.breakerCause(node)...)
	}
	l.logger.Log(context.Background(), level, "slidelog: circuit breaker", args...)
}

// tellBreakerState tells lo of a breaker's change of state. A panic in
// lo's BreakerState is recovered and logged (see Observer): the other
// observers are told, and the change is logged, all the same.
func (l *Limiter) tellBreakerState(lo LimiterObserver, node string, st BreakerState) {
	defer l.recovered(panicObserver)
	lo.BreakerState(node, st)
}

// errorReason names an error returned instead of a decision, for metrics.
func errorReason(err error) string {
	switch {
	case errors.Is(err, ErrClosed):
		return "closed"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "canceled"
	case errors.Is(err, ErrInvalidKey):
		return "invalid_key"
	default:
		return "other"
	}
}
