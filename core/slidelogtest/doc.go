// Package slidelogtest is slidelog's test kit: the conformance suites that
// every Store and every HTTP adapter must pass, a clock that tests move by
// hand, and helpers that connect to the Redis servers the repository's
// Makefile starts.
//
// For testing your own handlers behind the middleware: SetClientIP gives a
// test request its client address (so requests get their own budgets, and
// one built with http.NewRequest gets one at all), Clock with
// slidelog.WithClock moves a store's time by hand, and
// ParseRateLimitHeaders, AssertRateLimited and AssertAdmitted read and
// check the rate-limit header fields of a response. docs/testing.md has
// complete tests for chi and gin.
//
// A test that needs Redis finds it through SLIDELOG_REDIS_ADDR (standalone,
// host:port) and SLIDELOG_CLUSTER_ADDRS (Cluster, comma-separated). When
// they are unset the test fails with the command that starts the servers
// (`make cluster-up`); under `go test -short` it is skipped instead, unless
// SLIDELOG_REQUIRE_REDIS is set.
package slidelogtest
