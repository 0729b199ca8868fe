package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// scratchCluster is a Redis Cluster of masters only, started by this
// process on loopback for one measurement and stopped by stop.
type scratchCluster struct {
	dir   string
	ports []int
	procs []*exec.Cmd
	nodes []*redis.Client // one admin client per master
}

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// startCluster starts masters redis-server processes on ports
// base..base+masters-1 (each also using port+10000 for the cluster bus),
// spreads the 16384 slots evenly over them with CLUSTER ADDSLOTSRANGE
// (redis-cli --cluster create wants at least 3 masters), joins them with
// CLUSTER MEET and waits until every node reports cluster_state:ok. On
// error, whatever was started is stopped again.
func startCluster(ctx context.Context, base, masters int) (_ *scratchCluster, err error) {
	dir, err := os.MkdirTemp("", "slidebench-scaling-")
	if err != nil {
		return nil, err
	}
	c := &scratchCluster{dir: dir}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.stop())
		}
	}()
	for i := range masters {
		port := base + i
		if err := portsFree(port, port+10000); err != nil {
			return c, err
		}
		nodeDir := filepath.Join(dir, strconv.Itoa(port))
		if err := os.Mkdir(nodeDir, 0o755); err != nil {
			return c, err
		}
		cmd := exec.Command("redis-server",
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "5000",
			"--save", "", "--appendonly", "no", "--dir", nodeDir,
			"--logfile", filepath.Join(nodeDir, "redis.log"))
		cmd.Dir = nodeDir
		cmd.SysProcAttr = childProcAttr()
		if err := cmd.Start(); err != nil {
			return c, fmt.Errorf("redis-server on %d: %w", port, err)
		}
		c.ports = append(c.ports, port)
		c.procs = append(c.procs, cmd)
		c.nodes = append(c.nodes, redis.NewClient(&redis.Options{Addr: addr(port)}))
	}
	for i, n := range c.nodes {
		if err := waitFor(ctx, 10*time.Second, func() error { return n.Ping(ctx).Err() }); err != nil {
			return c, fmt.Errorf("redis-server on %d did not answer: %w (log in %s)", c.ports[i], err, c.dir)
		}
	}
	for i, n := range c.nodes {
		lo, hi := i*clusterSlots/masters, (i+1)*clusterSlots/masters-1
		if err := n.ClusterAddSlotsRange(ctx, lo, hi).Err(); err != nil {
			return c, fmt.Errorf("CLUSTER ADDSLOTSRANGE %d %d on %d: %w", lo, hi, c.ports[i], err)
		}
		if i > 0 {
			if err := c.nodes[0].ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(c.ports[i])).Err(); err != nil {
				return c, fmt.Errorf("CLUSTER MEET %d: %w", c.ports[i], err)
			}
		}
	}
	for i, n := range c.nodes {
		err := waitFor(ctx, 30*time.Second, func() error {
			info, err := n.ClusterInfo(ctx).Result()
			if err != nil {
				return err
			}
			if infoField(info, "cluster_state") != "ok" || infoField(info, "cluster_known_nodes") != strconv.Itoa(masters) {
				return fmt.Errorf("cluster_state %s, %s nodes known", infoField(info, "cluster_state"), infoField(info, "cluster_known_nodes"))
			}
			return nil
		})
		if err != nil {
			return c, fmt.Errorf("cluster of %d masters, node %d: %w", masters, c.ports[i], err)
		}
	}
	return c, nil
}

// seeds returns the nodes' addresses, for a ClusterClient.
func (c *scratchCluster) seeds() []string {
	out := make([]string, len(c.ports))
	for i, p := range c.ports {
		out[i] = addr(p)
	}
	return out
}

// stop stops every server of c (SIGTERM, then SIGKILL after 5 s) and
// removes their directory.
func (c *scratchCluster) stop() error {
	var errs []error
	for _, n := range c.nodes {
		_ = n.Close()
	}
	for _, p := range c.procs {
		_ = p.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			errs = append(errs, p.Process.Kill())
			<-done
		}
	}
	errs = append(errs, os.RemoveAll(c.dir))
	return errors.Join(errs...)
}

// portsFree fails when something listens on one of ports on loopback.
func portsFree(ports ...int) error {
	for _, p := range ports {
		l, err := net.Listen("tcp", addr(p))
		if err != nil {
			return fmt.Errorf("port %d is taken (pick another -base): %w", p, err)
		}
		_ = l.Close()
	}
	return nil
}

func addr(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// waitFor calls f every 50 ms until it returns nil, for at most d.
func waitFor(ctx context.Context, d time.Duration, f func() error) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-t.C:
		}
	}
}

// infoSection parses the "name:value" lines of an INFO reply.
func infoSection(info string) map[string]string {
	out := map[string]string{}
	for line := range strings.SplitSeq(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && !strings.HasPrefix(k, "#") {
			out[k] = v
		}
	}
	return out
}
