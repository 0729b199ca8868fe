//go:build !linux

package redisstore

import "time"

// synSent reports that a dial's state is unknown: only Linux's socket
// table is read.
func synSent([]string) (sent, ok bool) { return false, false }

// heardFrom reports that the kernel cannot be asked: only Linux's socket
// table is read.
func heardFrom(string) (ago time.Duration, heard, ok bool) { return 0, false, false }
