package redisstore_test

import (
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A Cluster seed that accepts connections but never answers, listed with
// live seeds, is logged at WARN naming its address: go-redis, which tries
// the seeds in its own order to read the slot map, waits its ReadTimeout
// for it whenever it tries it first, and New starts either way.
func TestClusterMuteSeedIsLogged(t *testing.T) {
	live := redistest.ClusterClient(t).Options().Addrs
	mute := muteSeed(t)

	logs := &captured{}
	c := redis.NewClusterClient(redisstore.ClusterOptions(append([]string{mute}, live...)...))
	t.Cleanup(func() { _ = c.Close() })
	start := time.Now()
	s, err := redisstore.New(c, redisstore.WithLogger(slog.New(logs)))
	took := time.Since(start)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	t.Logf("New took %v", took)
	var warned []string
	for _, r := range logs.all() {
		if strings.Contains(r, "seed="+mute) {
			warned = append(warned, r)
		}
	}
	require.Len(t, warned, 1, "one record names the seed that did not answer; logged:\n%s", strings.Join(logs.all(), "\n"))
	assert.Contains(t, warned[0], "did not answer")
	for _, a := range live {
		assert.NotContains(t, strings.Join(logs.all(), "\n"), "seed="+a, "a live seed is named")
	}
}

// muteSeed listens on a free port (redistest.FreePort: in
// SLIDELOG_SERVER_PORTS when set) and accepts connections there, holding
// each open and never writing to it, until the test ends: a Cluster seed
// that accepts TCP but never answers. It returns the address.
func muteSeed(t *testing.T) string {
	t.Helper()
	var ln net.Listener
	var err error
	for range 5 {
		var port int
		port, err = redistest.FreePort()
		require.NoError(t, err)
		if ln, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
			break
		}
	}
	require.NoError(t, err, "a port for the silent seed")
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never written to
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}
