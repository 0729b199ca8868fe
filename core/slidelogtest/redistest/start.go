package redistest

import (
	"os"
	"testing"
)

// RequireBinary returns Binary(name). When it is not there, the test
// fails, or under `go test -short` without EnvRequireRedis is skipped:
// `make test` never skips it.
func RequireBinary(t testing.TB, name string) string {
	t.Helper()
	bin, err := Binary(name)
	if err != nil {
		if testing.Short() && os.Getenv(EnvRequireRedis) == "" {
			t.Skipf("%s is needed for this test: %v", name, err)
		}
		t.Fatalf("%s is needed for this test: %v (scripts/redis-rig.sh install installs it; %s names another server)", name, err, EnvRedisServer)
	}
	return bin
}

// StartServer starts a server as cfg says (see ServerConfig.Start),
// stopped when the test ends, and fails the test if it cannot.
func StartServer(t testing.TB, cfg ServerConfig) *Server {
	t.Helper()
	if cfg.Bin == "" {
		cfg.Bin = RequireBinary(t, "redis-server")
	}
	s, err := cfg.Start(t.Context())
	if err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

// StartCluster starts a Redis Cluster as cfg says (see
// ClusterConfig.Start), stopped when the test ends, and fails the test
// if it cannot.
func StartCluster(t testing.TB, cfg ClusterConfig) *Cluster {
	t.Helper()
	if cfg.Bin == "" {
		cfg.Bin = RequireBinary(t, "redis-server")
	}
	c, err := cfg.Start(t.Context())
	if err != nil {
		t.Fatalf("start Redis Cluster: %v", err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	return c
}

// StartSentinels starts a Sentinel set as cfg says (see
// SentinelConfig.Start), stopped when the test ends, and fails the test
// if it cannot.
func StartSentinels(t testing.TB, cfg SentinelConfig) *Sentinels {
	t.Helper()
	if cfg.Bin == "" {
		cfg.Bin = RequireBinary(t, "redis-server")
	}
	s, err := cfg.Start(t.Context())
	if err != nil {
		t.Fatalf("start Sentinel set: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}
