package redistest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// EnvRedisServer names the server binary that tests, benchmarks and the
// fault suite start, as scripts/redis-rig.sh does: a redis-server or
// valkey-server path (scripts/servers.sh builds Redis 6.2 and Valkey).
// Unset, it is redis-server on PATH.
const EnvRedisServer = "SLIDELOG_REDIS_SERVER"

// Binary returns the path of a Redis program. For "redis-server" it is the
// binary EnvRedisServer names, or redis-server on PATH; for another
// program (redis-cli) it is the one beside that binary if there is one,
// else the one on PATH. A named binary that is not there is an error: it
// is never replaced by another server.
func Binary(name string) (string, error) {
	server := strings.TrimSpace(os.Getenv(EnvRedisServer))
	if name == "redis-server" && server != "" {
		return exec.LookPath(server)
	}
	if server != "" && strings.Contains(server, "/") {
		if p := filepath.Join(filepath.Dir(server), name); isExecutable(p) {
			return p, nil
		}
	}
	return exec.LookPath(name)
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// ServerConfig says how to start one redis-server. Its zero value is a
// standalone server without persistence on a free port of 127.0.0.1.
type ServerConfig struct {
	// Bin is the server binary; empty: Binary("redis-server").
	Bin string
	// Port is the server's port on 127.0.0.1; 0: a free port (see
	// FreePort; with its cluster bus port, +10000, free too when Args
	// enable cluster mode), picked again if another process takes it
	// first.
	Port int
	// Dir is the server's working directory, which holds its files and
	// its output (redis.log); empty: a temporary directory, removed by
	// Stop.
	Dir string
	// Args are more configuration arguments ("--maxmemory", "4mb"). They
	// come after the defaults --bind 127.0.0.1 --save "" --appendonly no,
	// and override them.
	Args []string
	// ReplicaOf, host:port, makes the server a replica of that master;
	// Start then waits until the replica is in sync.
	ReplicaOf string
	// Debug enables the DEBUG command (--enable-debug-command local) on
	// servers that have the option (7.0 and later; before, DEBUG is
	// always enabled).
	Debug bool
	// RaisePriority gives the server a CPU priority above the caller's
	// (nice -10) where the caller may (root), as a Redis on a machine of
	// its own would have. Without the privilege it changes nothing.
	RaisePriority bool

	sentinelConf string // a Sentinel's configuration file: run with --sentinel
}

// Server is one redis-server (or Sentinel) process started by this
// package, in a process group of its own. Stop it with Stop; the
// processes also die with the process that started them (on Linux), so a
// test that times out leaves none behind.
type Server struct {
	// Addr is 127.0.0.1:Port.
	Addr string
	// Port is the port it listens on.
	Port int
	// Dir is its working directory; its output is in Dir/redis.log.
	Dir string

	bin     string
	args    []string
	tempDir bool
	raise   bool // RaisePriority

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed when cmd has exited
	stopped bool
}

// Start starts the server and waits until it answers PING (and, for a
// replica, until it is in sync), for at most 10 s or until ctx ends. On
// error nothing it started is left running.
func (cfg ServerConfig) Start(ctx context.Context) (*Server, error) {
	bin := cfg.Bin
	if bin == "" {
		var err error
		if bin, err = Binary("redis-server"); err != nil {
			return nil, fmt.Errorf("redis-server: %w", err)
		}
	}
	s := &Server{Dir: cfg.Dir, bin: bin, raise: cfg.RaisePriority}
	if s.Dir == "" {
		dir, err := os.MkdirTemp("", "redistest-")
		if err != nil {
			return nil, err
		}
		s.Dir, s.tempDir = dir, true
	} else if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return nil, err
	}
	var lead []string // what must come before --port
	args := []string{"--bind", "127.0.0.1"}
	if cfg.sentinelConf != "" {
		lead = []string{cfg.sentinelConf, "--sentinel"}
	} else {
		args = append(args, "--save", "", "--appendonly", "no")
	}
	args = append(args, "--dir", s.Dir)
	if cfg.Debug && serverMajor(bin) >= 7 {
		args = append(args, "--enable-debug-command", "local")
	}
	if cfg.ReplicaOf != "" {
		host, port, err := net.SplitHostPort(cfg.ReplicaOf)
		if err != nil {
			_ = s.Stop()
			return nil, err
		}
		args = append(args, "--replicaof", host, port) // two arguments: Redis 6.2 takes no "host port" in one
	}
	args = append(args, cfg.Args...)
	bus := clusterEnabled(cfg.Args)
	var err error
	for attempt := 0; ; attempt++ {
		s.Port = cfg.Port
		if s.Port == 0 {
			if s.Port, err = freePort(bus, cfg.sentinelConf != ""); err != nil {
				break
			}
		}
		s.Addr = "127.0.0.1:" + strconv.Itoa(s.Port)
		s.args = slices.Concat(lead, []string{"--port", strconv.Itoa(s.Port)}, args)
		if err = s.run(ctx); err == nil || cfg.Port != 0 || attempt == 4 || ctx.Err() != nil {
			break
		}
		// Another process may have taken the free port first: pick another.
	}
	if err == nil && cfg.ReplicaOf != "" {
		err = s.waitInSync(ctx)
	}
	if err != nil {
		return nil, errors.Join(err, s.Stop())
	}
	return s, nil
}

