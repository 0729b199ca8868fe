package httplimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/internal/ratelog"
)

// Engine is the framework-neutral rate-limiting middleware the adapters
// share: it finds a request's identity, rejects bad identities before any
// store call, asks the limiter, and says which headers to send and
// whether to call the handler. Applications use an adapter's Middleware,
// which holds one; an Engine is for writing an adapter. It is safe for
// concurrent use.
//
// A limiter's logs are keyed by its name (slidelog.WithName), not its
// policies: limiters with different names on one store, such as
// per-route limits, never share a log, and a second open limiter with the
// name of another on the same store fails slidelog.New with
// slidelog.ErrNameTaken. For separate budgets on two routes, give each
// route's limiter its own name, or key one limiter by route (ByRoute).
type Engine struct {
	limiter *slidelog.Limiter
	cfg     config
	// texts renders the RateLimit-Policy value once per set of policies.
	texts policyTexts
	// logs says when each kind of problem was last logged (logProblem,
	// logPanic).
	logs [numProblems]ratelog.Every
}

// New returns an Engine that asks l, or the limiter chosen by
// WithLimiterFunc. l may be nil only with WithLimiterFunc. It fails with
// slidelog.ErrInvalidOption, among others for a policy of l whose name the
// RateLimit headers cannot carry (see HeadersIETF).
func New(l *slidelog.Limiter, opts ...Option) (*Engine, error) {
	cfg := config{keyFunc: ByClientIP(), cost: 1, ip: ipConfig{ipv6Prefix: DefaultIPv6Prefix}}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}
	if err := cfg.applyOldIP(); err != nil {
		return nil, err
	}
	if l == nil && cfg.limiterFunc == nil {
		return nil, fmt.Errorf("%w: nil limiter and no limiter func", slidelog.ErrInvalidOption)
	}
	if cfg.costSet && cfg.costFunc != nil {
		return nil, fmt.Errorf("%w: WithCost and a cost function both set the cost: use one", slidelog.ErrInvalidOption)
	}
	if cfg.headers == HeadersIETF && l != nil {
		for _, p := range l.Policies() {
			if !sfPrintable(p.Name) {
				return nil, fmt.Errorf("%w: policy %q: the RateLimit headers (HeadersIETF) carry printable ASCII names only, and would show this one with '_' for other bytes: rename it, or use HeadersLegacy or HeadersNone", slidelog.ErrInvalidOption, p.Name)
			}
		}
	}
	if cfg.ip.netBits >= 0 {
		netBits, maxPer := DefaultIPv6Network, DefaultIPv6PrefixesPerNetwork
		if cfg.ip.netBits > 0 {
			netBits = cfg.ip.netBits
		}
		if cfg.ip.netMax > 0 {
			maxPer = cfg.ip.netMax
		}
		idle := time.Duration(0)
		if l != nil {
			for _, p := range l.Policies() {
				idle = max(idle, p.Window)
			}
		}
		cfg.ip.networks = newAggregator(cfg.ip.ipv6Prefix, netBits, maxPer, idle)
	}
	return &Engine{limiter: l, cfg: cfg}, nil
}

// Handlers returns the functions set with WithDeniedHandler and
// WithErrorHandler as the adapter's types D and E; a zero value for one
// that was not set (or set to nil), for which the adapter uses its
// default. It fails with slidelog.ErrInvalidOption when one has another
// type: an option of another adapter.
func Handlers[D, E any](e *Engine) (denied D, onError E, err error) {
	if e == nil {
		return denied, onError, nil
	}
	if e.cfg.denied != nil {
		var ok bool
		if denied, ok = e.cfg.denied.(D); !ok {
			return denied, onError, fmt.Errorf("%w: denied handler of type %T, want %T: an option of another adapter", slidelog.ErrInvalidOption, e.cfg.denied, denied)
		}
	}
	if e.cfg.onError != nil {
		var ok bool
		if onError, ok = e.cfg.onError.(E); !ok {
			return denied, onError, fmt.Errorf("%w: error handler of type %T, want %T: an option of another adapter", slidelog.ErrInvalidOption, e.cfg.onError, onError)
		}
	}
	return denied, onError, nil
}

