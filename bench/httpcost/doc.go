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
// the memory store's, not the middleware's. Run them from the bench
// module with
//
//	go test -run '^$' -bench 'ServeHTTP|Allow' -benchmem -count 6 ./httpcost
//	go test -run '^$' -bench Loopback -count 3 ./httpcost
//
// and compare the rows of one run (benchstat).
package httpcost