// run starts the process on s.Port and waits until it answers PING.
func (s *Server) run(ctx context.Context) error {
	log, err := os.OpenFile(filepath.Join(s.Dir, "redis.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.bin, s.args...)
	cmd.Dir = s.Dir
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = procAttr()
	err = cmd.Start()
	_ = log.Close() // the child holds its own copy
	if err != nil {
		return fmt.Errorf("%s on port %d: %w", s.bin, s.Port, err)
	}
	if s.raise {
		raisePriority(cmd.Process.Pid)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }() // ends when the process exits: Stop and Kill make it
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	c := redis.NewClient(&redis.Options{Addr: s.Addr, DialTimeout: time.Second, ReadTimeout: time.Second, MaxRetries: -1})
	defer c.Close()
	err = poll(ctx, 10*time.Second, func(ctx context.Context) error {
		select {
		case <-done:
			return errExited
		default:
		}
		// A dial first: go-redis logs every refused dial of its pool.
		conn, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", s.Addr)
		if err != nil {
			return err
		}
		_ = conn.Close()
		return c.Ping(ctx).Err()
	})
	if err != nil {
		s.kill()
		return fmt.Errorf("%s on port %d does not answer: %w (%s)", s.bin, s.Port, err, tail(filepath.Join(s.Dir, "redis.log")))
	}
	return nil
}

var errExited = errors.New("the process exited")

// waitInSync waits until the replica's link to its master is up.
func (s *Server) waitInSync(ctx context.Context) error {
	c := s.client()
	defer c.Close()
	return poll(ctx, 20*time.Second, func(ctx context.Context) error {
		info, err := c.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if v := InfoField(info, "master_link_status"); v != "up" {
			return fmt.Errorf("replica %s: master_link_status %q", s.Addr, v)
		}
		return nil
	})
}

// client returns a new client of s for administration.
func (s *Server) client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: s.Addr, DialTimeout: time.Second, ReadTimeout: 3 * time.Second, WriteTimeout: 3 * time.Second})
}

// Pid is the server's process ID.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd.Process.Pid
}

// Signal sends sig to the server (syscall.SIGSTOP, syscall.SIGCONT, ...).
func (s *Server) Signal(sig os.Signal) error {
	s.mu.Lock()
	p := s.cmd.Process
	s.mu.Unlock()
	return p.Signal(sig)
}

// Exited is closed when the server's process has exited.
func (s *Server) Exited() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}

// Kill kills the server's process group (SIGKILL, which also ends a
// stopped one) and waits until it has exited. Restart starts it again.
func (s *Server) Kill() { s.kill() }

func (s *Server) kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	killGroup(cmd.Process)
	<-done
}

// Restart starts a killed server again with the same port, directory and
// arguments (a Cluster node rejoins from its nodes.conf) and waits until
// it answers PING.
func (s *Server) Restart(ctx context.Context) error {
	s.mu.Lock()
	stopped := s.stopped
	s.mu.Unlock()
	if stopped {
		return errors.New("redistest: Restart after Stop")
	}
	s.kill()
	return s.run(ctx)
}

// Stop kills the server (see Kill) and removes its directory if Start
// made it. It may be called more than once.
func (s *Server) Stop() error {
	s.kill()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil
	}
	s.stopped = true
	if s.tempDir {
		return os.RemoveAll(s.Dir)
	}
	return nil
}

