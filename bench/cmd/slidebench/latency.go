package main

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/toxics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/slidelog/slidelog/bench/contender"
)

// rttTopology is the topology name of the cells measured with added
// round-trip latency between the client and every Cluster node.
const rttTopology = "cluster-rtt"

// microLatency is toxiproxy's latency toxic with microseconds instead of
// milliseconds, registered as "latency_us": the built-in one cannot add
// 0.2 ms. Each chunk leaves latency after it arrived (chunks in flight
// are delayed together, not one after the other), as on a wire.
type microLatency struct {
	Latency int64 `json:"latency_us"`
}

func init() { toxics.Register("latency_us", new(microLatency)) }

// GetBufferSize implements toxics.BufferedToxic: chunks queue while
// earlier ones wait out their delay.
func (t *microLatency) GetBufferSize() int { return 1024 }

// Pipe implements toxics.Toxic. The delay is a Go timer, as in
// toxiproxy's own toxic: precise while the process is busy, as under the
// benchmark's load, but rounded up to a millisecond when it is idle (the
// scheduler then waits for timers in whole milliseconds), so the delay
// each chunk got is recorded in delays.
func (t *microLatency) Pipe(stub *toxics.ToxicStub) {
	delay := time.Duration(t.Latency) * time.Microsecond
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		select {
		case <-stub.Interrupt:
			return
		case c := <-stub.Input:
			if c == nil {
				stub.Close()
				return
			}
			if wait := delay - time.Since(c.Timestamp); wait > 0 {
				timer.Reset(wait)
				select {
				case <-timer.C:
				case <-stub.Interrupt:
					stub.Output <- c // do not drop data
					return
				}
			}
			delays.record(time.Since(c.Timestamp))
			select {
			case stub.Output <- c:
			case <-stub.Interrupt:
				stub.Output <- c
				return
			}
		}
	}
}

// delays is the delay the latency toxics gave the chunks since the last
// reset: the latency actually added.
var delays delayStats

type delayStats struct {
	mu sync.Mutex
	h  histogram
}

func (d *delayStats) record(v time.Duration) {
	d.mu.Lock()
	d.h.record(v)
	d.mu.Unlock()
}

// take returns the median and the 99th percentile of the delays recorded
// since the last take, and resets them.
func (d *delayStats) take() (p50, p99 time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.h.n > 0 {
		p50, p99 = time.Duration(d.h.quantile(0.5)), time.Duration(d.h.quantile(0.99))
	}
	d.h = histogram{}
	return p50, p99
}

// rttProxies puts an in-process toxiproxy in front of every Cluster node
// (masters and replicas), each adding rtt to the round trip: the whole
// delay on the replies (downstream), so that a round trip waits on one
// timer, not two, and grows by rtt plus one timer's lateness. Clients
// reach the nodes through dial, which remaps each node's address to its
// proxy: the nodes announce their own ports in CLUSTER SLOTS, so the
// remapping has to happen at dial time.
type rttProxies struct {
	rtt    time.Duration
	byAddr map[string]*toxiproxy.Proxy
}

func newRTTProxies(ctx context.Context, seeds []string, rtt time.Duration) (*rttProxies, error) {
	direct := redis.NewClusterClient(&redis.ClusterOptions{Addrs: seeds})
	defer func() { _ = direct.Close() }()
	slots, err := direct.ClusterSlots(ctx).Result() //nolint:staticcheck // CLUSTER SLOTS answers on Redis 6.2 too; CLUSTER SHARDS came in 7.0
	if err != nil {
		return nil, fmt.Errorf("CLUSTER SLOTS: %w", err)
	}
	addrs := append([]string(nil), seeds...)
	for _, s := range slots {
		for _, n := range s.Nodes {
			addrs = append(addrs, n.Addr)
		}
	}
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	px := &rttProxies{rtt: rtt, byAddr: make(map[string]*toxiproxy.Proxy)}
	for _, addr := range addrs {
		if px.byAddr[addr] != nil {
			continue
		}
		p := toxiproxy.NewProxy(srv, "node-"+addr, "127.0.0.1:0", addr)
		if err := p.Start(); err != nil {
			px.close()
			return nil, fmt.Errorf("proxy for %s: %w", addr, err)
		}
		px.byAddr[addr] = p
		toxic := fmt.Sprintf(`{"name":"rtt","type":"latency_us","stream":"downstream","attributes":{"latency_us":%d}}`, rtt.Microseconds())
		if _, err := p.Toxics.AddToxicJson(strings.NewReader(toxic)); err != nil {
			px.close()
			return nil, fmt.Errorf("latency toxic on %s: %w", addr, err)
		}
	}
	return px, nil
}

