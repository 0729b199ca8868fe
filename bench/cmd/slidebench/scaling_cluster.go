package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
)

// scratchCluster is a Redis Cluster of masters only, started by this
// process on loopback for one measurement and stopped by stop.
type scratchCluster struct {
	*redistest.Cluster
	ports []int
	nodes []*redis.Client // one admin client per master
}

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// startCluster starts masters redis-server processes on ports
// base..base+masters-1 (each also using port+10000 for the cluster bus)
// with redistest, which spreads the 16384 slots evenly over them (slot
// ranges of i*16384/masters), joins them and waits until every node
// reports cluster_state:ok. The servers die with this process. On error,
// whatever was started is stopped again.
func startCluster(ctx context.Context, base, masters int) (*scratchCluster, error) {
	ports := make([]int, masters)
	for i := range ports {
		ports[i] = base + i
		if err := redistest.PortsFree(ports[i], ports[i]+10000); err != nil {
			return nil, fmt.Errorf("%w (pick another -base)", err)
		}
	}
	cl, err := redistest.ClusterConfig{Masters: masters, Ports: ports, NodeTimeout: 5 * time.Second}.Start(ctx)
	if err != nil {
		return nil, err
	}
	c := &scratchCluster{Cluster: cl, ports: ports}
	for _, n := range cl.Nodes {
		c.nodes = append(c.nodes, redis.NewClient(&redis.Options{Addr: n.Addr}))
	}
	return c, nil
}

// seeds returns the nodes' addresses, for a ClusterClient.
func (c *scratchCluster) seeds() []string { return c.Addrs() }

// stop closes the admin clients and stops every server of c, removing
// their directories.
func (c *scratchCluster) stop() error {
	var errs []error
	for _, n := range c.nodes {
		errs = append(errs, n.Close())
	}
	return errors.Join(append(errs, c.Stop())...)
}

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
