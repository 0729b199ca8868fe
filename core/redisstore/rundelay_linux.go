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

// threadDelays returns how long each thread of this process has waited,
// in all, for a CPU while it was ready to run, by thread ID; nil when it
// cannot be read.
func threadDelays() map[string]time.Duration {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil
	}
	delays := make(map[string]time.Duration, len(tasks))
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/schedstat")
		if err != nil {
			continue // the thread is gone
		}
		if f := bytes.Fields(b); len(f) >= 2 {
			if ns, err := strconv.ParseInt(string(f[1]), 10, 64); err == nil {
				delays[t.Name()] = time.Duration(ns)
			}
		}
	}
	return delays
}
