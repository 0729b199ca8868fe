// Package monotime is the process's monotonic clock as one int64: the
// nanoseconds since the package was initialised. Such times can be kept
// in atomics and compared, and a change to the wall clock moves none of
// them.
package monotime

import "time"

// start is the origin of Now.
var start = time.Now()

// Now is the monotonic time, in nanoseconds since the process started
// (since this package was initialised).
func Now() int64 { return int64(time.Since(start)) }
