package memlog

import (
	"sync/atomic"
	"time"
)

// Memory is a memory store's logs as a limiter decides on them: the
// table, the store's clock and whether the store is closed. A store of
// this module offers it with a Memory method (Holder); slidelog.New takes
// it only from the store that Owner names, so that a store wrapping one
// (and perhaps changing what its Take does) is never bypassed.
type Memory struct {
	Table *Table
	// Clock is the store's clock, of a concrete type, so that a decision
	// reads it without a call through an interface.
	Clock  StoreClock
	Closed atomic.Bool
	// Owner is the store that keeps the logs.
	Owner any
}

// Holder is a store that keeps its logs in a Memory. The result type is
// internal to the core module, so only the module's own stores offer it.
type Holder interface {
	Memory() *Memory
}

// StoreClock is a memory store's time in Unix microseconds: the time fn
// gives, or, without one, the process's monotonic clock counted from the
// store's creation (so that a change of the wall clock does not move it).
// It implements Clock.
type StoreClock struct {
	fn    func() time.Time
	start time.Time
	base  int64 // start in Unix microseconds
}

// NewStoreClock returns a clock reading fn, or the monotonic clock when fn
// is nil.
func NewStoreClock(fn func() time.Time) StoreClock {
	start := time.Now()
	return StoreClock{fn: fn, start: start, base: start.UnixMicro()}
}

// Now returns the clock's time in microseconds.
func (c *StoreClock) Now() int64 {
	if c.fn != nil {
		return c.fn().UnixMicro()
	}
	return c.base + time.Since(c.start).Microseconds()
}
