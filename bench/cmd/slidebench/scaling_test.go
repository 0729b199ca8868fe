package main

import (
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
)

func TestCommandStats(t *testing.T) {
	info := "# Commandstats\r\n" +
		"cmdstat_evalsha:calls=100,usec=2500,usec_per_call=25.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_eval:calls=2,usec=100,usec_per_call=50.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_zadd:calls=100,usec=300,usec_per_call=3.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_zremrangebyscore:calls=102,usec=200,usec_per_call=1.96,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_info:calls=7,usec=900,usec_per_call=128.57,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_config|resetstat:calls=1,usec=10,usec_per_call=10.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_cluster|slots:calls=3,usec=60,usec_per_call=20.00,rejected_calls=0,failed_calls=0\r\n"
	scripts, usec, inner := commandStats(info)
	if scripts != 102 || usec != 2600 || inner != 202 {
		t.Errorf("commandStats = %d script calls, %v µs, %d inner calls; want 102, 2600, 202", scripts, usec, inner)
	}
}

func TestReplaceSections(t *testing.T) {
	res := &ScalingResults{
		Cells: []ScalingCell{
			{Masters: 1, Contender: "slidelog", PerSec: 1000, CPUUsec: 40},
			{Masters: 2, Contender: "slidelog", PerSec: 1500, CPUUsec: 40},
		},
		Migrate: []ScalingMigrate{{Limit: 1000, Bytes: 94000, WallMs: 1.5}},
		Memory:  []ScalingMemory{{Contender: "slidelog", Limit: 100, Entries: 100, Bytes: 2300, PerEntry: 23, Keys: 10, UsedPerKey: 2400}},
	}
	doc := "intro\n<!-- scaling-run:begin (generated) -->\nold run\n<!-- scaling-run:end -->\nmiddle\n" +
		"<!-- scaling-memory:begin -->\nold memory\n<!-- scaling-memory:end -->\n" +
		"<!-- scaling-sizing:begin -->\n<!-- scaling-sizing:end -->\n" +
		"<!-- scaling-migrate:begin -->\n<!-- scaling-migrate:end -->\noutro\n"
	got, err := replaceSections(doc, res)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"intro\n<!-- scaling-run:begin (generated) -->\n", "| 2 | slidelog | 1.50k | 1.50x |", "middle\n", "| slidelog | 100 | 100 | 2300 B | 23.0 |", "| 100k | 100 per minute |", "| 1000 | 94000 B | 1.50 ms |", "outro\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("rewritten doc lacks %q:\n%s", want, got)
		}
	}
	for _, old := range []string{"old run", "old memory"} {
		if strings.Contains(got, old) {
			t.Errorf("rewritten doc still holds %q", old)
		}
	}
	again, err := replaceSections(got, res)
	if err != nil || again != got {
		t.Errorf("rewriting twice changed the doc (err %v)", err)
	}
	if _, err := replaceSections("no markers\n", res); err == nil {
		t.Error("replaceSections without markers: no error")
	}
}

// TestScratchCluster starts a Cluster of 2 masters, writes keys through a
// Cluster client, and checks that stop leaves no server and frees the
// ports.
func TestScratchCluster(t *testing.T) {
	redistest.RequireBinary(t, "redis-server")
	// A random base, so that parallel runs and other rigs do not collide.
	var base int
	for range 20 {
		base = 20000 + rand.IntN(20000)
		if redistest.PortsFree(base, base+1, base+10000, base+10001) == nil {
			break
		}
	}
	ctx := t.Context()
	cl, err := startCluster(ctx, base, 2)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = cl.stop()
		}
	})
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.seeds()})
	defer func() { _ = client.Close() }()
	for i := range 200 {
		if err := client.Set(ctx, "k"+strconv.Itoa(i), i, 0).Err(); err != nil {
			t.Fatalf("SET through the Cluster client: %v", err)
		}
	}
	for i, n := range cl.nodes {
		size, err := n.DBSize(ctx).Result()
		if err != nil || size == 0 {
			t.Errorf("master %d holds %d keys (%v), want some of the 200", cl.ports[i], size, err)
		}
	}
	if err := cl.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	stopped = true
	for _, n := range cl.Nodes {
		select {
		case <-n.Exited():
		default:
			t.Errorf("redis-server %d still running after stop", n.Pid())
		}
		if _, err := os.Stat(n.Dir); !os.IsNotExist(err) {
			t.Errorf("%s still there after stop (%v)", n.Dir, err)
		}
	}
	if err := redistest.PortsFree(cl.ports...); err != nil {
		t.Errorf("after stop: %v", err)
	}
}
