package redistest_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
)

// A server with extra configuration, a replica of it, Kill and Restart,
// and Stop, which leaves no process and no directory behind.
func TestStartServer(t *testing.T) {
	s := redistest.StartServer(t, redistest.ServerConfig{Args: []string{"--maxmemory", "4mb"}})
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	if got := c.ConfigGet(t.Context(), "maxmemory").Val()["maxmemory"]; got != "4194304" {
		t.Errorf("got maxmemory %q, want 4194304", got)
	}
	r := redistest.StartServer(t, redistest.ServerConfig{ReplicaOf: s.Addr})
	rc := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rc.Close()
	info := rc.Info(t.Context(), "replication").Val()
	if got := redistest.InfoField(info, "master_link_status"); got != "up" {
		t.Errorf("got master_link_status %q, want up", got)
	}

	s.Kill()
	select {
	case <-s.Exited():
	default:
		t.Fatal("Kill returned before the server exited")
	}
	if err := s.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(t.Context()).Err(); err != nil {
		t.Fatalf("after Restart: %v", err)
	}
	pid := s.Pid()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("process %d still there after Stop", pid)
	}
	if _, err := os.Stat(s.Dir); !os.IsNotExist(err) {
		t.Errorf("%s still there after Stop (%v)", s.Dir, err)
	}
	if err := redistest.PortsFree(s.Port); err != nil {
		t.Errorf("after Stop: %v", err)
	}
}

// A Cluster of two masters with a replica each serves every slot, and a
// Cluster client spreads keys over both masters.
func TestStartCluster(t *testing.T) {
	cl := redistest.StartCluster(t, redistest.ClusterConfig{Masters: 2, Replicas: 1})
	if len(cl.Nodes) != 4 {
		t.Fatalf("got %d nodes, want 4", len(cl.Nodes))
	}
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
	defer client.Close()
	for i := range 100 {
		if err := client.Set(t.Context(), "k"+string(rune('a'+i%26))+time.Duration(i).String(), i, 0).Err(); err != nil {
			t.Fatalf("SET: %v", err)
		}
	}
	for _, n := range cl.Nodes[:cl.Masters] {
		c := redis.NewClient(&redis.Options{Addr: n.Addr})
		if size := c.DBSize(t.Context()).Val(); size == 0 {
			t.Errorf("master %s holds no key of 100", n.Addr)
		}
		_ = c.Close()
	}
}

// Three Sentinels see the master and its replica.
func TestStartSentinels(t *testing.T) {
	s := redistest.StartSentinels(t, redistest.SentinelConfig{})
	if got := s.MasterAddr(t.Context()); got != s.Master.Addr {
		t.Errorf("got master %q, want %q", got, s.Master.Addr)
	}
	sc := redis.NewSentinelClient(&redis.Options{Addr: s.Sentinels[0].Addr})
	defer sc.Close()
	m, err := sc.Master(t.Context(), s.Name).Result()
	if err != nil {
		t.Fatal(err)
	}
	if m["down-after-milliseconds"] != "2000" || m["failover-timeout"] != "10000" || m["quorum"] != "2" {
		t.Errorf("got down-after %s ms, failover-timeout %s ms, quorum %s, want 2000, 10000, 2", m["down-after-milliseconds"], m["failover-timeout"], m["quorum"])
	}
	if err := s.Set(t.Context(), "failover-timeout", "12345"); err != nil {
		t.Fatal(err)
	}
	for _, n := range s.Sentinels {
		c := redis.NewSentinelClient(&redis.Options{Addr: n.Addr})
		m, err := c.Master(t.Context(), s.Name).Result()
		_ = c.Close()
		if err != nil || m["failover-timeout"] != "12345" {
			t.Errorf("sentinel %s after Set: failover-timeout %q (%v), want 12345", n.Addr, m["failover-timeout"], err)
		}
	}
	if err := s.Set(t.Context(), "no-such-option", "1"); err == nil {
		t.Error("Set of an unknown option: no error")
	}
}