// ClusterConfig says how to start a Redis Cluster. Its zero value is
// three masters without replicas on free ports.
type ClusterConfig struct {
	// Masters is how many masters share the 16384 slots; 0: 3.
	Masters int
	// Replicas is how many replicas each master has.
	Replicas int
	// Ports are the nodes' ports, masters first, one per node (their bus
	// ports, +10000, are used too); empty: free ports (see
	// ServerConfig.Port). A port that is taken is an error.
	Ports []int
	// Dir holds one directory per node (node0, node1, ...); empty: a
	// temporary directory, removed by Stop.
	Dir string
	// NodeTimeout is the cluster-node-timeout; 0: 2 s, as
	// scripts/redis-rig.sh starts its Cluster.
	NodeTimeout time.Duration
	// Args are more configuration arguments for every node.
	Args []string
	// Debug and RaisePriority are ServerConfig's, for every node.
	Debug, RaisePriority bool
	// Bin is the server binary; empty: Binary("redis-server").
	Bin string
}

// Cluster is a Redis Cluster of processes started by this package.
type Cluster struct {
	// Nodes are its nodes, masters first, as started (a failover later
	// may change their roles).
	Nodes []*Server
	// Masters is how many of Nodes were started as masters.
	Masters int

	dir     string
	tempDir bool
}

// Addrs are the nodes' addresses, for a ClusterClient's seeds.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr
	}
	return out
}

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// Start starts the nodes, spreads the slots evenly over the masters
// (CLUSTER ADDSLOTS), joins the nodes (CLUSTER MEET), makes each replica
// follow its master (CLUSTER REPLICATE), and waits until every node
// reports cluster_state:ok with every slot served and every replica in
// sync, for at most 60 s or until ctx ends. It needs no redis-cli. On
// error nothing it started is left running.
func (cfg ClusterConfig) Start(ctx context.Context) (_ *Cluster, err error) {
	masters := cfg.Masters
	if masters == 0 {
		masters = 3
	}
	n := masters * (1 + cfg.Replicas)
	if len(cfg.Ports) != 0 && len(cfg.Ports) != n {
		return nil, fmt.Errorf("redistest: %d ports for %d nodes", len(cfg.Ports), n)
	}
	timeout := cfg.NodeTimeout
	if timeout == 0 {
		timeout = 2 * time.Second
	}
	c := &Cluster{Masters: masters, dir: cfg.Dir}
	if c.dir == "" {
		if c.dir, err = os.MkdirTemp("", "redistest-cluster-"); err != nil {
			return nil, err
		}
		c.tempDir = true
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Stop())
		}
	}()
	for i := range n {
		port := 0
		if len(cfg.Ports) != 0 {
			port = cfg.Ports[i]
			if err := PortsFree(port, port+10000); err != nil {
				return nil, err
			}
		}
		sc := ServerConfig{Bin: cfg.Bin, Port: port, Debug: cfg.Debug, RaisePriority: cfg.RaisePriority,
			Args: append([]string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
				"--cluster-node-timeout", strconv.FormatInt(timeout.Milliseconds(), 10)}, cfg.Args...)}
		// A port picked by the kernel is known once started: the node's
		// directory is named by it afterwards.
		sc.Dir = filepath.Join(c.dir, "node"+strconv.Itoa(i))
		s, err := sc.Start(ctx)
		if err != nil {
			return nil, err
		}
		c.Nodes = append(c.Nodes, s)
	}
	admins := make([]*redis.Client, n)
	for i, s := range c.Nodes {
		admins[i] = s.client()
		defer admins[i].Close()
	}
	ids := make([]string, n)
	for i, a := range admins {
		if ids[i], err = a.ClusterMyID(ctx).Result(); err != nil {
			return nil, fmt.Errorf("CLUSTER MYID on %s: %w", c.Nodes[i].Addr, err)
		}
		// Distinct epochs from the start, as redis-cli --cluster create sets them.
		if err := a.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			return nil, fmt.Errorf("CLUSTER SET-CONFIG-EPOCH on %s: %w", c.Nodes[i].Addr, err)
		}
	}
	for i := range masters {
		lo, hi := i*clusterSlots/masters, (i+1)*clusterSlots/masters-1
		args := []any{"CLUSTER", "ADDSLOTS"} // ADDSLOTSRANGE is Redis 7's
		for slot := lo; slot <= hi; slot++ {
			args = append(args, slot)
		}
		if err := admins[i].Do(ctx, args...).Err(); err != nil {
			return nil, fmt.Errorf("CLUSTER ADDSLOTS %d-%d on %s: %w", lo, hi, c.Nodes[i].Addr, err)
		}
	}
	for i := 1; i < n; i++ {
		if err := admins[0].ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(c.Nodes[i].Port)).Err(); err != nil {
			return nil, fmt.Errorf("CLUSTER MEET %s: %w", c.Nodes[i].Addr, err)
		}
	}
	for i := masters; i < n; i++ {
		master := (i - masters) % masters
		// The replica must know the master first: MEET spreads by gossip.
		err := poll(ctx, 30*time.Second, func(ctx context.Context) error {
			return admins[i].Do(ctx, "CLUSTER", "REPLICATE", ids[master]).Err()
		})
		if err != nil {
			return nil, fmt.Errorf("CLUSTER REPLICATE on %s: %w", c.Nodes[i].Addr, err)
		}
	}
	if err := poll(ctx, 60*time.Second, func(ctx context.Context) error { return c.problem(ctx, admins, cfg.Replicas) }); err != nil {
		return nil, fmt.Errorf("cluster of %d masters and %d replicas not healthy: %w", masters, n-masters, err)
	}
	return c, nil
}

