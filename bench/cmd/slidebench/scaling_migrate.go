package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
)

// ScalingMigrate is what moving one full slidelog key to another master
// cost, the way a reshard moves it: its slot set MIGRATING and IMPORTING,
// then one MIGRATE of the key's keys (the log, its costs, its state).
type ScalingMigrate struct {
	Limit  int     `json:"limit"`
	Bytes  int64   `json:"memory_usage_bytes"`
	WallMs float64 `json:"migrate_wall_ms"`
	// SourceMs is MIGRATE's time on the source master (INFO
	// commandstats): the master runs nothing else meanwhile. TargetMs is
	// RESTORE-ASKING's time on the target.
	SourceMs float64 `json:"source_ms"`
	TargetMs float64 `json:"target_ms"`
}

// measureMigrate fills one key to each limit and moves its slot from its
// master to another one, timing the MIGRATE. It needs two masters at
// least; the slots stay where they were moved.
func measureMigrate(ctx context.Context, client *redis.ClusterClient, nodes []*redis.Client, ports []int, limits []int) ([]ScalingMigrate, error) {
	if len(nodes) < 2 || len(limits) == 0 {
		return nil, nil
	}
	store, err := redisstore.New(client, redisstore.WithKeyPrefix("mig:"))
	if err != nil {
		return nil, err
	}
	defer func() { _ = store.Close() }()
	ids := make([]string, len(nodes))
	for i, n := range nodes {
		if ids[i], err = n.ClusterMyID(ctx).Result(); err != nil {
			return nil, err
		}
	}
	var out []ScalingMigrate
	for _, limit := range limits {
		l, err := slidelog.New(store, slidelog.Policy{Name: "mig", Limit: limit, Window: time.Hour}, slidelog.WithName("mig-"+strconv.Itoa(limit)))
		if err != nil {
			return out, err
		}
		err = fillKeys(ctx, l, []string{"full"}, limit)
		key := store.LogKey(l.Name(), "full")
		err = errors.Join(err, l.Close())
		if err != nil {
			return out, err
		}
		m, err := migrateKey(ctx, client, nodes, ids, ports, key)
		if err != nil {
			return out, fmt.Errorf("limit %d: %w", limit, err)
		}
		m.Limit = limit
		fmt.Printf("migrate slidelog limit %5d: %d B, MIGRATE %.2f ms wall, %.2f ms on the source, RESTORE %.2f ms on the target\n",
			limit, m.Bytes, m.WallMs, m.SourceMs, m.TargetMs)
		out = append(out, m)
	}
	return out, nil
}

// migrateKey moves key's slot, with key in it, to the next master.
func migrateKey(ctx context.Context, client *redis.ClusterClient, nodes []*redis.Client, ids []string, ports []int, key string) (ScalingMigrate, error) {
	var m ScalingMigrate
	slot, err := client.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		return m, err
	}
	src := 0 // the master of slot in startCluster's even ranges
	for i := range nodes {
		if int(slot) >= i*clusterSlots/len(nodes) {
			src = i
		}
	}
	dst := (src + 1) % len(nodes)
	keys, err := nodes[src].ClusterGetKeysInSlot(ctx, int(slot), 100).Result()
	if err != nil {
		return m, err
	}
	if len(keys) == 0 {
		return m, fmt.Errorf("slot %d holds no key on master %d", slot, ports[src])
	}
	if m.Bytes, err = logMemoryUsage(ctx, nodes[src], key); err != nil {
		return m, err
	}
	steps := []*redis.Client{nodes[dst], nodes[src]}
	if err := steps[0].Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", ids[src]).Err(); err != nil {
		return m, err
	}
	if err := steps[1].Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", ids[dst]).Err(); err != nil {
		return m, err
	}
	for _, n := range steps {
		if err := n.ConfigResetStat(ctx).Err(); err != nil {
			return m, err
		}
	}
	args := []any{"MIGRATE", "127.0.0.1", ports[dst], "", 0, 10000, "KEYS"}
	for _, k := range keys {
		args = append(args, k)
	}
	t0 := time.Now()
	if err := nodes[src].Do(ctx, args...).Err(); err != nil {
		return m, fmt.Errorf("MIGRATE: %w", err)
	}
	m.WallMs = float64(time.Since(t0).Microseconds()) / 1e3
	for _, n := range nodes {
		if err := n.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", ids[dst]).Err(); err != nil {
			return m, err
		}
	}
	srcStats, err := nodes[src].Info(ctx, "commandstats").Result()
	if err != nil {
		return m, err
	}
	dstStats, err := nodes[dst].Info(ctx, "commandstats").Result()
	if err != nil {
		return m, err
	}
	m.SourceMs = commandUsec(srcStats, "migrate") / 1e3
	m.TargetMs = commandUsec(dstStats, "restore-asking") / 1e3
	return m, nil
}

// commandUsec returns the usec of command in an INFO commandstats reply.
func commandUsec(info, command string) float64 {
	_, usec := statFields(infoSection(info)["cmdstat_"+command])
	return usec
}
