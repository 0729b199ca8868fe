package memlog

import "github.com/slidelog/slidelog/core/internal/window"

// Peek writes to out the states a request of req.Cost would get now
// against policies, without recording it (window.Log.Peek). A key
// without a log of its own reads its namespace's overflow log, which Take
// would decide on, or else an empty log; either way it stays untracked.
// The decision tells whether the request would be admitted.
func (t *Table) Peek(now int64, req Request, policies []window.Policy, out []window.State) window.Decision {
	l := t.lock(&logKey{req.Namespace, req.Key})
	if l == nil {
		l = t.lockOverflow(req.Namespace)
	}
	if l == nil {
		var empty window.Log
		return empty.Peek(now, req.Cost, policies, out)
	}
	d := l.w.Peek(now, req.Cost, policies, out)
	l.mu.Unlock()
	return d
}