func (px *rttProxies) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if p, ok := px.byAddr[addr]; ok {
		addr = p.Listen
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

func (px *rttProxies) close() {
	for _, p := range px.byAddr {
		p.Stop()
	}
}

// probeRTT returns the median of n PINGs to the node at seed through
// client's dialer, one at a time, on an otherwise idle client.
func probeRTT(ctx context.Context, dial func(context.Context, string, string) (net.Conn, error), seed string, n int) (time.Duration, error) {
	c := redis.NewClient(&redis.Options{Addr: seed, Dialer: dial, PoolSize: 1})
	defer func() { _ = c.Close() }()
	if err := c.Ping(ctx).Err(); err != nil {
		return 0, err
	}
	var h histogram
	for range n {
		t0 := time.Now()
		if err := c.Ping(ctx).Err(); err != nil {
			return 0, err
		}
		h.record(time.Since(t0))
	}
	return time.Duration(h.quantile(0.5)), nil
}

// nameCounts counts the commands a client sends by name, so that Redis's
// commandstats can be charged to the top-level commands only: commands a
// script calls are counted there too, and their time is already in the
// script's.
type nameCounts struct {
	mu sync.RWMutex
	n  map[string]*atomic.Int64
}

func (c *nameCounts) add(name string, k int64) {
	c.mu.RLock()
	v := c.n[name]
	c.mu.RUnlock()
	if v == nil {
		c.mu.Lock()
		if v = c.n[name]; v == nil {
			v = new(atomic.Int64)
			c.n[name] = v
		}
		c.mu.Unlock()
	}
	v.Add(k)
}

func (c *nameCounts) snapshot() map[string]int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make(map[string]int64, len(c.n))
	for k, v := range c.n {
		out[k] = v.Load()
	}
	return out
}

// nameHook is a go-redis hook feeding nameCounts.
type nameHook struct{ c *nameCounts }

func (h nameHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h nameHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.c.add(cmd.Name(), 1)
		return next(ctx, cmd)
	}
}

func (h nameHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.c.add(cmd.Name(), 1)
		}
		return next(ctx, cmds)
	}
}

// redisUsage is what the masters of a Cluster did during one slice of a
// cell: the time commandstats charged to the commands a client sent, and
// the CPU (user + system) the processes used, both in microseconds.
type redisUsage struct {
	cmdUsec float64
	cpuUsec float64
}

// resetStats runs CONFIG RESETSTAT on every master and returns their CPU
// time so far, in microseconds.
func resetStats(ctx context.Context, admin *redis.ClusterClient) (float64, error) {
	var mu sync.Mutex
	total := 0.0
	err := admin.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		if err := c.ConfigResetStat(ctx).Err(); err != nil {
			return err
		}
		cpu, err := cpuUsec(ctx, c)
		mu.Lock()
		total += cpu
		mu.Unlock()
		return err
	})
	return total, err
}

func cpuUsec(ctx context.Context, c *redis.Client) (float64, error) {
	info, err := c.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	user, _ := strconv.ParseFloat(infoField(info, "used_cpu_user"), 64)
	sys, _ := strconv.ParseFloat(infoField(info, "used_cpu_sys"), 64)
	return (user + sys) * 1e6, nil
}

