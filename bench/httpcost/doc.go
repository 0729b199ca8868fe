// Package httpcost measures what rate-limiting middleware adds to a
// request: one chi route served three ways, with no limiter, with
// go-chi/httprate (LimitByIP, its default key and headers) and with
// slidelog's chi adapter (slidechi.LimitByIP: the default key, the client
// IP, and the default IETF RateLimit headers, on a memory store), every
// request admitted. The cost of a limiter is its time per request minus
// that of the route without one, measured in the same run.
//
// Both limiters get a quota no run reaches, so that both admit every
// request and do the same work, a count per client and its headers: a
// billion requests per rolling hour per client. httprate counts it in its
// two fixed one-hour windows; slidelog in the buckets a user sets for a
// quota that large (Policy.Precision of one minute, 60 buckets per
// client), since an exact log of a billion entries per client is what
// Precision exists to avoid.
//
// BenchmarkServeHTTP calls the router's ServeHTTP in process with
// realistic requests (RemoteAddr set, the headers a client sends, 1,024
// client addresses) and a fresh response header per request, as net/http
// gives each. BenchmarkLoopback serves the router on 127.0.0.1 and sends
// it requests over 64 keep-alive connections, with wrk when it is
// installed (then the server's CPU per request is reported too, as
// getrusage of this process, which wrk is not part of), else with a Go
// client in this process. BenchmarkAllow is slidelog's limiter decision
// alone, on the same policy and keys: the part of slidelog's cost that is
// the memory store's, not the middleware's.
//
// The in-process benchmarks run with one goroutine (serial), one per core
// (parallel), and 16 and 64 goroutines (16-callers, 64-callers; the
// callers metric says how many ran); BenchmarkServeHTTP also runs on one
// goroutine in a process that serves the router to 64 open keep-alive
// connections (serial-64conns), the state of the server the issue
// measured. Their rows report cpu-ns/op beside ns/op: the process's CPU
// time per request (getrusage), which other work on the machine moves
// less than wall time, and which does not depend on how the callers share
// the cores; and the garbage collector's cycles per 1,000 requests
// (gc/kop) and CPU per request (gc-cpu-ns/op), which at a process's first
// few megabytes of heap depend on what else the process keeps. -count repeats each row before the next, so to
// interleave the three ways, run the compiled test several times, from
// the bench module:
//
//	go test -c -o /tmp/httpcost.test ./httpcost
//	for i in $(seq 10); do /tmp/httpcost.test -test.run '^$' -test.bench 'ServeHTTP|Allow' -test.benchmem; done
//	for i in $(seq 6); do /tmp/httpcost.test -test.run '^$' -test.bench 'Loopback/wrk'; done
//
// and take each limiter's cost per round, its row minus the no-limiter
// row of the same round. docs/benchmarks.md has the results.
package httpcost
