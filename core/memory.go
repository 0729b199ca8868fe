package slidelog

import (
	"context"
	"time"

	"github.com/slidelog/slidelog/core/internal/memlog"
	"github.com/slidelog/slidelog/core/internal/window"
)

// The memory path: a limiter on a memory store decides on the store's
// logs here, without calling the store's Take, and so does a limiter's
// local fallback on its own logs. A memory store answers at once and
// fails only when it is closed: there is no deadline, breaker or failure
// mode to pay for, and the request and the Result are not copied through
// the Store interface. The decisions are those the store's Take makes
// (TestMemoryPathMatchesTake holds them to it).

// memoryOf returns the logs of store when store keeps them in this
// process's memory and is the very store that holds them (a store that
// embeds a memory store, and perhaps changes what its Take does, is a
// store of its own), or nil.
func memoryOf(store Store) *memlog.Memory {
	h, ok := store.(memlog.Holder)
	if !ok {
		return nil
	}
	if m := h.Memory(); m != nil && m.Owner == any(store) {
		return m
	}
	return nil
}

// allowMemory is AllowN's decision on the limiter's memory store, after
// AllowN's checks: it writes the Result to res. A closed store is the one
// failure of a memory store: the failure mode decides then (with the
// default, the decision fails with ErrClosed, counted as an error of
// reason "closed" and not as a failover, a memory store having no
// fallback), and res is left zero when it fails.
func (l *Limiter) allowMemory(ctx context.Context, res *Result, key string, n int, policies []Policy) error {
	m := l.memory
	if m.Closed.Load() {
		r, err := l.failover(ctx, Request{Namespace: l.namespace, Key: key, Cost: n, Policies: policies}, reasonError, ErrClosed)
		if err == nil {
			*res = r
		}
		return err
	}
	var sent time.Time
	if l.metrics != nil || l.deny != nil {
		sent = time.Now()
	}
	// The key's log gives an admission an ID, which costs less than a
	// random draw (window.Decision.ID).
	var id uint64
	if len(policies) == 1 {
		w := l.windows[0]
		if !sameSlice(policies, l.policies) {
			w = windowOf(policies[0]) // a policy func's
		}
		st, d, now := m.Table.TakeOne(&m.Clock, l.namespace, key, int64(n), w)
		setOne(res, &policies[0], d, now, st, l.source)
		id = d.ID
	} else {
		// Field by field: a composite literal is built aside and copied,
		// and the copy reads what was just written at another width,
		// which stalls.
		var req memlog.Request
		req.Namespace, req.Key, req.Cost = l.namespace, key, int64(n)
		if l.policyFunc != nil && !sameSlice(policies, l.policies) {
			decideOwn(res, m, &req, policies, l.source)
		} else {
			decideMemory(res, m.Table, &m.Clock, &req, policies, l.windows, l.source)
		}
		id = req.ID
	}
	if res.Allowed {
		res.ticket.from, res.ticket.key, res.ticket.id, res.ticket.cost = l, key, id, n
		if l.deny != nil {
			l.deny.remove(key) // a denial cached before it no longer holds
		}
	} else if l.deny != nil {
		l.deny.put(key, n, sent, *res)
	}
	if l.metrics != nil {
		l.metrics.commandDone("ok", time.Since(sent))
		l.metrics.decision(*res)
	}
	return nil
}

// peekMemory is Peek on the limiter's memory store.
func (l *Limiter) peekMemory(key string, policies []Policy) (Result, error) {
	m := l.memory
	if m.Closed.Load() {
		return Result{}, ErrClosed
	}
	var buf [maxStackPolicies]window.Policy
	req := memlog.Request{Namespace: l.namespace, Key: key, Cost: 1}
	var res Result
	peekMemory(&res, m.Table, m.Clock.Now(), &req, policies, appendWindows(buf[:0], policies), l.source)
	return res, nil
}

// decideOwn is decideMemory on m for policies of a policy func, converted
// here (on the stack when they are few). It is a function of its own, so
// that a decision on the limiter's policies does not clear the array.
func decideOwn(res *Result, m *memlog.Memory, req *memlog.Request, policies []Policy, source Source) {
	var buf [maxStackPolicies]window.Policy
	decideMemory(res, m.Table, &m.Clock, req, policies, appendWindows(buf[:0], policies), source)
}

