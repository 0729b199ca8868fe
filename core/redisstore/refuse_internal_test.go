package redisstore

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// replyError is an error reply of a server's, as go-redis returns it.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

// A Cluster client routes a key whose slot has no master to any node it
// knows, and it may know one server by two addresses (a seed's and the
// slot map's): the node that replies CLUSTERDOWN may not be the one the
// call's batcher is named after. The batcher that sent the call goes to
// the failure mode all the same, and no other.
func TestCannotServeRefusesTheSendingBatcher(t *testing.T) {
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	defer client.Close()
	p := newPipelines(client, 1, nil, DefaultStallTimeout, nil)
	sender := p.batcher(":7000")         // the slot map's name
	other := p.batcher("127.0.0.1:7001") // a node of its own
	down := replyError("CLUSTERDOWN The cluster is down")

	// The node answers under its seed's name, a third one.
	hook := dialWatch{p: p, addr: "127.0.0.1:7000"}
	run := hook.ProcessHook(func(context.Context, redis.Cmder) error { return down })
	cmd := redis.NewCmd(context.Background(), "evalsha")

	// A command of no batcher's refuses the node's batcher only: none here.
	require.ErrorIs(t, run(context.Background(), cmd), down)
	require.False(t, sender.refused.Load())

	sender.mu.Lock()
	root := sender.roundTripContext()
	sender.mu.Unlock()
	ctx, cancel := context.WithCancel(root)
	defer cancel()
	require.ErrorIs(t, run(ctx, cmd), down)
	require.True(t, sender.refused.Load(), "the batcher whose call got CLUSTERDOWN was not refused")
	require.ErrorContains(t, sender.refusedErr, "CLUSTERDOWN")
	require.False(t, other.refused.Load(), "a batcher of another node was refused")

	// The pipeline hook does the same.
	sender.answered()
	runPipe := hook.ProcessPipelineHook(func(_ context.Context, cmds []redis.Cmder) error {
		cmds[0].SetErr(down)
		return down
	})
	require.ErrorIs(t, runPipe(ctx, []redis.Cmder{redis.NewCmd(ctx, "evalsha")}), down)
	require.True(t, sender.refused.Load(), "the pipeline hook did not refuse the sending batcher")
	require.False(t, other.refused.Load())
}
