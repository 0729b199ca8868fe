package redisstore

import (
	"context"
	"crypto/rand"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/internal/monotime"
)

// A master that loses its dataset (restarted without persistence before
// its replica took over, FLUSHALL, FLUSHDB, the store's keys deleted)
// answers the next decisions of its identities from empty logs: a
// rolling window that spans the loss may admit up to twice its limit, and
// no reply says so. The store finds it out with a canary: a key of its
// own on every master (on a Cluster, in the first slot the master
// serves), holding a random
// token, with no expiry. New writes the canaries that are missing and
// reads the tokens; while decisions are made, the store reads them again
// at most once per canaryEvery, on a goroutine of its own started from
// a reply to one of its calls. A canary gone,
// or holding another token (another process found it gone and wrote it
// anew), is a master that lost its keys: the store logs it at ERROR and
// tells the limiters on it (slidelog.EventDataLost, Notify), and writes
// the canary again. A master whose canary a process never read, such as
// one that lost its keys before the process started, is not reported.
// A replica promoted in its master's place holds the canary it copied, so
// a failover is no loss; what a replica had not yet copied is bounded
// apart (WithReplicaAck).
//
// The canary reads nothing while the store makes no call, and at most one
// reading runs at a time; Close ends it. A reading that fails (a node
// down or stalled) reports nothing: the decisions report a failing node.

// canaryEvery is how often, at most, the store reads its canaries while
// decisions are made.
const canaryEvery = time.Second

// canaryTimeout bounds one reading of the canaries.
const canaryTimeout = time.Second

// canaries is a store's reading of its canaries and the functions it
// tells of a loss.
type canaries struct {
	next    atomic.Int64 // monotime.Now when the next reading is due
	running atomic.Bool  // a reading runs

	mu     sync.Mutex
	closed bool
	ctx    context.Context // ended by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// Owned by the running reading (one at a time): the token last read
	// from each canary, by canaryTarget.id; the hash tags of the slots
	// canaries were placed in; whether a refusal of the canary's
	// commands was logged.
	seen    map[string]string
	tags    map[int]string
	refused bool
	// checked holds the masters checked, by address, and lateTries the
	// late checks cut short so far of those not yet checked (latecheck.go).
	checked   map[string]bool
	lateTries map[string]int

	lmu       sync.RWMutex
	listeners map[*func(string, slidelog.StoreEvent)]struct{}
}

func newCanaries() *canaries {
	c := &canaries{seen: map[string]string{}, tags: map[int]string{}, checked: map[string]bool{}, lateTries: map[string]int{}, listeners: map[*func(string, slidelog.StoreEvent)]struct{}{}}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	// New has just read them.
	c.next.Store(monotime.Now() + int64(canaryEvery))
	return c
}

// canaryTarget is one canary: its key, the client that reaches it and the
// master it names.
type canaryTarget struct {
	client redis.Cmdable
	key    string
	node   string // the master's address, as Route.Node gives it
	// id names the canary in canaries.seen: its key, which on a Cluster
	// follows its slots from master to master; on a Ring, whose shards
	// hold one key each, the shard's address and the key.
	id string
}

// canaryDue starts a reading of the canaries when one is due at now
// (monotime): it is told of every reply of a node's to a call of the
// store's (monitor.onReply), so that a store without calls reads nothing
// and keeps no goroutine, and a call pays for no clock read of its own.
func (s *Store) canaryDue(now int64) {
	c := s.canary
	if now < c.next.Load() || !c.running.CompareAndSwap(false, true) {
		return
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		c.running.Store(false)
		return
	}
	c.next.Store(now + int64(canaryEvery))
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		defer c.running.Store(false)
		defer s.recoverCanary(nil)
		ctx, cancel := context.WithTimeout(c.ctx, canaryTimeout)
		defer cancel()
		s.readCanaries(ctx)
	}()
}

// recoverCanary, deferred on a goroutine of a reading of the canaries,
// recovers a panic of the client's (a hook's, the dialer's) or of a
// function given to Notify, logs it, and makes it the reading's error at
// err, if any.
func (s *Store) recoverCanary(err *error) {
	if p := recover(); p != nil {
		s.pipes.mon.panics.log(panicCanary, p)
		if err != nil {
			*err = panicError(panicCanary, p)
		}
	}
}

// closeCanaries ends a running reading and waits for it; no reading
// starts after it.
func (s *Store) closeCanaries() {
	c := s.canary
	c.mu.Lock()
	c.closed = true
	c.cancel()
	c.mu.Unlock()
	c.wg.Wait()
}

// readCanaries reads every canary (see canaries): a loss found is logged
// and told, and a canary missing is written. Only one runs at a time.
func (s *Store) readCanaries(ctx context.Context) {
	c := s.canary
	targets := s.canaryTargets(ctx)
	tokens := make([]string, len(targets))
	errs := make([]error, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Go(func() {
			defer s.recoverCanary(&errs[i])
			tokens[i], errs[i] = t.client.Get(ctx, t.key).Result()
		})
	}
	wg.Wait()
	for i, t := range targets {
		token, err := tokens[i], errs[i]
		gone := errors.Is(err, redis.Nil)
		if gone {
			if token, err = s.writeCanary(ctx, t); err != nil {
				// Gone, and not written again: "" stands for it, so that
				// the loss is told now and not again when another
				// process writes the canary.
				s.canaryRefused(err)
				token = ""
			}
		} else if redis.HasErrorPrefix(err, "WRONGTYPE") {
			// A damaged canary (another type written over it): not a
			// loss of the logs, but the canary must hold a token again.
			if token, err = s.mendCanary(ctx, t); err != nil {
				continue
			}
			c.seen[t.id] = token
			continue
		} else if err != nil {
			s.canaryRefused(err)
			continue
		}
		s.lateCheck(ctx, t)
		prev, known := c.seen[t.id]
		c.seen[t.id] = token
		if !known || prev == token || prev == "" {
			continue
		}
		how := "written anew by another process"
		if gone {
			how = "gone"
		}
		// Told first: a panic of the logger loses the record, not the
		// event.
		s.tell(t.node, slidelog.EventDataLost)
		s.logger.Error("redisstore: a master lost the store's keys (a restart without persistence, FLUSHALL or FLUSHDB, or a deletion under the key prefix): "+
			"its identities' logs started again from empty, so a rolling window that spans the loss may admit up to twice its limit",
			"node", nodeName(t.node), "canary", t.key, "found", how)
	}
}

