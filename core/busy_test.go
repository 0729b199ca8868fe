package slidelog_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
)

// busyLimit and busyWindow are the policy of TestExactWhenBusy's limiters.
const (
	busyLimit  = 50
	busyWindow = time.Second
	busyKeys   = 24
	busyProcs  = 3
	// busyCallers is the goroutines deciding in each process: 192 in all.
	busyCallers = 64
)

// TestExactWhenBusy is the limiter as users get it, on a healthy Redis, in
// busy processes (issue 29): three processes, each a limiter with the
// default options on its own store and its own client with go-redis's
// plain options, 192 goroutines on 24 keys at 50 per second, on the
// Cluster, on the standalone Redis, and on a Redis of the test's own
// reached over a Unix socket (whose kernel record the store reads
// differently from TCP's), and on the Cluster through a client that ran a
// command on every master before New (whose connections the store cannot
// track, so that it judges their nodes' silence in alive time, not by the
// kernel's record); beside two CPU hogs, or with 48 CPU-bound goroutines started in each limiter's own
// process after New. Every decision must come from Redis (none from the
// failure mode: a busy process is not a stalled node) and the independent
// checker must find no rolling window over the limit.
func TestExactWhenBusy(t *testing.T) {
	if os.Getenv("SLIDELOG_BUSY_CHILD") != "" {
		t.Skip("child process")
	}
	if testing.Short() {
		t.Skip("takes about 45 s")
	}
	for _, topo := range []string{"cluster", "standalone", "unix", "cluster-used"} {
		for _, load := range []string{"two CPU hogs", "48 CPU-bound goroutines"} {
			t.Run(topo+"/"+load, func(t *testing.T) { busyRun(t, topo, load) })
		}
	}
}

func busyRun(t *testing.T, topo, load string) {
	var client redis.UniversalClient
	sock := ""
	switch topo {
	case "cluster", "cluster-used":
		client = redistest.ClusterClient(t)
	case "unix":
		sock = filepath.Join(t.TempDir(), "redis.sock")
		redistest.StartServer(t, redistest.ServerConfig{Args: []string{"--unixsocket", sock, "--unixsocketperm", "700"}})
		client = redis.NewClient(&redis.Options{Network: "unix", Addr: sock})
		t.Cleanup(func() { _ = client.Close() })
	default:
		client = redistest.RedisClient(t)
	}
	prefix := redistest.KeyPrefix(t, client)
	keys := make([]string, busyKeys)
	for i := range keys {
		keys[i] = "user-" + strconv.Itoa(i)
	}
	if load == "two CPU hogs" {
		cpuHogs(t, 2)
	}
	var admitted []admission
	perChild := make([]int, busyProcs)
	failovers := 0
	env := []string{"SLIDELOG_BUSY_CHILD=" + topo, "SLIDELOG_BUSY_PREFIX=" + prefix, "SLIDELOG_BUSY_SOCK=" + sock,
		"SLIDELOG_BUSY_KEYS=" + strings.Join(keys, ","), "SLIDELOG_BUSY_SPIN=" + strconv.FormatBool(load != "two CPU hogs")}
	runChildren(t, busyProcs, "TestBusyChild", env, func(i int, line []byte) {
		var a busyLine
		if json.Unmarshal(line, &a) != nil {
			return
		}
		failovers += a.Failovers
		if a.Key != "" {
			admitted = append(admitted, admission{Key: a.Key, At: a.At})
			perChild[i]++
		}
	})
	for i, n := range perChild {
		if n == 0 {
			t.Fatalf("child %d admitted nothing; every process must take part", i)
		}
	}
	peak := checkWindows(t, admitted, busyLimit, busyWindow)
	over := 0
	for _, n := range peak {
		if n > busyLimit {
			over++
		}
	}
	t.Logf("%s, %s: %d admissions from %d processes %v, decisions by the failure mode: %d, keys over the limit: %d", topo, load, len(admitted), busyProcs, perChild, failovers, over)
	if failovers > 0 {
		t.Errorf("%d decisions went to the failure mode on a healthy Redis, want 0", failovers)
	}
}