// RefundsOnServerError reports whether WithRefundOnServerError is set, for
// an adapter that cannot tell the handler's status and so refuses it.
func (e *Engine) RefundsOnServerError() bool { return e != nil && e.cfg.refund }

// Outcome is what an adapter does with a request after Check.
type Outcome uint8

// Outcomes.
const (
	// OutcomeNext: call the handler (skipped, admitted, or let through by
	// shadow mode), then Decision.Finish.
	OutcomeNext Outcome = iota
	// OutcomeDenied: answer with the denied handler (by default 429 and
	// DeniedProblem); do not call the handler.
	OutcomeDenied
	// OutcomeError: no decision could be made; answer with the error
	// handler (by default ErrorProblem); do not call the handler.
	OutcomeError
)

// String returns "next", "denied" or "error".
func (o Outcome) String() string {
	switch o {
	case OutcomeNext:
		return "next"
	case OutcomeDenied:
		return "denied"
	case OutcomeError:
		return "error"
	}
	return "unknown"
}

// Decision is the Engine's answer for one request.
type Decision struct {
	// Outcome says what the adapter does next.
	Outcome Outcome
	// Request is the request decided on.
	Request *Request
	// Result is the limiter's decision; the zero Result when the request
	// was skipped or no decision was made.
	Result slidelog.Result
	// Err is why no decision was made: an error wrapping
	// slidelog.ErrInvalidKey for a bad identity, or the limiter's error.
	// Never send its text to the client.
	Err error
	// Skipped reports that the skip function let the request bypass the
	// limiter.
	Skipped bool
	// Header holds the response header fields to set, in order, before the
	// handler or the denied handler writes the response.
	Header []HeaderField

	limiter *slidelog.Limiter
	refund  bool
	alloc   *requestAlloc // holds the room for SetHeader's values
	// ctx is the request's context as Check saw it: Finish reads whether
	// the client went away from it, not from the context a middleware
	// inside the limiter may have put on the request since (echo's
	// ContextTimeout, for one, leaves its own context there, canceled
	// once it returns).
	ctx context.Context
}

// requestAlloc is what Check allocates for a request: the Request, which
// the key, skip, cost, limiter and shadow functions receive, and room
// for the Decision's Header (the IETF fields and Retry-After; the legacy
// fields of a denial, one more, take an allocation of their own). The
// Decision points into it, and so can stay in the adapter's frame.
type requestAlloc struct {
	r      Request
	fields [3]HeaderField
	// values holds the header values SetHeader stores, and text the bytes
	// of the RateLimit value when they fit: Decision.SetHeader then
	// allocates nothing of its own. The first call on the Decision, or on
	// any copy of it, sets taken and uses values; text is written once,
	// by Check. (text's 44 bytes and taken's 4 keep a requestAlloc at 288
	// bytes, a size class.)
	values [3]string
	text   [44]byte
	taken  atomic.Bool
}

// Check decides one request. It never blocks on anything but the store,
// and calls the store only for a valid identity.
//
// The limiter's failure mode shows through: an error (FailError) is
// OutcomeError, answered 503 by default; a FailClosed denial is
// OutcomeDenied like any other, answered 429 with Retry-After; a
// FailOpen or fallback admission is OutcomeNext.
//
// Check never panics: a panic in a key, skip, cost or limiter function,
// or in the store, is recovered and answered as an error wrapping
// ErrMisconfigured (500 by default; in shadow mode, let through and
// reported). A panic in the shadow function is recovered and logged, and
// the request goes on as decided. A nil or zero Engine answers every request as a misconfiguration.
//
// A recovered panic, a key function's error that does not wrap
// slidelog.ErrInvalidKey, and a request for which the limiter function
// chose no limiter while the Engine has none (answered 500) are the
// server's own problems: Check logs them to the limiter's logger
// (slidelog.Limiter.Logger; slog.Default() when no limiter was chosen),
// a panic at ERROR with its value and stack, a key function's error at
// WARN, no limiter at ERROR, each kind at most once every 10 seconds per
// Engine, with the route, the method and the number of requests since
// the previous record.
func (e *Engine) Check(src Incoming) *Decision {
	d := new(Decision)
	e.check(src, d)
	return d
}

