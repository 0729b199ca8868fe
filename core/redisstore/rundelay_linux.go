package redisstore

import (
	"bytes"
	"os"
	"strconv"
	"time"
)

// runDelay is how long the calling thread has waited, in all, for a CPU
// while it was ready to run (the second field of
// /proc/thread-self/schedstat); 0 when it cannot be read.
func runDelay() time.Duration {
	b, err := os.ReadFile("/proc/thread-self/schedstat")
	if err != nil {
		return 0
	}
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0
	}
	ns, err := strconv.ParseInt(string(f[1]), 10, 64)
	if err != nil {
		return 0
	}
	return time.Duration(ns)
}
