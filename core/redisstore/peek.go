package redisstore

import (
	"context"
	"fmt"

	slidelog "github.com/slidelog/slidelog/core"
)

// Peek implements slidelog.Peeker with one run of a read-only script on
// the key's master: per policy the units free now, and what a take of
// req.Cost would answer, recording nothing. It reads what the decision
// script keeps, exactly for the exact log, and for a bucketed policy as
// the decision script counts it (an admission counts until its bucket's
// end has left the window). It fails with slidelog.ErrInvalidPolicy,
// ErrInvalidCost or ErrUnavailable.
func (s *Store) Peek(ctx context.Context, req slidelog.Request) (slidelog.Result, error) {
	if err := req.Validate(); err != nil {
		return slidelog.Result{}, err
	}
	args := make([]any, 0, 2+3*len(req.Policies))
	args = append(args, s.nowArg(), req.Cost)
	for _, p := range req.Policies {
		args = append(args, p.Limit, p.Window.Microseconds(), p.Precision.Microseconds())
	}
	sc := peekScript
	if s.legacy.Load() {
		sc = legacyPeekScript
	}
	r := s.routed(ctx, req)
	reply, err := s.pipes.run(ctx, sc, r, args)
	if err != nil {
		return slidelog.Result{}, s.failed(ctx, err)
	}
	if len(reply) != 3+3*len(req.Policies) {
		return slidelog.Result{}, fmt.Errorf("%w: peek script returned %d values for %d policies", slidelog.ErrUnavailable, len(reply), len(req.Policies))
	}
	if len(reply) > 0 && reply[0] > 0 && reply[0]&repairedFlag != 0 {
		// Read-only: the next decision of the key repairs it.
		reply[0] &^= repairedFlag
		s.logger.Warn("redisstore: peek read damaged fields of a key (values the script never writes) and counted them as the limit; the key's next decision repairs them", "key", r.LogKey)
	}
	return decode(reply, req.Policies, Source), nil
}
