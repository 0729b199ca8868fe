//go:build !linux

package redisstore

import "time"

// runDelay reports 0 where the thread's wait for a CPU is not known.
func runDelay() time.Duration { return 0 }

// threadDelays reports nil where threads' waits for a CPU are not known.
func threadDelays() map[string]time.Duration { return nil }