// check is Check deciding into d. Check is small enough to be inlined, so
// that the Decision of an adapter that keeps it in its own frame, as
// every adapter does, is not allocated on the heap.
func (e *Engine) check(src Incoming, d *Decision) {
	if e == nil || e.cfg.keyFunc == nil {
		*d = Decision{Request: &Request{Incoming: src}, Outcome: OutcomeError,
			Err: fmt.Errorf("%w: httplimit.Engine not made by httplimit.New", ErrMisconfigured)}
		return
	}
	a := &requestAlloc{r: Request{Incoming: src, ip: &e.cfg.ip}}
	r := &a.r
	d.Request = r
	d.alloc = a
	var at progress // starts at the skip function
	defer func() {
		if p := recover(); p != nil {
			*d = Decision{Request: r, Outcome: OutcomeError, Err: fmt.Errorf("%w: panic: %v", ErrMisconfigured, p)}
			e.logPanic("slidelog: httplimit recovered a panic; no decision for the request", at.step, r, at.limiter, p)
			if e.cfg.shadow {
				d.Outcome = OutcomeNext
				e.report(r, slidelog.Result{}, d.Err)
			}
		}
	}()
	if e.cfg.skipFunc != nil && e.cfg.skipFunc(r) {
		d.Skipped = true
		return
	}
	d.Result, d.limiter, d.Err = e.decide(r, &at)
	at.step = panicEngine
	switch {
	case d.Err != nil:
		d.Outcome = OutcomeError
	case !d.Result.Allowed:
		d.Outcome = OutcomeDenied
		d.Header = appendHeaderFields(a.fields[:0], e.cfg.headers, d.Result, &e.texts, a.text[:]) // Retry-After last
	default:
		d.Header = appendHeaderFields(a.fields[:0], e.cfg.headers, d.Result, &e.texts, a.text[:])
		d.refund = e.cfg.refund
		if d.refund {
			d.ctx = r.Context()
		}
	}
	if e.cfg.shadow && d.Outcome != OutcomeNext {
		if d.Outcome == OutcomeDenied {
			d.Header = d.Header[:len(d.Header)-1] // no Retry-After on a response that is not a denial
		}
		d.Outcome = OutcomeNext
		e.report(r, d.Result, d.Err)
	}
}

// report tells the shadow function, if any, of a request shadow mode let
// through. A panic in it is recovered and logged (kind
// shadow_func_panic): the request goes on as decided.
func (e *Engine) report(r *Request, res slidelog.Result, err error) {
	if e.cfg.shadowFunc == nil {
		return
	}
	defer func() {
		if p := recover(); p != nil {
			e.logPanic("slidelog: httplimit recovered a panic of the shadow function; the request goes on as decided",
				panicShadowFunc, r, nil, p)
		}
	}()
	e.cfg.shadowFunc(r, res, err)
}

// decide asks the limiter about r, noting in at the function it calls,
// for the record of a panic.
func (e *Engine) decide(r *Request, at *progress) (slidelog.Result, *slidelog.Limiter, error) {
	l := e.limiter
	if e.cfg.limiterFunc != nil {
		at.step = panicLimiterFunc
		if chosen := e.cfg.limiterFunc(r); chosen != nil {
			l = chosen
		}
	}
	if l == nil {
		e.logNoLimiter(r)
		return slidelog.Result{}, nil, errNoLimiter
	}
	at.limiter, at.step = l, panicKeyFunc
	id, err := e.cfg.keyFunc(r)
	if err != nil {
		if !errors.Is(err, slidelog.ErrInvalidKey) {
			e.logKeyError(r, l, err)
		}
		return slidelog.Result{}, nil, err
	}
	if id == "" {
		return slidelog.Result{}, nil, ErrNoKey
	}
	if err := l.ValidateKey(id); err != nil {
		return slidelog.Result{}, nil, fmt.Errorf("%w: %w", ErrIdentityTooLong, err)
	}
	cost := e.cfg.cost
	if e.cfg.costFunc != nil {
		at.step = panicCostFunc
		cost = e.cfg.costFunc(r)
	}
	at.step = panicStore
	res, err := l.AllowN(r.Context(), id, cost)
	return res, l, err
}

