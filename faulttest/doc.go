// Package faulttest is slidelog's fault suite: under steady load it causes
// real faults (kill -9, SIGSTOP, a busy script, a TCP proxy adding latency,
// holding or resetting, SCRIPT FLUSH, every node down, OOM, client
// cancellation, manual failover, live reshard) on a disposable Redis
// Cluster of its own processes, and measures what callers see. Run it with
//
//	go test -race -count=1 -v .
//
// from faulttest/; each scenario logs a line starting with "FAULT" with its
// figures. It needs redis-server and redis-cli: those on PATH, or the
// server SLIDELOG_REDIS_SERVER names and the redis-cli beside it.
package faulttest