// readUsage returns the masters' CPU time so far, in microseconds, and
// the commandstats time charged to the commands of sent (calls by name,
// as the client sent them): for each name, the masters' mean usec per
// call times the calls sent. A script's own calls are counted in
// commandstats too, but their time is already the script's.
func readUsage(ctx context.Context, admin *redis.ClusterClient, sent map[string]int64) (cpu float64, cmdUsec float64, err error) {
	var mu sync.Mutex
	calls := map[string]float64{}
	usec := map[string]float64{}
	err = admin.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "commandstats").Result()
		if err != nil {
			return err
		}
		u, err := cpuUsec(ctx, c)
		mu.Lock()
		defer mu.Unlock()
		cpu += u
		for line := range strings.SplitSeq(info, "\n") {
			name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
			name, found := strings.CutPrefix(name, "cmdstat_")
			if !ok || !found {
				continue
			}
			for f := range strings.SplitSeq(rest, ",") {
				k, v, _ := strings.Cut(f, "=")
				x, _ := strconv.ParseFloat(v, 64)
				switch k {
				case "calls":
					calls[name] += x
				case "usec":
					usec[name] += x
				}
			}
		}
		return err
	})
	for name, n := range sent {
		if c := calls[name]; c > 0 {
			cmdUsec += usec[name] / c * float64(n)
		}
	}
	return cpu, cmdUsec, err
}

// keyUsage sums MEMORY USAGE (SAMPLES 0: every element) over the keys
// containing prefix on every master, and the entries of those that are
// sorted sets.
func keyUsage(ctx context.Context, admin *redis.ClusterClient, prefix string) (keys, bytes, zsets, zsetBytes, entries int64, err error) {
	var mu sync.Mutex
	err = admin.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		var names []string
		iter := c.Scan(ctx, 0, "*"+prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			names = append(names, iter.Val())
		}
		if err := iter.Err(); err != nil {
			return err
		}
		for len(names) > 0 {
			batch := names[:min(len(names), 500)]
			names = names[len(batch):]
			pipe := c.Pipeline()
			mem := make([]*redis.IntCmd, len(batch))
			typ := make([]*redis.StatusCmd, len(batch))
			for i, k := range batch {
				mem[i] = pipe.MemoryUsage(ctx, k, 0)
				typ[i] = pipe.Type(ctx, k)
			}
			if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
				return err
			}
			pipe = c.Pipeline()
			var zc []*redis.IntCmd
			var zb int64
			var b int64
			for i, k := range batch {
				b += mem[i].Val()
				if typ[i].Val() == "zset" {
					zb += mem[i].Val()
					zc = append(zc, pipe.ZCard(ctx, k))
				}
			}
			if len(zc) > 0 {
				if _, err := pipe.Exec(ctx); err != nil {
					return err
				}
			}
			mu.Lock()
			keys += int64(len(batch))
			bytes += b
			zsets += int64(len(zc))
			zsetBytes += zb
			for _, z := range zc {
				entries += z.Val()
			}
			mu.Unlock()
		}
		return nil
	})
	return keys, bytes, zsets, zsetBytes, entries, err
}

