package redisstore_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// serverBin is the redis-server binary the tests that start their own
// servers run: SLIDELOG_REDIS_SERVER, or redis-server on the PATH.
func serverBin(t *testing.T) string {
	t.Helper()
	name := os.Getenv("SLIDELOG_REDIS_SERVER")
	if name == "" {
		name = "redis-server"
	}
	bin, err := exec.LookPath(name)
	require.NoError(t, err, "%s is needed for this test", name)
	return bin
}

// process is a server a test started, stopped at the test's end.
type process struct {
	addr string
	cmd  *exec.Cmd
}

// startProcess runs bin with args (the port and directory added) on a
// free loopback port and waits until it answers PING.
func startProcess(t *testing.T, bin string, args ...string) *process {
	t.Helper()
	port := freePort(t)
	dir := t.TempDir()
	args = append(args, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	log, err := os.Create(filepath.Join(dir, "log"))
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = log, log
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cancel(); _ = cmd.Wait(); _ = log.Close() })
	p := &process{addr: fmt.Sprintf("127.0.0.1:%d", port), cmd: cmd}
	c := redis.NewClient(&redis.Options{Addr: p.addr})
	defer c.Close()
	require.Eventually(t, func() bool { return c.Ping(t.Context()).Err() == nil }, 10*time.Second, 20*time.Millisecond,
		"%s on port %d does not answer", bin, port)
	return p
}

// startRedis starts a redis-server (serverBin) without persistence.
func startRedis(t *testing.T, args ...string) *process {
	t.Helper()
	return startProcess(t, serverBin(t), append([]string{"--save", "", "--appendonly", "no"}, args...)...)
}

// sentinelBed is one master, one replica and three Sentinels monitoring
// them as "mymaster", each a real process.
type sentinelBed struct {
	master, replica *process
	sentinels       []*process
}

// startSentinelBed starts a sentinelBed and waits until every Sentinel
// knows the master and its replica.
func startSentinelBed(t *testing.T) *sentinelBed {
	t.Helper()
	bin, err := exec.LookPath("redis-sentinel")
	require.NoError(t, err, "redis-sentinel is needed for this test")
	b := &sentinelBed{master: startRedis(t)}
	_, mport, _ := net.SplitHostPort(b.master.addr)
	b.replica = startRedis(t, "--replicaof", "127.0.0.1", mport)
	for range 3 {
		conf := filepath.Join(t.TempDir(), "sentinel.conf")
		require.NoError(t, os.WriteFile(conf, []byte(fmt.Sprintf(
			"sentinel monitor mymaster 127.0.0.1 %s 2\nsentinel down-after-milliseconds mymaster 2000\nsentinel failover-timeout mymaster 10000\n", mport)), 0o600))
		b.sentinels = append(b.sentinels, startProcess(t, bin, conf))
	}
	for _, s := range b.sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: s.addr})
		require.Eventually(t, func() bool {
			rs, err := sc.Replicas(t.Context(), "mymaster").Result()
			ss, serr := sc.Sentinels(t.Context(), "mymaster").Result()
			return err == nil && len(rs) == 1 && serr == nil && len(ss) == 2
		}, 20*time.Second, 50*time.Millisecond, "sentinel %s does not see the replica and the other sentinels", s.addr)
		_ = sc.Close()
	}
	return b
}

// url is the bed's redis+sentinel:// URL.
func (b *sentinelBed) url() string {
	u := "redis+sentinel://"
	for i, s := range b.sentinels {
		if i > 0 {
			u += ","
		}
		u += s.addr
	}
	return u + "/mymaster"
}

// masterAddr is the master's address by the first Sentinel.
func (b *sentinelBed) masterAddr(t *testing.T) string {
	t.Helper()
	sc := redis.NewSentinelClient(&redis.Options{Addr: b.sentinels[0].addr})
	defer sc.Close()
	a, err := sc.GetMasterAddrByName(t.Context(), "mymaster").Result()
	require.NoError(t, err)
	return net.JoinHostPort(a[0], a[1])
}
