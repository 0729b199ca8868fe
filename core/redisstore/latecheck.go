package redisstore

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// New checks the masters that answer it. A master it could not check (a
// Cluster master down at New, every server under WithStartUnreachable)
// and one it never saw (a replica promoted since, a master added to the
// Cluster) is checked when a reading of the canaries first finds it
// answering, once: the commands the store runs (a master whose user may
// not run one, or that does not know one, is logged at ERROR: its
// decisions fail and go to the limiter's failure mode), its
// maxmemory-policy, and, with WithReplicaAck, its replicas, each logged
// as New logs it. The check has a second of its own, as New's checks do,
// not what is left of the reading's; one that still runs out of time is
// not logged and runs again at the next reading, up to lateTries times,
// the last logged whatever it found.

// lateTries is how many readings may try a master's late check before the
// store logs what the last one found, even cut short.
const lateTries = 3

// checkedAt records the masters New checked, by address.
func (c *canaries) checkedAt(nodes []string) {
	for _, n := range nodes {
		c.checked[n] = true
	}
}

// checkedNodes returns the addresses of the masters New checked: those of
// masters on a Cluster, otherwise those the canaries name.
func (s *Store) checkedNodes(ctx context.Context, masters []*redis.Client) []string {
	var out []string
	if _, ok := s.client.(*redis.ClusterClient); ok {
		for _, m := range masters {
			out = append(out, m.Options().Addr)
		}
		return out
	}
	for _, t := range s.canaryTargets(ctx) {
		out = append(out, t.node)
	}
	return out
}

// lateCheck checks the master of t, which New did not check, once (see
// above). It runs on the reading of the canaries, which owns checked.
func (s *Store) lateCheck(ctx context.Context, t canaryTarget) {
	c := s.canary
	if t.node == "" || c.checked[t.node] {
		return
	}
	node := s.nodeClient(ctx, t)
	if node == nil {
		return // not found in the slot map now: the next reading
	}
	ctx, cancel := context.WithTimeout(c.ctx, checkTimeout)
	defer cancel()
	addr := nodeName(t.node)
	check, tag := commandCheck{addr: addr}, checkTag
	if cl, ok := s.client.(*redis.ClusterClient); ok {
		tag, check.err = masterTag(ctx, cl, t.node)
	}
	if check.err == nil {
		check.refused, _, check.err = s.checkCommands(ctx, node, addr, tag, s.pipes.ack != nil)
	}
	cfgErr := checkConfig(ctx, s.client, []*redis.Client{node})
	if ctx.Err() != nil && c.lateTries[t.node]+1 < lateTries {
		c.lateTries[t.node]++ // cut short: the next reading checks it again
		return
	}
	c.checked[t.node] = true
	delete(c.lateTries, t.node)
	if cannotRun(check.err) {
		s.logger.Error("redisstore: a master that New did not check (down at New, or promoted or added since) cannot run the store's commands: its decisions fail and go to the limiter's failure mode",
			"node", addr, "error", check.err)
	} else {
		logCommandCheck(s.logger, check)
	}
	logConfigCheck(s.logger, cfgErr)
	s.checkReplicas(ctx, s.logger, []*redis.Client{node})
}

// nodeClient returns the client of t's master alone: on a Cluster the
// master's own client from the client's slot map (nil when it is not
// there), otherwise t's.
func (s *Store) nodeClient(ctx context.Context, t canaryTarget) *redis.Client {
	cl, ok := s.client.(*redis.ClusterClient)
	if !ok {
		c, _ := t.client.(*redis.Client)
		return c
	}
	var mu sync.Mutex
	var node *redis.Client
	_ = cl.ForEachMaster(ctx, func(_ context.Context, m *redis.Client) error {
		if m.Options().Addr == t.node {
			mu.Lock()
			node = m
			mu.Unlock()
		}
		return nil
	})
	return node
}
