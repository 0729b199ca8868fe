package slidelogtest

import (
	"testing"

	slidelog "github.com/slidelog/slidelog/core"
)

// NewLimiter returns slidelog.New(store, policy, opts...), closed when the
// test ends; it fails the test if New returns an error. Closing it again
// in the test is harmless.
func NewLimiter(t testing.TB, store slidelog.Store, policy slidelog.Policy, opts ...slidelog.Option) *slidelog.Limiter {
	t.Helper()
	l, err := slidelog.New(store, policy, opts...)
	if err != nil {
		t.Fatalf("slidelog.New: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}
