// Package memory holds the go test benchmarks of slidelog's in-memory
// store (core/memstore) against sethvargo/go-limiter's memorystore: ns and
// allocations per decision, admitted and denied, on one goroutine and in
// parallel; an admission on a key with history, where users meet the
// store (BenchmarkAdmitWithHistory: 10,000 keys, a one-hour window, about
// 120 admissions per key in its log, with 1, one per core, 16 and 64
// callers, and the CPU per decision); and the bytes of state a key costs.
// Run them with
//
//	go test -run '^$' -bench . -benchmem -count 5 ./memory
//
// from the bench module. The machine they ran on and the comparison are
// in docs/benchmarks.md; compare rows of one run only.
package memory
