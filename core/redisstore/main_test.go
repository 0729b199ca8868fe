package redisstore_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// ownServers: the tests that start every server, Cluster and Sentinel
// they use, and none of the rig's, run in parallel (t.Parallel), after
// the package's other tests: they spend most of their time waiting on
// their servers (a Cluster forming, a failover, a Sentinel's vote), which
// in sequence made most of this package's run. make test runs them four
// at a time (-parallel 4); go test's default is one per core. The runs of
// a test on the rig's servers that pace their own calls and mostly sleep
// (TestBucketRecountStress's, TestForgedBucketSumBelowBuckets's) run side
// by side too, within their test, each on keys of its own.
//
// TestMain checks that no goroutine outlives the tests, as
// goleak.VerifyTestMain does, with up to 3 s for them to end instead of
// goleak's half second: a go-redis client closed while it dialled a
// stopped server keeps a goroutine that sleeps 1 s between dials before
// it sees the pool closed (ConnPool.tryDial), and with tests in parallel
// the last of them may have closed one an instant before the package
// ends. A goroutine still there after 3 s fails the run.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		err := goleak.Find()
		for end := time.Now().Add(3 * time.Second); err != nil && time.Now().Before(end); err = goleak.Find() {
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "goleak: Errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
