package memstore

import (
	"context"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/internal/window"
)

// Peek implements slidelog.Peeker: the state of req's key against each of
// req.Policies now, as a request of req.Cost would find it, recording
// nothing. Remaining is what is free before that request.
func (s *Store) Peek(ctx context.Context, req slidelog.Request) (slidelog.Result, error) {
	if err := s.usable(ctx); err != nil {
		return slidelog.Result{}, err
	}
	if err := req.Validate(); err != nil {
		return slidelog.Result{}, err
	}
	now := s.now()
	var pbuf [maxStack]window.Policy
	states := make([]window.State, len(req.Policies))
	d := s.table.Peek(now, request(&req), policies(req, pbuf[:0]), states)
	out := make([]slidelog.PolicyResult, len(req.Policies))
	for i, st := range states {
		out[i] = slidelog.PolicyResult{
			Policy: req.Policies[i], Allowed: d.Allowed || st.Allowed, Remaining: int(st.Remaining),
			RetryAfter: time.Duration(st.RetryAfter) * time.Microsecond,
			ResetAfter: time.Duration(st.ResetAfter) * time.Microsecond,
		}
	}
	res := slidelog.NewResult(out, Source)
	res.DecidedAt = time.UnixMicro(now)
	res.StableFor = time.Duration(d.Steady) * time.Microsecond
	return res, nil
}
