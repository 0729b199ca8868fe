package faulttest

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
)

// node is one redis-server process of a disposable Cluster or Sentinel
// set.
type node = redistest.Server

// cluster is a 3-master, 3-replica Redis Cluster of its own processes, on
// free ports in 7200-7299, killed when the test ends. Faults on it never
// touch the shared rig.
type cluster struct {
	t      *testing.T
	nodes  []*node
	cliBin string // redis-cli
}

// startCluster starts the fault Cluster with redistest: nodes with
// DEBUG, a node timeout of 2 s, replicas that may always fail over, no
// full coverage required, and a CPU priority above the test's.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	c := &cluster{t: t, cliBin: redistest.RequireBinary(t, "redis-cli")}
	ports, err := redistest.FreeClusterPorts(7200, 7299, 6)
	if err != nil {
		t.Fatal(err)
	}
	rc := redistest.StartCluster(t, redistest.ClusterConfig{
		Masters: 3, Replicas: 1, Ports: ports, NodeTimeout: 2 * time.Second,
		Args: []string{"--cluster-require-full-coverage", "no", "--cluster-replica-validity-factor", "0",
			"--maxmemory-policy", "noeviction"},
		Debug: true, RaisePriority: true,
	})
	c.nodes = rc.Nodes
	c.waitHealthy(30 * time.Second)
	return c
}

// cli runs one command on n with redis-cli and returns its output.
func (c *cluster) cli(n *node, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, c.cliBin, append([]string{"-p", strconv.Itoa(n.Port)}, args...)...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func (c *cluster) signal(n *node, sig syscall.Signal) {
	c.t.Helper()
	if err := n.Signal(sig); err != nil {
		c.t.Fatalf("signal %v to %d: %v", sig, n.Port, err)
	}
}

// kill kills n with SIGKILL and waits for it to exit.
func (c *cluster) kill(n *node) { n.Kill() }

// restart starts n again on its port and directory (it rejoins the Cluster
// from its nodes.conf).
func (c *cluster) restart(n *node) {
	c.t.Helper()
	if err := n.Restart(context.Background()); err != nil {
		c.t.Fatalf("restart %d: %v", n.Port, err)
	}
}

func (c *cluster) addrs() []string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, n.Addr)
	}
	return out
}

// info returns the fields of CLUSTER INFO or INFO replication on n.
func (c *cluster) info(n *node, args ...string) map[string]string {
	out, err := c.cli(n, args...)
	m := make(map[string]string)
	if err != nil {
		return m
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":"); ok {
			m[k] = v
		}
	}
	return m
}

// masters returns the nodes that are masters now, by INFO replication.
func (c *cluster) masters() []*node {
	var out []*node
	for _, n := range c.nodes {
		if c.info(n, "INFO", "replication")["role"] == "master" {
			out = append(out, n)
		}
	}
	return out
}

func (c *cluster) replicaOf(master *node) *node {
	for _, n := range c.nodes {
		r := c.info(n, "INFO", "replication")
		if r["role"] == "slave" && r["master_port"] == strconv.Itoa(master.Port) {
			return n
		}
	}
	return nil
}

func (c *cluster) byAddr(addr string) *node {
	for _, n := range c.nodes {
		if n.Addr == addr {
			return n
		}
	}
	return nil
}

// healthy reports whether every node answers with cluster_state:ok, three
// masters own all slots and every master has a connected replica.
func (c *cluster) healthy() bool {
	for _, n := range c.nodes {
		ci := c.info(n, "CLUSTER", "INFO")
		if ci["cluster_state"] != "ok" || ci["cluster_slots_ok"] != "16384" {
			return false
		}
	}
	ms := c.masters()
	if len(ms) != 3 {
		return false
	}
	for _, m := range ms {
		if c.info(m, "INFO", "replication")["connected_slaves"] != "1" {
			return false
		}
	}
	for _, n := range c.nodes {
		if r := c.info(n, "INFO", "replication"); r["role"] == "slave" && r["master_link_status"] != "up" {
			return false
		}
	}
	return true
}

func (c *cluster) waitHealthy(d time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for !c.healthy() {
		if time.Now().After(deadline) {
			var state strings.Builder
			for _, n := range c.nodes {
				ci, r := c.info(n, "CLUSTER", "INFO"), c.info(n, "INFO", "replication")
				fmt.Fprintf(&state, "\n%d: cluster_state=%s slots_ok=%s role=%s master_port=%s link=%s connected_slaves=%s",
					n.Port, ci["cluster_state"], ci["cluster_slots_ok"], r["role"], r["master_port"], r["master_link_status"], r["connected_slaves"])
			}
			c.t.Fatalf("cluster not healthy after %v:%s", d, state.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ownsNoSlot reports whether the slot map, as survivor sees it, gives no
// slot to dead.
func (c *cluster) ownsNoSlot(survivor, dead *node) bool {
	client := redis.NewClient(&redis.Options{Addr: survivor.Addr, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer client.Close()
	slots, err := client.ClusterSlots(context.Background()).Result() //nolint:staticcheck // the slot ranges are what this helper needs; Redis 7.0 serves both
	if err != nil {
		return false
	}
	for _, s := range slots {
		if len(s.Nodes) > 0 && s.Nodes[0].Addr == dead.Addr {
			return false
		}
	}
	return len(slots) > 0
}

// nodeID returns n's cluster node ID.
func (c *cluster) nodeID(n *node) string {
	out, _ := c.cli(n, "CLUSTER", "MYID")
	return out
}
