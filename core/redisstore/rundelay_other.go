//go:build !linux

package redisstore

import "time"

// runDelay reports 0 where the thread's wait for a CPU is not known.
func runDelay() time.Duration { return 0 }