// writeCanary writes t's canary with a new token unless another process
// wrote one first, and returns the token the canary holds.
func (s *Store) writeCanary(ctx context.Context, t canaryTarget) (string, error) {
	token := rand.Text()
	set, err := t.client.SetNX(ctx, t.key, token, 0).Result()
	if err != nil || set {
		return token, err
	}
	return t.client.Get(ctx, t.key).Result()
}

// mendCanary writes a new token over t's canary, which holds another
// type, and logs it.
func (s *Store) mendCanary(ctx context.Context, t canaryTarget) (string, error) {
	token := rand.Text()
	if err := t.client.Set(ctx, t.key, token, 0).Err(); err != nil {
		s.canaryRefused(err)
		return "", err
	}
	s.logger.Warn("redisstore: a canary key held another type (written over by something else than the store); written again, as a damaged key", "node", nodeName(t.node), "canary", t.key)
	return token, nil
}

// canaryRefused logs, once per store, that the Redis user may not read or
// write the canaries (an ACL, a command renamed away): a loss then goes
// unreported. Other errors (a node down, a timeout) are left to the
// decisions.
func (s *Store) canaryRefused(err error) {
	if s.canary.refused || !noPermission(err) && !unknownCommand(err) {
		return
	}
	s.canary.refused = true
	s.logger.Warn("redisstore: the redis user may not read or write the store's canary keys (GET, SET under the key prefix): a master that loses its keys goes unreported",
		"error", err)
}

// canaryTargets lists the canaries: on a Cluster one per master, in the
// first slot it serves (a canary moves with its slot in a reshard, and
// stays known by its key); on a Ring one per shard; on a single server
// (or its failover client) one.
func (s *Store) canaryTargets(ctx context.Context) []canaryTarget {
	key := s.prefix + "canary"
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		ranges, err := c.ClusterSlots(ctx).Result()
		if err != nil {
			return nil
		}
		// One canary per master, in the first slot it serves, however
		// many ranges the slot map splits its slots into.
		first := map[string]int{}
		for _, r := range ranges {
			if len(r.Nodes) == 0 {
				continue
			}
			addr := r.Nodes[0].Addr
			if slot, ok := first[addr]; !ok || int(r.Start) < slot {
				first[addr] = int(r.Start)
			}
		}
		var ts []canaryTarget
		for addr, slot := range first {
			k := key + ":{" + s.slotTag(slot) + "}"
			ts = append(ts, canaryTarget{client: c, key: k, node: addr, id: k})
		}
		return ts
	case *redis.Ring:
		var mu sync.Mutex
		var ts []canaryTarget
		_ = c.ForEachShard(ctx, func(_ context.Context, shard *redis.Client) error {
			mu.Lock()
			addr := shard.Options().Addr
			ts = append(ts, canaryTarget{client: shard, key: key, node: addr, id: addr + " " + key})
			mu.Unlock()
			return nil
		})
		return ts
	case *redis.Client:
		return []canaryTarget{{client: c, key: key, node: s.pipes.singleNode(), id: key}}
	}
	return nil
}

// slotTag returns a hash tag of slot: a short string whose Cluster hash
// slot is slot.
func (s *Store) slotTag(slot int) string {
	tags := s.canary.tags
	if t, ok := tags[slot]; ok {
		return t
	}
	for i := 0; ; i++ {
		t := "c" + strconv.Itoa(i)
		if int(crc16(t)%16384) == slot {
			tags[slot] = t
			return t
		}
	}
}

// crc16 is the CRC-16/XMODEM of s, whose remainder by 16384 is the Redis
// Cluster hash slot of a key (or of its hash tag).
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// tell calls every function given to Notify with event at node; a panic
// of one is recovered and logged, and the others are called all the same.
func (s *Store) tell(node string, event slidelog.StoreEvent) {
	c := s.canary
	c.lmu.RLock()
	defer c.lmu.RUnlock()
	for fn := range c.listeners {
		func() {
			defer s.recoverCanary(nil)
			(*fn)(node, event)
		}()
	}
}

// Notify implements slidelog.Notifier: fn is told of each master found to
// have lost the store's keys (slidelog.EventDataLost, see the store's
// doc), with the master's address (Route.Node's), from a goroutine of the
// store's.
func (s *Store) Notify(fn func(node string, event slidelog.StoreEvent)) (stop func()) {
	c := s.canary
	p := &fn
	c.lmu.Lock()
	c.listeners[p] = struct{}{}
	c.lmu.Unlock()
	return sync.OnceFunc(func() {
		c.lmu.Lock()
		delete(c.listeners, p)
		c.lmu.Unlock()
	})
}

var _ slidelog.Notifier = (*Store)(nil)