// InfoPeriod sets each Sentinel's info-period, on Sentinels that have
// SENTINEL DEBUG (Redis 7.0 and later).
func TestStartSentinelsInfoPeriod(t *testing.T) {
	s := redistest.StartSentinels(t, redistest.SentinelConfig{Sentinels: 1, Quorum: 1, InfoPeriod: 700 * time.Millisecond})
	sc := redis.NewSentinelClient(&redis.Options{Addr: s.Sentinels[0].Addr})
	defer sc.Close()
	cmd := redis.NewSliceCmd(t.Context(), "sentinel", "debug")
	_ = sc.Process(t.Context(), cmd)
	v, err := cmd.Result()
	if err != nil && strings.Contains(strings.ToLower(err.Error()), "unknown") {
		t.Logf("this Sentinel has no SENTINEL DEBUG (%v): InfoPeriod is left out", err)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(v); i += 2 {
		if strings.EqualFold(fmt.Sprint(v[i]), "info-period") {
			if got := fmt.Sprint(v[i+1]); got != "700" {
				t.Errorf("info-period %s, want 700", got)
			}
			return
		}
	}
	t.Errorf("SENTINEL DEBUG names no info-period: %v", v)
}

// With SLIDELOG_SERVER_PORTS and SLIDELOG_SENTINEL_PORTS set, servers and
// Sentinels started without a port take one in those ranges (the ones
// set for the run, or else 20 free ports in a row from 21000 and 23000,
// below Linux's range of ephemeral ports, 32768-60999, where a busy test
// run's own connections leave few runs of 20 free); a range that is not
// one fails the start.
func TestPortRanges(t *testing.T) {
	lo, hi := portRange(t, redistest.EnvServerPorts, 21000)
	slo, shi := portRange(t, redistest.EnvSentinelPorts, 23000)
	for range 5 {
		p, err := redistest.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if p < lo || p > hi {
			t.Errorf("FreePort: got %d, want one in %d-%d", p, lo, hi)
		}
	}
	s := redistest.StartSentinels(t, redistest.SentinelConfig{Sentinels: 1, Quorum: 1})
	for _, n := range append([]*redistest.Server{s.Master}, s.Replicas...) {
		if n.Port < lo || n.Port > hi {
			t.Errorf("server on %d, want %d-%d", n.Port, lo, hi)
		}
	}
	if p := s.Sentinels[0].Port; p < slo || p > shi {
		t.Errorf("sentinel on %d, want %d-%d", p, slo, shi)
	}

	t.Setenv(redistest.EnvServerPorts, strconv.Itoa(lo))
	if _, err := (redistest.ServerConfig{}).Start(t.Context()); err == nil || !strings.Contains(err.Error(), "FROM-TO") {
		t.Errorf("got %v, want an error about the range", err)
	}
}

// portRange returns the range the variable env names, or else sets it to
// the first 20 free ports in a row from from on (for the test).
func portRange(t *testing.T, env string, from int) (lo, hi int) {
	t.Helper()
	if v := os.Getenv(env); v != "" {
		a, b, _ := strings.Cut(v, "-")
		lo, err1 := strconv.Atoi(a)
		hi, err2 := strconv.Atoi(b)
		if err1 != nil || err2 != nil {
			t.Fatalf("%s=%q is not a range FROM-TO", env, v)
		}
		return lo, hi
	}
	for p := from; p < from+2000; p += 20 {
		ok := true
		for q := p; q < p+20 && ok; q++ {
			ok = redistest.PortsFree(q) == nil
		}
		if ok {
			t.Setenv(env, strconv.Itoa(p)+"-"+strconv.Itoa(p+19))
			return p, p + 19
		}
	}
	t.Fatalf("no 20 free ports in a row from %d", from)
	return 0, 0
}
