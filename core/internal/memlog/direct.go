package memlog

import "sync/atomic"

// Direct is a memory store as a limiter may use it without going through
// its Take: the table, the store's clock and whether the store is closed.
// A limiter on a memory store decides on the table itself, which saves
// copying the request and the result through the Store interface on
// every decision; the decisions are the same.
type Direct struct {
	Table  *Table
	Clock  Clock
	Closed *atomic.Bool
}

// DirectOf returns the Direct of store when store is a memory store, or
// nil. Package memstore sets it when it is linked in; it recognises its
// own Store type exactly, so that a store wrapping one (and perhaps
// changing what its Take does) is never bypassed.
var DirectOf func(store any) *Direct
