package memstore

import (
	"context"

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
	var sbuf [maxStack]window.State
	states := sbuf[:]
	if n := len(req.Policies); n > maxStack {
		states = make([]window.State, n)
	}
	d := s.table.Peek(now, request(&req), policies(req, pbuf[:0]), states)
	var res slidelog.Result
	slidelog.WindowResult(&res, req.Policies, d, now, states, Source)
	return res, nil
}