// problem returns the first thing found that keeps the Cluster from being
// healthy, or nil.
func (c *Cluster) problem(ctx context.Context, admins []*redis.Client, replicas int) error {
	n := len(c.Nodes)
	for i, a := range admins {
		info, err := a.ClusterInfo(ctx).Result()
		if err != nil {
			return err
		}
		if InfoField(info, "cluster_state") != "ok" || InfoField(info, "cluster_slots_ok") != strconv.Itoa(clusterSlots) ||
			InfoField(info, "cluster_known_nodes") != strconv.Itoa(n) {
			return fmt.Errorf("node %s: cluster_state %s, slots_ok %s, known_nodes %s", c.Nodes[i].Addr,
				InfoField(info, "cluster_state"), InfoField(info, "cluster_slots_ok"), InfoField(info, "cluster_known_nodes"))
		}
		repl, err := a.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if i < c.Masters {
			if online := strings.Count(repl, ",state=online,"); online != replicas {
				return fmt.Errorf("master %s: %d replicas online, want %d", c.Nodes[i].Addr, online, replicas)
			}
		} else if v := InfoField(repl, "master_link_status"); v != "up" {
			return fmt.Errorf("replica %s: master_link_status %q", c.Nodes[i].Addr, v)
		}
	}
	return nil
}

// Stop stops every node and removes the Cluster's directory if Start made
// it.
func (c *Cluster) Stop() error {
	var errs []error
	for _, n := range c.Nodes {
		errs = append(errs, n.Stop())
	}
	if c.tempDir {
		errs = append(errs, os.RemoveAll(c.dir))
	}
	return errors.Join(errs...)
}

// SentinelConfig says how to start a Sentinel set: a master, its
// replicas and Sentinels monitoring them. Its zero value is one master,
// one replica and three Sentinels on free ports (see FreePort).
type SentinelConfig struct {
	// Name is the master's name in the Sentinels; empty: "mymaster".
	Name string
	// Replicas is how many replicas the master has; 0: 1.
	Replicas int
	// ReplicaArgs, when set, returns more configuration arguments for
	// the i-th replica (from 0), after Args ("--replica-priority", "10").
	ReplicaArgs func(i int) []string
	// ReplicaOf, when set, returns the address the i-th replica
	// replicates from, given the master's: a proxy in front of the
	// master, to cut that replica's link alone; "" is the master's
	// address. The replica still announces its own address, so the
	// Sentinels find it as they would without the proxy. But a Sentinel
	// points a replica that replicates from another address than the
	// master's at the master once FailoverTimeout has passed since it
	// found the replica (+fix-slave-config): a test that needs the
	// proxy longer sets a longer FailoverTimeout (see Sentinels.Set).
	ReplicaOf func(i int, master string) (string, error)
	// Sentinels is how many Sentinels run; 0: 3.
	Sentinels int
	// Quorum is how many Sentinels must agree that the master is down;
	// 0: 2.
	Quorum int
	// DownAfter is down-after-milliseconds; 0: 2 s.
	DownAfter time.Duration
	// FailoverTimeout is failover-timeout; 0: 10 s.
	FailoverTimeout time.Duration
	// InfoPeriod, when set, is how often each Sentinel asks the master
	// and the replicas for INFO (SENTINEL DEBUG info-period), instead of
	// every 10 s. A Sentinel picks the replica to promote from what its
	// last INFO said (offset, priority) and passes over a replica whose
	// INFO is more than 5 s old, so a test that expects one replica to
	// win needs that INFO fresh. Sentinels before Redis 7.0 have no
	// SENTINEL DEBUG and keep their 10 s (they ask every second once
	// the master is down).
	InfoPeriod time.Duration
	// Args are more configuration arguments for the master and the
	// replica.
	Args []string
	// RaisePriority is ServerConfig's, for every process.
	RaisePriority bool
	// Bin is the server binary, which runs the Sentinels too (with
	// --sentinel); empty: Binary("redis-server") for the servers, and for
	// the Sentinels Binary("redis-sentinel") (Debian's package of that
	// name, or the one beside SLIDELOG_REDIS_SERVER), else that server.
	Bin string
}

