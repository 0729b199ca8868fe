package redisstore

import (
	"testing"

	"github.com/slidelog/slidelog/core/internal/monotime"
)

// BenchmarkCanaryDue is what a reply to a call of the store's pays for
// the canaries when no reading is due, as on all but one a second: an
// atomic load, with the time the reply's record already read (cd core &&
// go test -run '^$' -bench CanaryDue ./redisstore).
func BenchmarkCanaryDue(b *testing.B) {
	s := &Store{canary: newCanaries()}
	now := monotime.Now()
	for b.Loop() {
		s.canaryDue(now)
	}
}
