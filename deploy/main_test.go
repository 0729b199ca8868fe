package deploy_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that the limiters the tests make leave no goroutine.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