// busyLine is a line of a TestBusyChild: an admission (of Redis or the
// failure mode, at its decision's time) or, last, the number of decisions
// the failure mode made.
type busyLine struct {
	Key       string `json:"k,omitempty"`
	At        int64  `json:"t,omitempty"`
	Failovers int    `json:"f,omitempty"`
}

// TestBusyChild is the body of a child process of TestExactWhenBusy; it
// does nothing on its own. It writes every admission to stdout, Redis's
// and the failure mode's, then how many decisions the failure mode made.
func TestBusyChild(t *testing.T) {
	topo := os.Getenv("SLIDELOG_BUSY_CHILD")
	if topo == "" {
		return
	}
	var client redis.UniversalClient
	switch topo {
	case "cluster", "cluster-used":
		client = redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(os.Getenv(redistest.EnvClusterAddrs), ",")})
	case "unix":
		client = redis.NewClient(&redis.Options{Network: "unix", Addr: os.Getenv("SLIDELOG_BUSY_SOCK")})
	default:
		client = redis.NewClient(&redis.Options{Addr: os.Getenv(redistest.EnvRedisAddr)})
	}
	t.Cleanup(func() { _ = client.Close() })
	opts := []redisstore.Option{redisstore.WithKeyPrefix(os.Getenv("SLIDELOG_BUSY_PREFIX"))}
	var untracked *untrackedCount
	if strings.HasSuffix(topo, "-used") {
		usedBeforeNew(t, client)
		untracked = &untrackedCount{Handler: slog.NewTextHandler(os.Stderr, nil)}
		opts = append(opts, redisstore.WithLogger(slog.New(untracked)))
	}
	store, err := redisstore.New(client, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if untracked != nil && untracked.n.Load() == 0 {
		t.Fatal("the store tracks the connections of a client used before New: this case no longer tests judging in alive time")
	}
	t.Cleanup(func() { _ = store.Close() })
	l, err := slidelog.New(store, slidelog.Policy{Name: "busy", Limit: busyLimit, Window: busyWindow}, slidelog.WithName("busy"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	if os.Getenv("SLIDELOG_BUSY_SPIN") == "true" {
		spinners(t, 48)
	}
	keys := strings.Split(os.Getenv("SLIDELOG_BUSY_KEYS"), ",")
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Second)
	defer cancel()
	var mu sync.Mutex
	var lines []busyLine
	failovers := 0
	var wg sync.WaitGroup
	for i := range busyCallers {
		key := keys[i%len(keys)]
		wg.Go(func() {
			for ctx.Err() == nil {
				res, err := l.Allow(context.Background(), key)
				if err != nil {
					t.Errorf("decision: %v", err)
					return
				}
				mu.Lock()
				if !res.Source.FromStore() && res.Source != slidelog.SourceDenyCache {
					failovers++
				}
				if res.Allowed {
					lines = append(lines, busyLine{Key: key, At: res.DecidedAt.UnixMicro()})
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	w := bufio.NewWriter(os.Stdout)
	for _, a := range append(lines, busyLine{Failovers: failovers}) {
		fmt.Fprintln(w, mustJSON(t, a))
	}
	_ = w.Flush()
}

// untrackedCount counts the store's warnings that a node's connections
// predate it (and writes every record on).
type untrackedCount struct {
	slog.Handler
	n atomic.Int32
}

func (u *untrackedCount) Handle(ctx context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "connections to this node before New") {
		u.n.Add(1)
	}
	return u.Handler.Handle(ctx, r)
}

// usedBeforeNew runs a command on every master of client, as a program
// that checks its client with a PING before it makes the store does: the
// store then finds connections it did not see dialled (see
// redisstore.New's warning).
func usedBeforeNew(t *testing.T, client redis.UniversalClient) {
	t.Helper()
	if c, ok := client.(*redis.ClusterClient); ok {
		err := c.ForEachMaster(t.Context(), func(ctx context.Context, m *redis.Client) error { return m.Ping(ctx).Err() })
		if err != nil {
			t.Fatalf("PING every master before New: %v", err)
		}
		return
	}
	if err := client.Ping(t.Context()).Err(); err != nil {
		t.Fatalf("PING before New: %v", err)
	}
}
