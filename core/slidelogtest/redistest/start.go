package redistest

import (
	"context"
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
	return started(t, "redis-server", &cfg.Bin, func(ctx context.Context) (*Server, error) { return cfg.Start(ctx) })
}

// StartCluster starts a Redis Cluster as cfg says (see
// ClusterConfig.Start), stopped when the test ends, and fails the test
// if it cannot.
func StartCluster(t testing.TB, cfg ClusterConfig) *Cluster {
	t.Helper()
	return started(t, "Redis Cluster", &cfg.Bin, func(ctx context.Context) (*Cluster, error) { return cfg.Start(ctx) })
}

// StartSentinels starts a Sentinel set as cfg says (see
// SentinelConfig.Start), stopped when the test ends, and fails the test
// if it cannot.
func StartSentinels(t testing.TB, cfg SentinelConfig) *Sentinels {
	t.Helper()
	return started(t, "Sentinel set", &cfg.Bin, func(ctx context.Context) (*Sentinels, error) { return cfg.Start(ctx) })
}

// started sets *bin to the server binary (RequireBinary) if it is empty,
// then calls start (which reads it), fails the test if it returns an error, and stops what it
// started when the test ends.
func started[T interface{ Stop() error }](t testing.TB, what string, bin *string, start func(context.Context) (T, error)) T {
	t.Helper()
	if *bin == "" {
		*bin = RequireBinary(t, "redis-server")
	}
	v, err := start(t.Context())
	if err != nil {
		t.Fatalf("start %s: %v", what, err)
	}
	t.Cleanup(func() { _ = v.Stop() })
	return v
}
