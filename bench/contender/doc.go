// Package contender wraps slidelog and its Go peers behind one interface,
// so that the benchmark harness (cmd/slidebench) and the go test
// benchmarks of this package drive them all the same way: one decision
// per call, for one key, at cost 1.
//
// It lives in the bench module, whose go.mod is the only one that names
// the peers.
package contender