// Sentinels is a Sentinel set started by this package.
type Sentinels struct {
	// Name is the master's name in the Sentinels.
	Name string
	// Master and Replica are the servers as started (a failover later
	// swaps their roles); Replica is Replicas[0].
	Master, Replica *Server
	// Replicas are the master's replicas as started.
	Replicas []*Server
	// Sentinels are the Sentinel processes.
	Sentinels []*Server
}

// Start starts the master, its replicas and the Sentinels, and waits
// until every replica is in sync and every Sentinel knows them and the
// other Sentinels, for at most 30 s or until ctx ends. On error nothing
// it started is left running.
func (cfg SentinelConfig) Start(ctx context.Context) (_ *Sentinels, err error) {
	if cfg.Name == "" {
		cfg.Name = "mymaster"
	}
	if cfg.Sentinels == 0 {
		cfg.Sentinels = 3
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
	}
	if cfg.Quorum == 0 {
		cfg.Quorum = 2
	}
	if cfg.DownAfter == 0 {
		cfg.DownAfter = 2 * time.Second
	}
	if cfg.FailoverTimeout == 0 {
		cfg.FailoverTimeout = 10 * time.Second
	}
	s := &Sentinels{Name: cfg.Name}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.Stop())
		}
	}()
	server := ServerConfig{Bin: cfg.Bin, Args: cfg.Args, RaisePriority: cfg.RaisePriority}
	if s.Master, err = server.Start(ctx); err != nil {
		return nil, err
	}
	for i := range cfg.Replicas {
		rc := server
		rc.ReplicaOf = s.Master.Addr
		if cfg.ReplicaOf != nil {
			via, err := cfg.ReplicaOf(i, s.Master.Addr)
			if err != nil {
				return nil, err
			}
			if via != "" {
				rc.ReplicaOf = via
			}
		}
		if cfg.ReplicaArgs != nil {
			rc.Args = slices.Concat(cfg.Args, cfg.ReplicaArgs(i))
		}
		r, err := rc.Start(ctx)
		if err != nil {
			return nil, err
		}
		s.Replicas = append(s.Replicas, r)
	}
	s.Replica = s.Replicas[0]
	sentinelBin := cfg.Bin
	if server := strings.TrimSpace(os.Getenv(EnvRedisServer)); sentinelBin == "" && server == "" {
		if sentinelBin, err = Binary("redis-sentinel"); err != nil {
			return nil, fmt.Errorf("redis-sentinel: %w (Debian: apt-get install redis-sentinel; make test installs it)", err)
		}
	} else if sentinelBin == "" {
		// The chosen server's own redis-sentinel, else the server itself
		// (--sentinel): never the system's, which may be another version.
		if p := filepath.Join(filepath.Dir(server), "redis-sentinel"); strings.Contains(server, "/") && isExecutable(p) {
			sentinelBin = p
		}
	}
	for range cfg.Sentinels {
		dir, err := os.MkdirTemp("", "redistest-sentinel-")
		if err != nil {
			return nil, err
		}
		conf := filepath.Join(dir, "sentinel.conf")
		text := fmt.Sprintf("sentinel monitor %[1]s 127.0.0.1 %[2]d %[3]d\n"+
			"sentinel down-after-milliseconds %[1]s %[4]d\n"+
			"sentinel failover-timeout %[1]s %[5]d\n"+
			"sentinel parallel-syncs %[1]s 1\n",
			cfg.Name, s.Master.Port, cfg.Quorum, cfg.DownAfter.Milliseconds(), cfg.FailoverTimeout.Milliseconds())
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		sc := ServerConfig{Bin: sentinelBin, Dir: dir, RaisePriority: cfg.RaisePriority, sentinelConf: conf}
		n, err := sc.Start(ctx)
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		n.tempDir = true
		s.Sentinels = append(s.Sentinels, n)
	}
	for _, n := range s.Sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: n.Addr, DialTimeout: time.Second, ReadTimeout: time.Second})
		if cfg.InfoPeriod > 0 {
			err := sc.Process(ctx, redis.NewStatusCmd(ctx, "sentinel", "debug", "info-period", cfg.InfoPeriod.Milliseconds()))
			if err != nil && !strings.Contains(strings.ToLower(err.Error()), "unknown") {
				_ = sc.Close()
				return nil, fmt.Errorf("sentinel %s: SENTINEL DEBUG info-period (Redis 7.0 and later): %w", n.Addr, err)
			}
		}
		err := poll(ctx, 30*time.Second, func(ctx context.Context) error {
			rs, err := sc.Replicas(ctx, cfg.Name).Result()
			if err != nil {
				return err
			}
			ss, err := sc.Sentinels(ctx, cfg.Name).Result()
			if err != nil {
				return err
			}
			if len(rs) != cfg.Replicas || len(ss) != cfg.Sentinels-1 {
				return fmt.Errorf("sentinel %s knows %d replicas and %d other sentinels, want %d and %d", n.Addr, len(rs), len(ss), cfg.Replicas, cfg.Sentinels-1)
			}
			return nil
		})
		_ = sc.Close()
		if err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Addrs are the Sentinels' addresses.
