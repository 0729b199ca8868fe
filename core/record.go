package slidelog

import (
	"context"
	"time"
)

// admissionRecorder is a store that can write into its log an admission
// decided elsewhere: the limiter's local fallback admits requests while
// the store is unreachable, and records them with Record once it answers
// again, so that they count against the decisions that follow.
//
// Record writes req (req.Namespace, req.Key, req.ID, req.Cost and
// req.Policies) as admitted at time at, to the microsecond, without
// checking any limit. It is idempotent by req.ID: recording an ID twice,
// or one that Take already recorded, counts it once. The entry counts
// against later decisions until at plus each policy's window and is then
// gone, like an entry of Take; one that already left every window is not
// written.
type admissionRecorder interface {
	Record(ctx context.Context, req Request, at time.Time) error
}

var (
	_ admissionRecorder = (*RedisStore)(nil)
	_ admissionRecorder = (*MemoryStore)(nil)
)
