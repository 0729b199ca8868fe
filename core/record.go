package slidelog

import (
	"context"
	_ "embed"
	"time"

	"github.com/redis/go-redis/v9"
)

// admissionRecorder is a store that can write an admission decided
// elsewhere, by a limiter's local fallback while the store was failing,
// into its log, so that the windows after recovery count it.
type admissionRecorder interface {
	// Record writes req, admitted at at, into its key's log without
	// checking any limit. It is idempotent by req.ID: recording an ID
	// already in the log records nothing.
	Record(ctx context.Context, req Request, at time.Time) error
}

var _ admissionRecorder = (*RedisStore)(nil)

//go:embed record.lua
var recordSource string

var recordScript = redis.NewScript(recordSource)

// Record implements admissionRecorder with one script call.
func (s *RedisStore) Record(ctx context.Context, req Request, at time.Time) error {
	return s.record(ctx, req, at, s.route(ctx, req), wait{})
}

// record is Record at r, through the pipelines, ending early when w's
// node stalls.
func (s *RedisStore) record(ctx context.Context, req Request, at time.Time, r route, w wait) error {
	var longest time.Duration
	for _, p := range req.Policies {
		longest = max(longest, p.Window)
	}
	args := []any{at.UnixMicro(), member(req.ID), req.Cost, longest.Microseconds()}
	if _, err := s.pipes.run(ctx, recordScript, r, w, args); err != nil {
		return unavailable(ctx, err)
	}
	return nil
}
