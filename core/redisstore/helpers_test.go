package redisstore_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
)

// topology is a Redis deployment of the rig a test runs against.
type topology struct {
	name   string
	client redis.UniversalClient
}

// topologies returns the rig's standalone server and its Cluster, in that
// order.
func topologies(t *testing.T) []topology {
	t.Helper()
	return []topology{{"Standalone", redistest.RedisClient(t)}, {"Cluster", redistest.ClusterClient(t)}}
}

// topologyClients returns the clients of the rig's standalone server and
// its Cluster by name ("Standalone", "Cluster"), for tests that range over
// them in no set order.
func topologyClients(t *testing.T) map[string]redis.UniversalClient {
	t.Helper()
	return map[string]redis.UniversalClient{
		"Standalone": redistest.RedisClient(t),
		"Cluster":    redistest.ClusterClient(t),
	}
}

// testClock is a slidelogtest.Clock that also remembers where it started,
// so that a test can set it to a time from the start.
type testClock struct {
	*slidelogtest.Clock
	start time.Time
}

// newTestClock returns a clock standing at start.
func newTestClock(start time.Time) *testClock {
	return &testClock{Clock: slidelogtest.NewClock(start), start: start}
}

// Set moves the clock to its start plus d.
func (c *testClock) Set(d time.Duration) { c.Advance(c.start.Add(d).Sub(c.Now())) }

// seqRequests returns a function that gives, at each call, a request of
// cost 1 for key "k" of namespace under policies, with the IDs 1, 2, 3
// and on.
func seqRequests(namespace string, policies ...slidelog.Policy) func() slidelog.Request {
	id := uint64(0)
	return func() slidelog.Request {
		id++
		return slidelog.Request{Namespace: namespace, Key: "k", Cost: 1, Policies: policies, ID: id}
	}
}

// takeAllowed takes req() on s n times and requires every take to be
// admitted.
func takeAllowed(t *testing.T, s *redisstore.Store, n int, req func() slidelog.Request) {
	t.Helper()
	for range n {
		res, err := s.Take(t.Context(), req())
		require.NoError(t, err)
		require.True(t, res.Allowed)
	}
}

// fullestWindow checks every window of length window that ends at one of
// as's admissions, taking as in its order and each window over as up to
// its end: it returns the most units one held, and the end of the last
// that held more than limit (zero if none did).
func fullestWindow(as []slidelogtest.Admission, window time.Duration, limit int) (most int, lastOver time.Time) {
	for i, a := range as {
		units := 0
		for _, b := range as[:i+1] {
			if b.Start.After(a.Start.Add(-window)) {
				units += b.Cost
			}
		}
		most = max(most, units)
		if units > limit {
			lastOver = a.Start
		}
	}
	return most, lastOver
}

// scriptVariant is a Redis deployment of the rig and the script a test
// runs on it: legacy is the script variant for Redis 6.2.
type scriptVariant struct {
	name   string
	client redis.UniversalClient
	legacy bool
}

// scriptVariants returns the rig's standalone server and its Cluster on
// the current script, and the standalone server on the legacy script, in
// that order.
func scriptVariants(t *testing.T) []scriptVariant {
	t.Helper()
	return []scriptVariant{
		{"Standalone", redistest.RedisClient(t), false},
		{"Cluster", redistest.ClusterClient(t), false},
		{"Legacy", redistest.RedisClient(t), true},
	}
}

// newVariantStore returns newRedisStore(t, v.client, opts...), made to
// run the legacy script if v is the Legacy variant.
func newVariantStore(t *testing.T, v scriptVariant, opts ...redisstore.Option) *redisstore.Store {
	t.Helper()
	s := newRedisStore(t, v.client, opts...)
	if v.legacy {
		redisstore.UseLegacyScript(s)
	}
	return s
}