// problem is a kind of problem of the server's own setup that an Engine
// sees only at run time, and logs (logProblem, logPanic): a function that
// panicked, a key function's error, or no limiter for a request.
type problem uint8

const (
	panicSkipFunc    problem = iota // the skip function panicked
	panicLimiterFunc                // the limiter function panicked
	panicKeyFunc                    // the key function panicked
	panicCostFunc                   // the cost function panicked
	panicStore                      // the limiter's decision (its store) panicked
	panicEngine                     // the Engine panicked past the decision
	keyFuncError                    // the key function failed, not for the client's identity
	noLimiter                       // the limiter function chose none, and the Engine has none
	panicShadowFunc                 // the shadow function panicked (the request goes on as decided)
	numProblems
)

// problemKinds are the problems' names, the "kind" of their records.
var problemKinds = [numProblems]string{
	"skip_func_panic", "limiter_func_panic", "key_func_panic", "cost_func_panic",
	"store_panic", "panic", "key_func_error", "no_limiter", "shadow_func_panic",
}

// progress is how far check got in deciding a request: the function it
// was calling, and the limiter, once chosen. A panic's record names them.
type progress struct {
	step    problem
	limiter *slidelog.Limiter
}

// problemLogEvery is how often, at most, an Engine logs one kind of
// problem: the interval of the limiter's own failure-mode records.
const problemLogEvery = 10 * time.Second

// logPanic logs msg for p, a panic of kind k recovered on r (logPanic
// runs in the deferred call that recovered it), as logProblem does, at
// ERROR, adding the panic's value and the stack that panicked.
func (e *Engine) logPanic(msg string, k problem, r *Request, l *slidelog.Limiter, p any) {
	logger, attrs := e.problemRecord(k, r, l)
	e.logs[k].LogPanic(time.Now(), problemLogEvery, logger, msg, p, attrs)
}

// logKeyError logs err, the error of the key function, which does not
// wrap slidelog.ErrInvalidKey (not the client's fault).
func (e *Engine) logKeyError(r *Request, l *slidelog.Limiter, err error) {
	e.logProblem(slog.LevelWarn, "slidelog: httplimit key function failed; no decision for the request",
		keyFuncError, r, l, slog.Any("error", err))
}

// logNoLimiter logs that the limiter function chose no limiter for r,
// and the Engine has none of its own: the request is answered 500. No
// limiter's observers count it, as none was chosen: the record is what
// says so.
func (e *Engine) logNoLimiter(r *Request) {
	e.logProblem(slog.LevelError, "slidelog: httplimit limiter function chose no limiter, and the middleware has none; no decision for the request",
		noLimiter, r, nil)
}

// logProblem logs msg for a problem of kind k met on r, at most once per
// problemLogEvery per kind: to the logger of l (or of the Engine's
// limiter; slog.Default() without one), with the limiter's name, the
// kind, the request's route pattern and method, the number of requests
// since the previous record, and more. It never panics: a logger, or an
// Incoming, that panics loses the record, not the request.
func (e *Engine) logProblem(level slog.Level, msg string, k problem, r *Request, l *slidelog.Limiter, more ...slog.Attr) {
	logger, attrs := e.problemRecord(k, r, l)
	e.logs[k].Log(time.Now(), problemLogEvery, logger, level, msg, func(n int64) []slog.Attr {
		return append(attrs(n), more...)
	})
}

// problemRecord returns the logger of a record of a problem of kind k met
// on r (that of l, or of the Engine's limiter; slog.Default() without
// one), and its attributes given n, the number of requests since the
// previous record: the limiter's name, the kind, the request's route
// pattern and method, and n. The attributes ask r's Incoming, which may
// panic: call them only where a panic loses the record (ratelog.Every's
// Log).
func (e *Engine) problemRecord(k problem, r *Request, l *slidelog.Limiter) (*slog.Logger, func(n int64) []slog.Attr) {
	if l == nil {
		l = e.limiter
	}
	logger, name := slog.Default(), ""
	if l != nil {
		logger, name = l.Logger(), l.Name()
	}
	return logger, func(n int64) []slog.Attr {
		attrs := []slog.Attr{slog.String("limiter", name), slog.String("kind", problemKinds[k])}
		if r.Incoming != nil {
			// The route is what the adapter routes on: the router's pattern
			// where the framework has one (gRPC and connect: the procedure,
			// which a client may make up before connect-go routes it).
			attrs = append(attrs, slog.String("route", r.Route()), slog.String("method", r.Method()))
		}
		return append(attrs, slog.Int64("requests", n))
	}
}