// runRTT measures the Redis contenders on the Cluster with each added
// round-trip latency of cfg.rtts, callers at a time over cfg.keys keys,
// with the sizing figures (Redis CPU per decision, bytes per key) of
// each contender.
func runRTT(ctx context.Context, cfg runConfig, runID string, keyOf func(int) func() string, cellNo *int, res *Results) error {
	admin := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cfg.cluster})
	defer func() { _ = admin.Close() }()
	for _, rtt := range cfg.rtts {
		dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}
		var px *rttProxies
		if rtt > 0 {
			var err error
			if px, err = newRTTProxies(ctx, cfg.cluster, rtt); err != nil {
				return err
			}
			dial = px.dial
		}
		probe, err := probeRTT(ctx, dial, cfg.cluster[0], 200)
		if err != nil {
			if px != nil {
				px.close()
			}
			return fmt.Errorf("probe at %v: %w", rtt, err)
		}
		err = runRTTGroup(ctx, cfg, runID, rtt, probe, dial, keyOf, admin, cellNo, res)
		if px != nil {
			px.close()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func runRTTGroup(ctx context.Context, cfg runConfig, runID string, rtt, probe time.Duration,
	dial func(context.Context, string, string) (net.Conn, error), keyOf func(int) func() string,
	admin *redis.ClusterClient, cellNo *int, res *Results) error {
	var nc *nameCounts // of the client newClient makes next
	topo := topology{name: rttTopology, newClient: func() redis.UniversalClient {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cfg.cluster, PoolSize: poolSize, Dialer: dial})
		counts := nc
		c.OnNewNode(func(node *redis.Client) { node.AddHook(nameHook{counts}) })
		return c
	}}
	var group []*entry
	names := map[*entry]*nameCounts{}
	for _, name := range contender.RTT {
		if cfg.only != "" && !strings.Contains(rttTopology+"/many-keys/"+name, cfg.only) {
			continue
		}
		*cellNo++
		nc = &nameCounts{n: map[string]*atomic.Int64{}}
		e, err := newRedisEntry(ctx, topo, name, runID+"c"+strconv.Itoa(*cellNo)+":", "many-keys", cfg, "")
		if err != nil {
			_ = closeEntries(ctx, admin, group)
			return fmt.Errorf("%s at %v: %w", name, rtt, err)
		}
		names[e] = nc
		group = append(group, e)
	}
	if len(group) == 0 {
		return nil
	}
	usage := map[*entry]*redisUsage{}
	for _, e := range group {
		usage[e] = &redisUsage{}
		run(ctx, e.l, cfg.rttCallers, keyOf, cfg.warmup, false)
	}
	rounds := max(cfg.rounds, 1)
	applied := map[*entry]*histogram{}
	for _, e := range group {
		applied[e] = &histogram{}
	}
	for r := range rounds {
		for k := range group {
			e := group[(k+r)%len(group)]
			cpu0, err := resetStats(ctx, admin)
			if err != nil {
				_ = closeEntries(ctx, admin, group)
				return err
			}
			sent0 := names[e].snapshot()
			delays.take()
			st, elapsed, cmds, rts := drive(e.l, cfg.rttCallers, keyOf, 0, cfg.cell/time.Duration(rounds), e.cmds, e.rts)
			sent := names[e].snapshot()
			delays.mu.Lock()
			applied[e].merge(&delays.h)
			delays.mu.Unlock()
			for n, v := range sent0 {
				sent[n] -= v
			}
			cpu1, cmdUsec, err := readUsage(ctx, admin, sent)
			if err != nil {
				_ = closeEntries(ctx, admin, group)
				return err
			}
			usage[e].cpuUsec += cpu1 - cpu0
			usage[e].cmdUsec += cmdUsec
			e.stats.add(&st)
			e.elapsed += elapsed
			e.commands += cmds
			e.trips += rts
		}
	}
	for _, e := range group {
		cell := newCell(rttTopology, "many-keys", cfg.rttCallers, e.name, e.stats, e.elapsed, e.commands, e.trips)
		cell.AddedRTT = Duration(rtt)
		cell.ProbeRTT = Duration(probe)
		if h := applied[e]; h.n > 0 {
			cell.AppliedP50, cell.AppliedP99 = Duration(h.quantile(0.5)), Duration(h.quantile(0.99))
		}
		cell.RedisCmdUsec = usage[e].cmdUsec
		cell.RedisCPUUsec = usage[e].cpuUsec
		if rtt == 0 {
			var err error
			cell.RedisKeys, cell.RedisBytes, cell.ZSets, cell.ZSetBytes, cell.Entries, err = keyUsage(ctx, admin, e.prefix)
			if err != nil {
				_ = closeEntries(ctx, admin, group)
				return fmt.Errorf("memory usage of %s: %w", e.name, err)
			}
		}
		report(cell)
		fmt.Printf("           added rtt %v (idle PING %v, delay applied p50 %v p99 %v)  Redis µs/decision: commands %.1f, CPU %.1f", rtt, probe.Round(time.Microsecond),
			time.Duration(cell.AppliedP50).Round(time.Microsecond), time.Duration(cell.AppliedP99).Round(time.Microsecond),
			cell.RedisCmdUsec/float64(max(cell.Decisions, 1)), cell.RedisCPUUsec/float64(max(cell.Decisions, 1)))
		if cell.RedisKeys > 0 {
			fmt.Printf("  %d keys, %d bytes, %d entries", cell.RedisKeys, cell.RedisBytes, cell.Entries)
		}
		fmt.Println()
		res.Cells = append(res.Cells, cell)
	}
	return closeEntries(ctx, admin, group)
}
