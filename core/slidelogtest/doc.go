// Package slidelogtest is slidelog's test kit: the conformance suites that
// every Store and every HTTP adapter must pass, a clock that tests move
// by hand, NewLimiter (a limiter closed when the test ends), and
// CheckWindows, an independent checker of a sliding-window limit that
// trusts only the times of the admissions. Package redistest connects
// tests to the Redis servers the repository's Makefile starts, and starts
// servers, Clusters and Sentinel sets of a test's own.
//
// For testing your own handlers behind the middleware: SetClientIP gives a
// test request its client address (so requests get their own budgets, and
// one built with http.NewRequest gets one at all), Clock with
// memstore.WithClock moves a store's time by hand, and
// ParseRateLimitHeaders, AssertRateLimited and AssertAdmitted read and
// check the rate-limit header fields of a response. For gRPC and Connect
// services, which are keyed by the client's address, NewPeerListener wraps
// a test listener (grpc-go's bufconn, an httptest server's) so that each
// test client dials from an address of its own. docs/testing.md has
// complete tests for chi, gin, fiber, gRPC and Connect.
package slidelogtest
