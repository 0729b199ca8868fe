package slidelog

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultPipelinesPerNode is how many pipelines a RedisStore keeps in
// flight to one Redis node when automatic pipelining is on.
const DefaultPipelinesPerNode = 2

// WithAutoPipelining switches a RedisStore's automatic pipelining on
// (pipelinesPerNode > 0, the default being DefaultPipelinesPerNode) or off
// (0). When on, decisions headed for the same Redis node while that node's
// pipelines are busy wait and leave together in the next pipeline, one
// round trip for all of them: no timer, so a lone caller goes out at once.
// Each caller still waits no longer than its context allows. MemoryStore
// ignores it.
func WithAutoPipelining(pipelinesPerNode int) StoreOption {
	return storeOptionFunc(func(c *storeConfig) error {
		c.pipelinesPerNode = max(0, pipelinesPerNode)
		c.pipeliningSet = true
		return nil
	})
}

// scriptCall is one decision waiting for its pipeline.
type scriptCall struct {
	ctx    context.Context
	script *redis.Script
	key    string
	args   []any
	reply  []int64
	err    error
	done   chan struct{}
}

// batcher coalesces the script calls for one node. At most limit
// pipelines are in flight; calls that arrive meanwhile queue, and the
// goroutine whose pipeline returns first takes the whole queue next.
type batcher struct {
	client   redis.UniversalClient // routes by key; follows MOVED and ASK
	limit    int
	mu       sync.Mutex
	queue    []*scriptCall
	inflight int
}

// do runs call in the next pipeline and waits for it or for the call's
// context, whichever comes first.
func (b *batcher) do(call *scriptCall) ([]int64, error) {
	b.mu.Lock()
	b.queue = append(b.queue, call)
	var batch []*scriptCall
	if b.inflight < b.limit {
		b.inflight++
		batch, b.queue = b.queue, nil
	}
	b.mu.Unlock()
	if len(batch) == 1 {
		// A lone caller sends its own call, at the cost of a plain
		// EVALSHA, then hands whatever queued meanwhile to a goroutine.
		b.send(batch)
		b.next()
		return call.reply, call.err
	}
	if batch != nil {
		go b.run(batch)
	}
	select {
	case <-call.done:
		return call.reply, call.err
	case <-call.ctx.Done():
		// The call may still run in Redis: it then holds an entry its
		// caller never used, which can only make the limiter stricter.
		return nil, call.ctx.Err()
	}
}

// run sends batch, then whatever queued meanwhile, until the queue is
// empty. It ends when its last round trip does, bounded by the calls'
// deadlines and the client's timeouts.
func (b *batcher) run(batch []*scriptCall) {
	for batch != nil {
		b.send(batch)
		batch = b.take()
	}
}

// take returns the queued calls, or nil and one pipeline fewer in flight.
func (b *batcher) take() []*scriptCall {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) == 0 {
		b.inflight--
		return nil
	}
	batch := b.queue
	b.queue = nil
	return batch
}

// next passes the pipeline slot a lone caller used on to a goroutine when
// calls queued meanwhile.
func (b *batcher) next() {
	if batch := b.take(); batch != nil {
		go b.run(batch)
	}
}

// send runs one pipeline of EVALSHA and answers each call; calls whose
// node lost the script (NOSCRIPT: restart, failover, SCRIPT FLUSH) are
// sent again with EVAL in a second pipeline.
func (b *batcher) send(batch []*scriptCall) {
	live := batch[:0:0]
	for _, c := range batch {
		if c.ctx.Err() == nil {
			live = append(live, c)
		} else {
			c.err = c.ctx.Err()
			close(c.done)
		}
	}
	if len(live) == 0 {
		return
	}
	if len(live) == 1 {
		c := live[0]
		c.reply, c.err = c.script.Run(c.ctx, b.client, logKeys(c.key), c.args...).Int64Slice()
		close(c.done)
		return
	}
	ctx, cancel := batchContext(live)
	defer cancel()
	cmds := b.pipeline(ctx, live, func(p redis.Pipeliner, c *scriptCall) *redis.Cmd {
		return c.script.EvalSha(ctx, p, logKeys(c.key), c.args...)
	})
	var retry []*scriptCall
	for i, c := range live {
		if err := cmds[i].Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			retry = append(retry, c)
			continue
		}
		c.reply, c.err = cmds[i].Int64Slice()
		close(c.done)
	}
	if len(retry) == 0 {
		return
	}
	cmds = b.pipeline(ctx, retry, func(p redis.Pipeliner, c *scriptCall) *redis.Cmd {
		return c.script.Eval(ctx, p, logKeys(c.key), c.args...)
	})
	for i, c := range retry {
		c.reply, c.err = cmds[i].Int64Slice()
		close(c.done)
	}
}

func (b *batcher) pipeline(ctx context.Context, calls []*scriptCall, add func(redis.Pipeliner, *scriptCall) *redis.Cmd) []*redis.Cmd {
	p := b.client.Pipeline()
	cmds := make([]*redis.Cmd, len(calls))
	for i, c := range calls {
		cmds[i] = add(p, c)
	}
	_, _ = p.Exec(ctx) // each command carries its own error
	return cmds
}

// batchContext is the pipeline's context: the latest deadline of its
// calls, none if a call has none, and never cancelled by one caller
// giving up, since the others still wait for their answers.
func batchContext(calls []*scriptCall) (context.Context, context.CancelFunc) {
	var latest time.Time
	for _, c := range calls {
		d, ok := c.ctx.Deadline()
		if !ok {
			return context.WithCancel(context.Background())
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(context.Background(), latest)
}

// pipelines routes calls to one batcher per Redis node.
type pipelines struct {
	client redis.UniversalClient
	limit  int
	mu     sync.Mutex
	nodes  map[string]*batcher
	single *batcher
}

func newPipelines(client redis.UniversalClient, limit int) *pipelines {
	p := &pipelines{client: client, limit: limit, nodes: map[string]*batcher{}}
	if _, ok := client.(*redis.ClusterClient); !ok {
		p.single = &batcher{client: client, limit: limit}
	}
	return p
}

// run decides with the script through the batcher of r's node. Calls
// whose node is not known yet share one batcher; the Cluster client's
// pipeline routes each of them by its key.
func (p *pipelines) run(ctx context.Context, r route, script *redis.Script, args []any) ([]int64, error) {
	b := p.single
	if b == nil {
		p.mu.Lock()
		b = p.nodes[r.node]
		if b == nil {
			b = &batcher{client: p.client, limit: p.limit}
			p.nodes[r.node] = b
		}
		p.mu.Unlock()
	}
	return b.do(&scriptCall{ctx: ctx, script: script, key: r.key, args: args, done: make(chan struct{})})
}
