package slidelog

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/slidelog/slidelog/core/internal/memlog"
	"github.com/slidelog/slidelog/core/internal/window"
)

// localTable is a memory table and what a decision on it needs: the
// clock of its store, the policies (windows: the same in microseconds)
// and the Source of its decisions. It decides for a memory store
// (Limiter.direct) and for the local fallback.
type localTable struct {
	table    *memlog.Table
	clock    memlog.Clock
	policies []Policy
	windows  []window.Policy
	source   Source
}

// decide decides req at the time t's clock gives and writes the Result
// to res. It returns how long a denial stays true, in microseconds
// (window.Decision.Steady). The Result is written in place, field by
// field: it is large, and every copy shows on a memory store's decision.
func (t *localTable) decide(res *Result, req *memlog.Request) (steady int64) {
	if len(t.policies) == 1 {
		var st [1]window.State
		d, now := t.table.Take(t.clock, req, t.windows, st[:])
		p := &t.policies[0]
		res.Allowed = d.Allowed
		res.Limit = p.Limit
		res.Remaining = int(st[0].Remaining)
		res.RetryAfter = time.Duration(st[0].RetryAfter) * time.Microsecond
		res.ResetAfter = time.Duration(st[0].ResetAfter) * time.Microsecond
		res.Policy = *p
		res.Source = t.source
		res.DecidedAt = time.UnixMicro(now)
		return d.Steady
	}
	var buf [4]window.State
	states := buf[:]
	if len(t.windows) > len(buf) {
		states = make([]window.State, len(t.windows))
	}
	d, now := t.table.Take(t.clock, req, t.windows, states)
	out := make([]PolicyResult, len(t.policies))
	for i, st := range states[:len(t.policies)] {
		out[i] = PolicyResult{
			Policy: t.policies[i], Allowed: d.Allowed || st.Allowed, Remaining: int(st.Remaining),
			RetryAfter: time.Duration(st.RetryAfter) * time.Microsecond,
			ResetAfter: time.Duration(st.ResetAfter) * time.Microsecond,
		}
	}
	*res = NewResult(out, t.source)
	res.DecidedAt = time.UnixMicro(now)
	return d.Steady
}

// windowsOf returns policies in microseconds, as a memory table takes them.
func windowsOf(policies []Policy) []window.Policy {
	windows := make([]window.Policy, len(policies))
	for i, p := range policies {
		windows[i] = window.Policy{Limit: int64(p.Limit), Window: p.windowMicros(), Precision: p.Precision.Microseconds()}
	}
	return windows
}

// allowDirect is AllowN on a memory store (memlog.Direct) for a limiter
// with no metrics and no deny cache: the checks AllowN makes, then the
// decision the store's Take makes, taken on its table without passing
// the request and the result through the Store interface. It writes the
// Result to res (zero on an error), which saves a copy of it.
func (l *Limiter) allowDirect(ctx context.Context, res *Result, key string, n int) error {
	if err := l.check(ctx, key); err != nil {
		return err
	}
	if n < 1 || n > l.minLimit {
		return l.costError(n)
	}
	if l.directClosed.Load() {
		return ErrClosed
	}
	// Field by field: a composite literal is built aside and copied, and
	// the copy reads what was just written at another width, which
	// stalls.
	var req memlog.Request
	req.Namespace, req.Key, req.ID, req.Cost = l.namespace, key, rand.Uint64(), int64(n)
	steady := l.direct.decide(res, &req)
	res.StableFor = time.Duration(steady) * time.Microsecond
	if res.Allowed {
		res.ticket.from, res.ticket.key, res.ticket.id, res.ticket.cost = l, key, req.ID, n
	}
	return nil
}