func (s *Sentinels) Addrs() []string {
	out := make([]string, len(s.Sentinels))
	for i, n := range s.Sentinels {
		out[i] = n.Addr
	}
	return out
}

// URL is the set's redis+sentinel:// URL.
func (s *Sentinels) URL() string {
	return "redis+sentinel://" + strings.Join(s.Addrs(), ",") + "/" + s.Name
}

// MasterAddr asks the Sentinels, in turn, for the master's address; ""
// if none answers.
func (s *Sentinels) MasterAddr(ctx context.Context) string {
	for _, n := range s.Sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: n.Addr, DialTimeout: time.Second, ReadTimeout: time.Second})
		a, err := sc.GetMasterAddrByName(ctx, s.Name).Result()
		_ = sc.Close()
		if err == nil && len(a) == 2 {
			return net.JoinHostPort(a[0], a[1])
		}
	}
	return ""
}

// Set sets option of the master to value in every Sentinel (SENTINEL
// SET name option value).
func (s *Sentinels) Set(ctx context.Context, option, value string) error {
	for _, n := range s.Sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: n.Addr, DialTimeout: time.Second, ReadTimeout: time.Second})
		err := sc.Set(ctx, s.Name, option, value).Err()
		_ = sc.Close()
		if err != nil {
			return fmt.Errorf("sentinel %s: SENTINEL SET %s %s %s: %w", n.Addr, s.Name, option, value, err)
		}
	}
	return nil
}

// Stop stops every process of the set.
func (s *Sentinels) Stop() error {
	var errs []error
	for _, n := range slices.Concat([]*Server{s.Master}, s.Replicas, s.Sentinels) {
		if n != nil {
			errs = append(errs, n.Stop())
		}
	}
	return errors.Join(errs...)
}

// PortsFree returns an error naming the first of ports on which something
// listens on 127.0.0.1.
func PortsFree(ports ...int) error {
	for _, p := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			return fmt.Errorf("port %d is taken: %w", p, err)
		}
		_ = l.Close()
	}
	return nil
}

// FreeClusterPorts returns the first n ports in [from, to] that are free
// on 127.0.0.1 with their cluster bus ports (+10000).
func FreeClusterPorts(from, to, n int) ([]int, error) {
	var out []int
	for p := from; p <= to && len(out) < n; p++ {
		if PortsFree(p, p+10000) == nil {
			out = append(out, p)
		}
	}
	if len(out) < n {
		return out, fmt.Errorf("found %d free ports in %d-%d, want %d", len(out), from, to, n)
	}
	return out, nil
}