// Finish completes a decision once the handler has answered with status.
// With WithRefundOnServerError, an admitted request whose status is 5xx
// is refunded, unless its client went away first: a request whose
// context, as Check received it, is done when Finish runs (canceled, or
// past its deadline) counts, since a handler that sees its context done
// answers 5xx (or panics with http.ErrAbortHandler, as
// httputil.ReverseProxy does) for the client's doing, not the server's.
// A refund that fails is ignored (the request then simply counts). Finish
// is a no-op for every other decision.
func (d *Decision) Finish(status int) {
	if d == nil || !d.refund || status < 500 || status > 599 || !d.Result.Allowed {
		return
	}
	d.refund = false
	l := d.limiter
	if l == nil {
		return
	}
	ctx := d.ctx
	if ctx == nil {
		ctx = d.Request.Context()
	}
	if ctx.Err() != nil {
		return // the client went away: its request counts
	}
	// The client may go while the refund runs; its entry must still go.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RefundTimeout)
	defer cancel()
	_ = l.Refund(ctx, d.Result)
}

// Serve calls handler, which serves the admitted request and returns the
// status it answered, and then Finish with that status. When handler
// panics, Serve finishes the decision as a 500 and lets the panic go on,
// unrecovered and with its value, to the recovery middleware outside the
// limiter: with WithRefundOnServerError a request whose handler panicked
// (http.ErrAbortHandler included) is refunded like one that answered
// 500, and, like it, not when its client went away (see Finish).
// Adapters call it on the path that refunds.
func (d *Decision) Serve(handler func() int) {
	returned := false
	defer func() {
		if !returned {
			d.Finish(http.StatusInternalServerError)
		}
	}()
	status := handler()
	returned = true
	d.Finish(status)
}

// RefundTimeout bounds the store call Finish makes to refund a request.
const RefundTimeout = 2 * time.Second

// ErrMisconfigured reports a request the HTTP middleware could not
// decide because of the server's own setup, not the client's request
// or the store: a context value of a type that cannot be an identity,
// no limiter for the request, or a key, skip, cost or limiter function
// that panicked (the panic is recovered and wrapped). Adapters answer
// it with 500.
var ErrMisconfigured = errors.New("httplimit: misconfigured")

// ErrNoKey reports that a key function found no identity in the request
// (no such header, no value in the context). FirstOf moves on to its next
// key function on it. It wraps slidelog.ErrInvalidKey.
var ErrNoKey = fmt.Errorf("%w: no identity in request", slidelog.ErrInvalidKey)

// ErrNoRoute reports a request for which ByRoute knows no route pattern:
// no route matched, or the adapter cannot see the router's pattern (see
// ByRoute). It wraps ErrNoKey, so FirstOf moves on from it, and is
// answered with 400.
var ErrNoRoute = fmt.Errorf("%w: no route pattern for request", ErrNoKey)

// ErrIdentityTooLong reports an identity longer than the limiter's maximum
// key length; it is answered with 431. It wraps slidelog.ErrInvalidKey.
var ErrIdentityTooLong = fmt.Errorf("%w: identity too long", slidelog.ErrInvalidKey)

// ErrDuplicateHeader reports a request whose identity header (ByHeader)
// was sent more than once, or as a comma-separated list: two identities
// in one request, of which the client wrote at least one. It is answered
// with 400, and FirstOf does not move on from it. It wraps
// slidelog.ErrInvalidKey.
var ErrDuplicateHeader = fmt.Errorf("%w: identity header sent more than once", slidelog.ErrInvalidKey)

var (
	errNoLimiter    = fmt.Errorf("%w: no limiter for request", ErrMisconfigured)
	errNoClientAddr = fmt.Errorf("%w: no client IP address", slidelog.ErrInvalidKey)
)
