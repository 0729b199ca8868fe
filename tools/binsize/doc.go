// Package binsize holds three small programs whose binaries show what
// each use of slidelog links, and a test that builds them:
//
//   - memory: a limiter on the memory store, nothing else;
//   - redis: a limiter on a Redis store;
//   - chimemory: a chi app with slidechi.LimitByIP, in memory.
//
// The test fails when a memory-only program links go-redis or the
// Prometheus client, and logs each binary's size and modules:
//
//	cd tools/binsize && go test -v .
package binsize
