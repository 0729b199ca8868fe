package redisstore_test

import (
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
)

// A refused connection is not slowness: the decision goes to the failure
// mode at once, with the reason "error", not "stalled" after the stall
// timeout (issue 18). The bound is half the stall timeout, far from it.
func TestRefusedConnectionIsAnError(t *testing.T) {
	for _, tc := range []struct {
		name   string
		client func(addr string) redis.UniversalClient
	}{
		{"standalone", func(addr string) redis.UniversalClient {
			return redis.NewClient(&redis.Options{Addr: addr})
		}},
		{"cluster", func(addr string) redis.UniversalClient {
			return redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}})
		}},
		{"unresolvable host", func(string) redis.UniversalClient {
			return redis.NewClient(&redis.Options{Addr: "no-such-host.invalid:6379"})
		}},
		{"unix socket, no listener", func(string) redis.UniversalClient {
			return redis.NewClient(&redis.Options{Network: "unix", Addr: closedUnixSocket(t)})
		}},
		{"unix socket, no file", func(string) redis.UniversalClient {
			return redis.NewClient(&redis.Options{Network: "unix", Addr: filepath.Join(t.TempDir(), "none.sock")})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := tc.client(closedAddr(t))
			t.Cleanup(func() { _ = client.Close() })
			store, err := redisstore.NewUnchecked(client) // New would refuse an unreachable server
			require.NoError(t, err)
			t.Cleanup(func() { _ = store.Close() })
			obs := &failovers{}
			l, err := slidelog.New(store, slidelog.PerMinute(10), slidelog.WithObserver(obs))
			require.NoError(t, err)
			t.Cleanup(func() { _ = l.Close() })
			for i := range 3 {
				start := time.Now()
				res, err := l.Allow(t.Context(), "k")
				took := time.Since(start)
				require.NoError(t, err)
				assert.Equal(t, slidelog.SourceFallback, res.Source, "decision %d", i)
				assert.Less(t, took, redisstore.DefaultStallTimeout/2, "decision %d waited for a refused connection", i)
			}
			obs.mu.Lock()
			defer obs.mu.Unlock()
			assert.Positive(t, obs.reasons["error"], "failovers by reason: %v", obs.reasons)
			assert.Zero(t, obs.reasons["stalled"], "failovers by reason: %v", obs.reasons)

			// With FailError the refusal is the caller's error: it says
			// "store unavailable" once, and why.
			strict, err := slidelog.New(store, slidelog.PerMinute(10), slidelog.WithName("strict"), slidelog.WithFailureMode(slidelog.FailError))
			require.NoError(t, err)
			t.Cleanup(func() { _ = strict.Close() })
			_, err = strict.Allow(t.Context(), "k")
			require.ErrorIs(t, err, slidelog.ErrUnavailable)
			assert.Equal(t, 1, strings.Count(err.Error(), "store unavailable"), "the error: %v", err)
			assert.Regexp(t, "dial|lookup", err.Error())
		})
	}
}

// failovers counts a limiter's failovers by reason.
type failovers struct {
	mu      sync.Mutex
	reasons map[string]int
}

func (o *failovers) Bind(string, func() slidelog.Gauges) (slidelog.LimiterObserver, error) {
	return o, nil
}
func (o *failovers) Decision(slidelog.Source, bool)             {}
func (o *failovers) StoreCall(string, time.Duration)            {}
func (o *failovers) Error(string)                               {}
func (o *failovers) BreakerState(string, slidelog.BreakerState) {}
func (o *failovers) Unbind()                                    {}
func (o *failovers) Failover(reason string, _ slidelog.FailureMode) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.reasons == nil {
		o.reasons = map[string]int{}
	}
	o.reasons[reason]++
}

// closedUnixSocket returns the path of a Unix socket file on which nothing
// listens: a connection to it is refused (ECONNREFUSED).
func closedUnixSocket(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "closed.sock")
	ln, err := net.Listen("unix", path)
	require.NoError(t, err)
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	require.NoError(t, ln.Close())
	return path
}