// maxStackPolicies is how many policies a decision on memory converts in
// arrays on the stack; a decision on more allocates.
const maxStackPolicies = 4

// decideMemory decides req on table at the time clock gives, against
// policies (windows: the same in microseconds), and writes the Result to
// res, with source as its Source. A decision on one policy allocates
// nothing.
func decideMemory(res *Result, table *memlog.Table, clock memlog.Clock, req *memlog.Request, policies []Policy, windows []window.Policy, source Source) {
	var buf [maxStackPolicies]window.State
	states := buf[:]
	if len(windows) > len(buf) {
		states = make([]window.State, len(windows))
	}
	d, now := table.Take(clock, req, windows, states)
	WindowResult(res, policies, d, now, states, source)
}

// peekMemory writes to res the Result a decision of req would get on
// table at now, recording nothing: Remaining is what is free before it.
func peekMemory(res *Result, table *memlog.Table, now int64, req *memlog.Request, policies []Policy, windows []window.Policy, source Source) {
	var buf [maxStackPolicies]window.State
	states := buf[:]
	if len(windows) > len(buf) {
		states = make([]window.State, len(windows))
	}
	d := table.Peek(now, *req, windows, states)
	WindowResult(res, policies, d, now, states, source)
}

// WindowResult writes to res the Result of the decision d that this
// module's memory logs made on policies at now (microseconds), states[i]
// being the state of policies[i], with source as its Source: the one
// place where window state becomes a Result, for a limiter's memory path,
// its local fallback and package memstore's Take and Peek alike. One
// policy's state is written to the top-level fields in place, field by
// field (a Result is large, and every copy shows on a memory decision);
// several go through NewResult, which chooses the binding policy. The
// types of d and states are internal to the core module, so no package
// outside it can call WindowResult.
func WindowResult(res *Result, policies []Policy, d window.Decision, now int64, states []window.State, source Source) {
	if len(policies) == 1 {
		setOne(res, &policies[0], d, now, states[0], source)
		return
	}
	var buf [maxStackPolicies]PolicyResult
	out := buf[:0]
	for i, st := range states[:len(policies)] {
		out = append(out, PolicyResult{
			Policy: policies[i], Allowed: d.Allowed || st.Allowed, Remaining: int(st.Remaining),
			RetryAfter: micros(st.RetryAfter), ResetAfter: micros(st.ResetAfter),
		})
	}
	*res = NewResult(out, source)
	res.DecidedAt = time.UnixMicro(now)
	res.StableFor = micros(d.Steady)
}

// setOne is WindowResult on the one policy p, whose state is st.
func setOne(res *Result, p *Policy, d window.Decision, now int64, st window.State, source Source) {
	res.Allowed = d.Allowed
	res.Limit = p.Limit
	res.Remaining = int(st.Remaining)
	res.RetryAfter = micros(st.RetryAfter)
	res.ResetAfter = micros(st.ResetAfter)
	res.Policy = *p
	res.Source = source
	res.DecidedAt = time.UnixMicro(now)
	res.StableFor = micros(d.Steady)
}

func micros(us int64) time.Duration { return time.Duration(us) * time.Microsecond }

// windowsOf returns policies in microseconds, as a memory table takes them.
func windowsOf(policies []Policy) []window.Policy {
	return appendWindows(make([]window.Policy, 0, len(policies)), policies)
}

// appendWindows appends policies, in microseconds, to ws.
func appendWindows(ws []window.Policy, policies []Policy) []window.Policy {
	for _, p := range policies {
		ws = append(ws, windowOf(p))
	}
	return ws
}

// windowOf returns p in microseconds.
func windowOf(p Policy) window.Policy {
	return window.Policy{Limit: int64(p.Limit), Window: p.windowMicros(), Precision: p.Precision.Microseconds()}
}

// sameSlice reports whether a and b are the same slice of one array.
func sameSlice(a, b []Policy) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}
