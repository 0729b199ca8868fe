// Package readiness tells whether limiters decide in their store or in
// their failure mode, for a readiness endpoint:
//
//	ready := readiness.New()
//	limiter, err := slidelog.New(store, slidelog.PerMinute(100), slidelog.WithObserver(ready))
//	...
//	mux.Handle("GET /readyz", ready) // 200 "ok", or 503 while decisions go to the failure mode
//
// An Observer is a slidelog.Observer: it learns from the decisions, store
// failures and breaker states the limiters report, and asks nothing of
// Redis itself. It lives in a package of its own so that the root package
// does not import net/http.
package readiness

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
)

// ErrNotReady reports that a limiter's decisions go to its failure mode.
var ErrNotReady = errors.New("readiness: decisions go to the failure mode")

// DefaultHold is how long after its last failover a limiter that has had
// no decision since counts as not ready (see WithHold).
const DefaultHold = 10 * time.Second

// Observer tracks whether the limiters it is given to (with
// slidelog.WithObserver) decide in their store. A limiter is not ready
// while its last decision went to the failure mode (the fallback, FailOpen,
// FailClosed or FailError), or while a breaker of one of its store nodes is
// open and decisions still go to the failure mode, for at most the hold
// time after its last failover (DefaultHold): a limiter that gets no
// traffic, say because a load balancer took the instance out on its 503,
// counts as ready again then, so the next requests find out whether the
// store answers. A limiter with no decision yet is ready.
//
// Its ServeHTTP answers 200 "ok" or 503 with the names of the limiters
// that are not ready and why, never a store node's address. Observer is
// safe for concurrent use; the zero value is not, use New.
type Observer struct {
	hold time.Duration

	mu       sync.Mutex
	limiters map[*limiter]struct{}
}

// Option configures an Observer.
type Option interface {
	apply(*Observer)
}

type optionFunc func(*Observer)

func (f optionFunc) apply(o *Observer) { f(o) }

// WithHold sets how long after its last failover a limiter stays not
// ready when no decision has come from its store since (default
// DefaultHold). A hold of zero or less keeps the default.
func WithHold(d time.Duration) Option {
	return optionFunc(func(o *Observer) {
		if d > 0 {
			o.hold = d
		}
	})
}

// New returns an Observer; give it to each limiter with
// slidelog.WithObserver.
func New(opts ...Option) *Observer {
	o := &Observer{hold: DefaultHold, limiters: make(map[*limiter]struct{})}
	for _, opt := range opts {
		if opt != nil {
			opt.apply(o)
		}
	}
	return o
}

// Bind implements slidelog.Observer.
func (o *Observer) Bind(name string, _ func() slidelog.Gauges) (slidelog.LimiterObserver, error) {
	l := &limiter{o: o, name: name, open: make(map[string]bool)}
	o.mu.Lock()
	o.limiters[l] = struct{}{}
	o.mu.Unlock()
	return l, nil
}

// Ready returns nil when every bound limiter decides in its store, and an
// error wrapping ErrNotReady naming the others and why.
func (o *Observer) Ready() error {
	now := time.Now()
	o.mu.Lock()
	ls := make([]*limiter, 0, len(o.limiters))
	for l := range o.limiters {
		ls = append(ls, l)
	}
	o.mu.Unlock()
	var problems []string
	for _, l := range ls {
		if p := l.problem(now, o.hold); p != "" {
			problems = append(problems, p)
		}
	}
	if len(problems) == 0 {
		return nil
	}
	sort.Strings(problems)
	return fmt.Errorf("%w: %s", ErrNotReady, strings.Join(problems, "; "))
}

// ServeHTTP answers 200 with "ok" when Ready returns nil, and 503 with
// Ready's error otherwise, as text/plain, uncached.
func (o *Observer) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := o.Ready(); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = fmt.Fprintf(w, "not ready: %v\n", err)
		return
	}
	_, _ = w.Write([]byte("ok\n"))
}

// limiter is what an Observer knows of one limiter.
type limiter struct {
	o    *Observer
	name string

	lastStore atomic.Int64 // Unix ns of the last decision of the store

	mu           sync.Mutex
	lastFailover time.Time // last decision of the failure mode
	reason       string    // of the last failover
	open         map[string]bool
}

func (l *limiter) problem(now time.Time, hold time.Duration) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lastFailover.IsZero() || now.Sub(l.lastFailover) >= hold {
		return ""
	}
	open := 0
	for _, o := range l.open {
		if o {
			open++
		}
	}
	if l.lastStore.Load() > l.lastFailover.UnixNano() && open == 0 {
		return ""
	}
	p := fmt.Sprintf("limiter %q: last failover %v ago (%s)", l.name, now.Sub(l.lastFailover).Round(time.Millisecond), l.reason)
	if open > 0 {
		p += fmt.Sprintf(", breaker open on %d store node(s)", open)
	}
	return p
}

// Decision implements slidelog.LimiterObserver.
func (l *limiter) Decision(source slidelog.Source, _ bool) {
	if source.FromStore() {
		l.lastStore.Store(time.Now().UnixNano())
	}
}

// Failover implements slidelog.LimiterObserver.
func (l *limiter) Failover(reason string, _ slidelog.FailureMode) {
	now := time.Now()
	l.mu.Lock()
	l.lastFailover = now
	l.reason = reason
	l.mu.Unlock()
}

// BreakerState implements slidelog.LimiterObserver.
func (l *limiter) BreakerState(node string, st slidelog.BreakerState) {
	l.mu.Lock()
	l.open[node] = st == slidelog.BreakerOpen
	l.mu.Unlock()
}

// StoreCall implements slidelog.LimiterObserver.
func (l *limiter) StoreCall(string, time.Duration) {}

// Error implements slidelog.LimiterObserver.
func (l *limiter) Error(string) {}

// Unbind implements slidelog.LimiterObserver: a closed limiter no longer
// counts.
func (l *limiter) Unbind() {
	l.o.mu.Lock()
	delete(l.o.limiters, l)
	l.o.mu.Unlock()
}