// Environment variables naming the ranges of ports, FROM-TO, that
// servers and Sentinels started on a free port take theirs from (see
// FreePort), for tests run beside other work that owns other ports.
const (
	// EnvServerPorts is the range for servers (and their cluster bus
	// ports, +10000, must be free too) and for FreePort.
	EnvServerPorts = "SLIDELOG_SERVER_PORTS"
	// EnvSentinelPorts is the range for Sentinels.
	EnvSentinelPorts = "SLIDELOG_SENTINEL_PORTS"
)

// FreePort returns a port free on 127.0.0.1, for a server or a proxy of a
// test's own: one in the range EnvServerPorts names when it is set,
// otherwise one the kernel has free (from its ephemeral range, so never
// one of the rig's). Another process may take it before the caller
// listens on it: pick again then.
//
// A port it handed out before in this process is handed out again only
// when no other is free: a Sentinel of one test's set that outlives its
// master keeps that master's address, and would make a new server there
// (another test's) a replica of its own set.
func FreePort() (int, error) { return freePort(false, false) }

// handed holds the ports freePort handed out in this process.
var handed struct {
	sync.Mutex
	ports map[int]bool
}

// freePort returns a free port on 127.0.0.1 (see FreePort), from the
// Sentinels' range for a Sentinel; with bus, one whose cluster bus port
// (+10000) is a valid port and free too.
func freePort(bus, sentinel bool) (int, error) {
	handed.Lock()
	defer handed.Unlock()
	if handed.ports == nil {
		handed.ports = make(map[int]bool)
	}
	free := func(p int) bool {
		return PortsFree(p) == nil && (!bus || (p+10000 <= 65535 && PortsFree(p+10000) == nil))
	}
	env := EnvServerPorts
	if sentinel {
		env = EnvSentinelPorts
	}
	if v := strings.TrimSpace(os.Getenv(env)); v != "" {
		from, to, err := portRange(v)
		if err != nil {
			return 0, fmt.Errorf("%s=%q: %w", env, v, err)
		}
		// From a random place in the range, so that processes starting
		// servers at once rarely pick the same one; one not handed out
		// before if there is one.
		n := to - from + 1
		first := rand.IntN(n)
		for _, again := range []bool{false, true} {
			for i := range n {
				if p := from + (first+i)%n; handed.ports[p] == again && free(p) {
					handed.ports[p] = true
					return p, nil
				}
			}
		}
		return 0, fmt.Errorf("no free port in %s=%s", env, v)
	}
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		p := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if !handed.ports[p] && (!bus || free(p)) {
			handed.ports[p] = true
			return p, nil
		}
	}
	return 0, errors.New("no free port with a free cluster bus port")
}

// portRange parses "FROM-TO".
func portRange(v string) (from, to int, err error) {
	a, b, ok := strings.Cut(v, "-")
	if ok {
		from, err = strconv.Atoi(strings.TrimSpace(a))
		if err == nil {
			to, err = strconv.Atoi(strings.TrimSpace(b))
		}
	}
	if !ok || err != nil || from < 1 || to > 65535 || from > to {
		return 0, 0, errors.New("want a range of ports FROM-TO")
	}
	return from, to, nil
}

func clusterEnabled(args []string) bool {
	for i, a := range args {
		if a == "--cluster-enabled" && i+1 < len(args) && args[i+1] == "yes" {
			return true
		}
	}
	return false
}

// serverMajor is the major version bin reports (redis-server --version:
// "v=6.2.14"), or 0.
func serverMajor(bin string) int {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return 0
	}
	_, v, ok := strings.Cut(string(out), " v=")
	if !ok {
		return 0
	}
	major, _, _ := strings.Cut(v, ".")
	n, _ := strconv.Atoi(major)
	return n
}

// InfoField returns the value of field in an INFO (or CLUSTER INFO)
// reply, or "".
func InfoField(info, field string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// poll calls f every 20 ms until it returns nil, for at most d or until
// ctx ends, and returns f's last error.
func poll(ctx context.Context, d time.Duration, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := f(ctx)
		if err == nil || errors.Is(err, errExited) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-tick.C:
		}
	}
}

// tail returns the last lines of the file at path, for an error message.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "no log"
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return "log " + path + ": " + strings.Join(lines, " | ")
}
