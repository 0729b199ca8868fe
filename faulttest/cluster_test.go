package faulttest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// node is one redis-server process of a disposable Cluster.
type node struct {
	port int
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

func (n *node) addr() string { return "127.0.0.1:" + strconv.Itoa(n.port) }

// cluster is a 3-master, 3-replica Redis Cluster of its own processes, on
// free ports in 7200-7299, killed when the test ends. Faults on it never
// touch the shared rig.
type cluster struct {
	t     *testing.T
	nodes []*node
}

func requireTools(t *testing.T) {
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			if os.Getenv("SLIDELOG_REQUIRE_REDIS") != "" {
				t.Fatalf("%s not found: the fault suite starts its own Redis Cluster", bin)
			}
			t.Skipf("%s not found: the fault suite starts its own Redis Cluster", bin)
		}
	}
}

func portFree(p int) bool {
	for _, q := range []int{p, p + 10000} {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(q))
		if err != nil {
			return false
		}
		_ = l.Close()
	}
	return true
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	requireTools(t)
	c := &cluster{t: t}
	base := t.TempDir()
	for p := 7200; p < 7300 && len(c.nodes) < 6; p++ {
		if !portFree(p) {
			continue
		}
		n := &node{port: p, dir: filepath.Join(base, strconv.Itoa(p))}
		if err := os.MkdirAll(n.dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := c.start(n); err != nil {
			continue // lost a race for the port
		}
		c.nodes = append(c.nodes, n)
	}
	t.Cleanup(c.stopAll)
	if len(c.nodes) < 6 {
		t.Fatalf("found %d free ports in 7200-7299, want 6", len(c.nodes))
	}
	args := []string{"--cluster", "create"}
	for _, n := range c.nodes {
		args = append(args, n.addr())
	}
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	c.waitHealthy(30 * time.Second)
	return c
}

func (c *cluster) start(n *node) error {
	n.cmd = exec.Command("redis-server",
		"--port", strconv.Itoa(n.port), "--bind", "127.0.0.1", "--dir", n.dir,
		"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", "2000", "--cluster-require-full-coverage", "no", "--cluster-replica-validity-factor", "0",
		"--enable-debug-command", "local", "--save", "", "--appendonly", "no",
		"--maxmemory-policy", "noeviction", "--logfile", filepath.Join(n.dir, "redis.log"))
	if err := n.cmd.Start(); err != nil {
		return err
	}
	raisePriority(n.cmd.Process.Pid)
	n.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(n.cmd, n.done)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-n.done:
			return fmt.Errorf("redis-server on %d exited", n.port)
		default:
		}
		if _, err := c.cli(n, "PING"); err == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("redis-server on %d does not answer", n.port)
}

// cli runs one command on n with redis-cli and returns its output.
func (c *cluster) cli(n *node, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "redis-cli", append([]string{"-p", strconv.Itoa(n.port)}, args...)...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func (c *cluster) signal(n *node, sig syscall.Signal) {
	c.t.Helper()
	if err := n.cmd.Process.Signal(sig); err != nil {
		c.t.Fatalf("signal %v to %d: %v", sig, n.port, err)
	}
}

// kill kills n with SIGKILL and waits for it to exit.
func (c *cluster) kill(n *node) {
	c.signal(n, syscall.SIGKILL)
	<-n.done
}

// restart starts n again on its port and directory (it rejoins the Cluster
// from its nodes.conf).
func (c *cluster) restart(n *node) {
	c.t.Helper()
	if err := c.start(n); err != nil {
		c.t.Fatalf("restart %d: %v", n.port, err)
	}
}

func (c *cluster) stopAll() {
	for _, n := range c.nodes {
		if n.cmd == nil || n.cmd.Process == nil {
			continue
		}
		select {
		case <-n.done:
			continue
		default:
		}
		_ = n.cmd.Process.Signal(syscall.SIGCONT)
		_ = n.cmd.Process.Kill()
		<-n.done
	}
}

func (c *cluster) addrs() []string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, n.addr())
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
		if r["role"] == "slave" && r["master_port"] == strconv.Itoa(master.port) {
			return n
		}
	}
	return nil
}

func (c *cluster) byAddr(addr string) *node {
	for _, n := range c.nodes {
		if n.addr() == addr {
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
					n.port, ci["cluster_state"], ci["cluster_slots_ok"], r["role"], r["master_port"], r["master_link_status"], r["connected_slaves"])
			}
			c.t.Fatalf("cluster not healthy after %v:%s", d, state.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ownsNoSlot reports whether the slot map, as survivor sees it, gives no
// slot to dead.
func (c *cluster) ownsNoSlot(survivor, dead *node) bool {
	client := redis.NewClient(&redis.Options{Addr: survivor.addr(), DialTimeout: time.Second, ReadTimeout: time.Second})
	defer client.Close()
	slots, err := client.ClusterSlots(context.Background()).Result() //nolint:staticcheck // the slot ranges are what this helper needs; Redis 7.0 serves both
	if err != nil {
		return false
	}
	for _, s := range slots {
		if len(s.Nodes) > 0 && s.Nodes[0].Addr == dead.addr() {
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

// raisePriority gives a Redis process of the fault cluster a CPU priority
// above the test's own (nice -10, when the test may: root), as a Redis on
// a machine of its own would have: the suite must pass beside a CPU hog
// that saturates the client machine, and here the client machine is the
// Redis machine too. Without the privilege it changes nothing.
func raisePriority(pid int) {
	_ = syscall.Setpriority(syscall.PRIO_PROCESS, pid, -10)
}
