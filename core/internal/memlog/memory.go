package memlog

import "sync/atomic"

// Memory is a memory store's logs as a limiter decides on them: the
// table, the store's clock and whether the store is closed. A store of
// this module offers it with a Memory method (Holder); slidelog.New takes
// it only from the store that Owner names, so that a store wrapping one
// (and perhaps changing what its Take does) is never bypassed.
type Memory struct {
	Table  *Table
	Clock  Clock
	Closed atomic.Bool
	// Owner is the store that keeps the logs.
	Owner any
}

// Holder is a store that keeps its logs in a Memory. The result type is
// internal to the core module, so only the module's own stores offer it.
type Holder interface {
	Memory() *Memory
}
