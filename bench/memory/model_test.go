package memory

import (
	"context"
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/memstore"
)

// BenchmarkLayoutModel measures models of the memory store's exact log,
// not the store: each model admits as BenchmarkAdmitWithHistoryKeys does
// (one goroutine, the same keys and clock, one exact policy of an hour,
// each key's log kept at about 120 entries), doing only what an admission
// must: hash the key, find its state, lock it, read the clock, evict the
// oldest entry, append one, unlock. They tell what the lines an admission
// touches cost at 10,000 keys, apart from the code around them:
//
//   - lines-today: an index slot holds the hash and a pointer to a
//     384-byte log whose lock and key are in its first line and whose
//     exact fields are in its third line pair, its ring of 24-byte entries
//     apart, as memlog lays them out;
//   - log-one-pair: lines-today with the log's lock, key and exact fields
//     in its first 128 bytes (one line pair), found through the slot's
//     pointer;
//   - log-three-lines: the same fields over the first 160 bytes of a
//     256-byte log (a pair and the next pair's first line);
//   - header-inline: the log's lock, key and exact fields in the index's
//     slot itself, one 128-byte pair, its ring apart;
//   - header-inline-no-ring: the same, moving only the counters (wrong,
//     but the floor of that layout's lines).
func BenchmarkLayoutModel(b *testing.B) {
	for _, keys := range []int{10, 10_000} {
		h := newHistory(keys)
		name := "keys=10"
		if keys != 10 {
			name = "keys=10000"
		}
		b.Run(name+"/lines-today", func(b *testing.B) {
			runModel(b, h, newModelPointed(keys, todayLayout).take)
		})
		b.Run(name+"/log-one-pair", func(b *testing.B) {
			runModel(b, h, newModelPointed(keys, pairLayout).take)
		})
		b.Run(name+"/log-three-lines", func(b *testing.B) {
			runModel(b, h, newModelPointed(keys, wideLayout).take)
		})
		b.Run(name+"/header-inline", func(b *testing.B) {
			runModel(b, h, newModelInline(keys).take)
		})
		b.Run(name+"/header-inline-no-ring", func(b *testing.B) {
			runModel(b, h, newModelInline(keys).takeNoRing)
		})
	}
}

// runModel warms and measures take as runHistory does on one goroutine,
// on its own clock, and checks that the logs stay at about 120 entries.
func runModel(b *testing.B, h history, take func(now func() int64, key string) int64) {
	clock := newFastClock()
	now := func() int64 { return clock.now().UnixMicro() }
	keys := len(h.names)
	for i := range keys * historyPerKey {
		take(now, h.names[i%keys])
		clock.skew.Add(int64(h.step))
	}
	b.ResetTimer()
	var held int64
	for i := 0; b.Loop(); i++ {
		held = take(now, h.names[i%keys])
		if i%historyAdvance == historyAdvance-1 {
			clock.skew.Add(historyAdvance * int64(h.step))
		}
	}
	b.StopTimer()
	checkHeld(b, int(held))
}

var modelWindow = historyWindow.Microseconds()

// modelEntry is an exact log's entry, as window's: time, ID, running sum.
type modelEntry struct{ at, id, cum int64 }

// modelRing is how many entries a model's ring holds: the power of two
// above 120, as the exact log's ring grows to.
const modelRing = 128

// modelExact is the exact log's fields an admission reads and writes.
type modelExact struct {
	ring                *[modelRing]modelEntry
	head, tail          int64
	base, total, newest int64
	ids                 int64
}

// admit evicts what left the window at now, appends an entry and
// returns the entries held.
func (x *modelExact) admit(now int64) int64 {
	for x.head < x.tail {
		e := &x.ring[x.head%modelRing]
		if e.at > now-modelWindow {
			break
		}
		x.base = e.cum
		x.head++
	}
	x.total++
	x.ids++
	x.ring[x.tail%modelRing] = modelEntry{at: now, id: x.ids, cum: x.total}
	x.tail++
	x.newest = now
	return x.total - x.base
}

// evict drops the entries stamped at or before cutoff: admit's eviction,
// which admit writes out itself so as to stay small enough to inline.
func (x *modelExact) evict(cutoff int64) {
	for x.head < x.tail && x.ring[x.head%modelRing].at <= cutoff {
		x.base = x.ring[x.head%modelRing].cum
		x.head++
	}
}

// countOnly moves the counters as an admission at now would, the log
// holding historyPerKey entries, without touching the ring (wrong, but
// the floor of a layout's lines: header-inline-no-ring,
// whole-model-no-ring), and returns the entries held.
func (x *modelExact) countOnly(now int64) int64 {
	if x.tail-x.head >= historyPerKey {
		x.head++
		x.base++
	}
	x.total++
	x.ids++
	x.tail++
	x.newest = now
	return x.total - x.base
}

// push appends an entry at time at, in time order.
func (x *modelExact) push(at, id, cost int64) {
	x.total += cost
	x.ring[x.tail%modelRing] = modelEntry{at: at, id: id, cum: x.total}
	x.tail++
	x.newest = at
}

// modelPointed is an index of (hash, pointer) slots, the logs apart, as
// memlog's: each log starts with a modelHead, and its exact fields lie
// at an offset the log's layout sets.
type modelPointed struct {
	seed   maphash.Seed
	slots  []modelSlot
	mask   uint64
	layout modelLayout
}

// modelLayout is a log's layout for modelPointed: how to make one, and
// the offset of its exact fields.
type modelLayout struct {
	newLog func() unsafe.Pointer
	off    uintptr
}

var (
	todayLayout = modelLayout{func() unsafe.Pointer { return unsafe.Pointer(new(todayLog)) }, unsafe.Offsetof(todayLog{}.x)}
	pairLayout  = modelLayout{func() unsafe.Pointer { return unsafe.Pointer(new(pairLog)) }, unsafe.Offsetof(pairLog{}.x)}
	wideLayout  = modelLayout{func() unsafe.Pointer { return unsafe.Pointer(new(wideLog)) }, unsafe.Offsetof(wideLog{}.x)}
)

type modelSlot struct {
	hash uint64
	log  unsafe.Pointer // a log starting with a modelHead
}

// modelHead is the start of every log of modelPointed: its lock and key.
type modelHead struct {
	mu  sync.Mutex
	key string
}

// todayLog is 384 bytes, the lock and key in its first line and the
// exact fields from byte 256, as memlog's log.
type todayLog struct {
	modelHead
	_ [232]byte
	x modelExact
	_ [72]byte
}

// pairLog is 128 bytes: the lock, key and exact fields in one pair.
type pairLog struct {
	modelHead
	x modelExact
	_ [128 - unsafe.Sizeof(modelHead{}) - unsafe.Sizeof(modelExact{})]byte
}

// wideLog is 256 bytes, its exact fields from byte 104, up to byte 160.
type wideLog struct {
	modelHead
	_ [80]byte
	x modelExact
	_ [96]byte
}

var (
	_ [384 - unsafe.Sizeof(todayLog{})]byte
	_ [unsafe.Offsetof(todayLog{}.x) - 256]byte
	_ [128 - unsafe.Sizeof(pairLog{})]byte
	_ [256 - unsafe.Sizeof(wideLog{})]byte
	_ [unsafe.Offsetof(wideLog{}.x) - 104]byte
)

func newModelPointed(keys int, layout modelLayout) *modelPointed {
	size := 16
	for size < 3*keys {
		size *= 2
	}
	return &modelPointed{seed: maphash.MakeSeed(), slots: make([]modelSlot, size), mask: uint64(size - 1), layout: layout}
}

func (m *modelPointed) take(now func() int64, key string) int64 {
	h := maphash.String(m.seed, key)
	var l unsafe.Pointer
	for i := h & m.mask; ; i = (i + 1) & m.mask {
		s := &m.slots[i]
		if s.log == nil {
			l = m.layout.newLog()
			(*modelHead)(l).key = key
			(*modelExact)(unsafe.Add(l, m.layout.off)).ring = new([modelRing]modelEntry)
			s.hash, s.log = h, l
			break
		}
		if s.hash == h && (*modelHead)(s.log).key == key {
			l = s.log
			break
		}
	}
	head := (*modelHead)(l)
	head.mu.Lock()
	held := (*modelExact)(unsafe.Add(l, m.layout.off)).admit(now())
	head.mu.Unlock()
	return held
}

// modelInline is an index whose slots are the logs' headers.
type modelInline struct {
	seed  maphash.Seed
	slots []modelHeader
	mask  uint64
}

// modelHeader is a log's lock, key and exact fields in 128 bytes.
type modelHeader struct {
	mu   sync.Mutex
	used bool
	hash uint64
	key  string
	x    modelExact
	_    [128 - 40 - unsafe.Sizeof(modelExact{})]byte
}

var _ [128 - unsafe.Sizeof(modelHeader{})]byte

func newModelInline(keys int) *modelInline {
	size := 16
	for size < 3*keys/2 {
		size *= 2
	}
	// One header more, to start the slots on a 128-byte boundary.
	all := make([]modelHeader, size+1)
	off := (128 - uintptr(unsafe.Pointer(&all[0]))%128) % 128
	slots := unsafe.Slice((*modelHeader)(unsafe.Add(unsafe.Pointer(&all[0]), off)), size)
	return &modelInline{seed: maphash.MakeSeed(), slots: slots, mask: uint64(size - 1)}
}

func (m *modelInline) find(key string) *modelHeader {
	h := maphash.String(m.seed, key)
	for i := h & m.mask; ; i = (i + 1) & m.mask {
		s := &m.slots[i]
		if !s.used {
			s.used, s.hash, s.key, s.x.ring = true, h, key, new([modelRing]modelEntry)
			return s
		}
		if s.hash == h && s.key == key {
			return s
		}
	}
}

func (m *modelInline) take(now func() int64, key string) int64 {
	l := m.find(key)
	l.mu.Lock()
	held := l.x.admit(now())
	l.mu.Unlock()
	return held
}

func (m *modelInline) takeNoRing(now func() int64, key string) int64 {
	l := m.find(key)
	l.mu.Lock()
	held := l.x.countOnly(now())
	l.mu.Unlock()
	return held
}

// wholeLog is a key's state for wholeModel: everything an exact
// decision reads and writes but the ring's entries, in 128 bytes (a block
// of that size class: one aligned pair of lines).
type wholeLog struct {
	mu                  sync.Mutex
	dead                atomic.Bool
	key, namespace      string
	x                   modelExact
	retain, retainUntil int64
}

var _ [128 - unsafe.Sizeof(wholeLog{})]byte

// wholeSlot is a slot of wholeModel's flat index.
type wholeSlot struct {
	hash uint64
	log  *wholeLog
}

// The pieces of today's path that wholeModel adds at each level, each
// level keeping those below it (BenchmarkWholePathModel's rows).
const (
	// levelModel is the model alone.
	levelModel = iota
	// levelShards finds a log as memlog's table does: 64 shards, each
	// with its index behind an atomic pointer, whose slots are an atomic
	// hash and an atomic pointer, in place of one flat index.
	levelShards
	// levelClock reads the clock through an interface whose method calls
	// the store's clock, as memstore's Now does.
	levelClock
	// levelLimiter decides as the limiter does around its table: a
	// decision function behind Allow, the checks as functions, a request
	// built on the stack, and a function that writes one policy's Result.
	levelLimiter
	// levelTable decides as the table and the log do: a take function
	// taking the request by pointer, an ID drawn by a function, the
	// decision and the insertion as functions, the state returned by
	// value.
	levelTable
)

// wholeLevels names BenchmarkWholePathModel's rows, by level.
var wholeLevels = []string{"whole-model", "shards", "clock-interface", "limiter-layers", "table-log-calls"}

// wholeShard is one of the 64 shards wholeModel finds a log through from
// levelShards on.
type wholeShard struct {
	idx atomic.Pointer[wholeIndex]
	_   [64]byte // as memlog's shards, a line apart
}

type wholeIndex struct {
	slots []wholeSharedSlot
	mask  uint64
}

type wholeSharedSlot struct {
	hash atomic.Uint64
	log  atomic.Pointer[wholeLog]
}

// wholeClock is the clock's interface from levelClock on.
type wholeClock interface{ Now() int64 }

// storeClock reads a clock as memstore reads one given by WithClock.
type storeClock struct{ clock func() time.Time }

func (c *storeClock) Now() int64 {
	if c.clock != nil {
		return c.clock().UnixMicro()
	}
	return 0
}

// wholeRequest, wholeState and wholeDecision stand for memlog's request
// and window's state and decision at levelLimiter and levelTable.
type wholeRequest struct {
	namespace, key string
	id             uint64
	cost           int64
}

type wholeState struct {
	allowed                           bool
	remaining, retryAfter, resetAfter int64
}

type wholeDecision struct {
	allowed bool
	steady  int64
}

// wholeModel is a model of Limiter.Allow on a memory store, rebuilt whole
// for one exact policy: the limiter's checks (closed, the key's length,
// the context), a lookup through a (hash, pointer) slot to a one-pair log
// (its key and namespace compared, its dead flag read under its lock),
// the exact decision (eviction, retention, an entry with its ID and
// running sum), and the Result's fields that a memory decision sets,
// written and returned by value. It omits what the store needs besides
// and does off this path or on a log's creation: sweeping, the table's
// bound and growth, the overflow log, the refund's ticket, denials'
// RetryAfter. Its slots are written without a lock: one goroutine only.
//
// From level 1 on (the constants above) it adds the pieces of today's
// path one at a time, to measure what each costs.
type wholeModel struct {
	level int
	// noRing makes the decision move the exact log's counters only, as
	// header-inline-no-ring does (wrong, but the floor of a log whose
	// ring's ends are kept in its pair and written to the ring in
	// batches).
	noRing    bool
	closed    atomic.Bool
	namespace string
	policies  []slidelog.Policy // one
	window    int64
	clock     func() time.Time
	store     wholeClock
	seed      maphash.Seed
	slots     []wholeSlot
	mask      uint64
	shards    [64]wholeShard
}

func newWholeModel(level, keys int, clock func() time.Time) *wholeModel {
	p := slidelog.Policy{Name: "p", Limit: slidelog.MaxLimit, Window: historyWindow}
	m := &wholeModel{level: level, namespace: "p", policies: []slidelog.Policy{p}, window: historyWindow.Microseconds(),
		clock: clock, store: &storeClock{clock}, seed: maphash.MakeSeed()}
	size := slotsFor(keys)
	m.slots, m.mask = make([]wholeSlot, size), uint64(size-1)
	per := slotsFor(keys / len(m.shards))
	for i := range m.shards {
		m.shards[i].idx.Store(&wholeIndex{slots: make([]wholeSharedSlot, per), mask: uint64(per - 1)})
	}
	return m
}

// slotsFor is the power of two of at least 16 slots that leaves an
// index for keys a third full or less.
func slotsFor(keys int) int {
	size := 16
	for size < 3*keys {
		size *= 2
	}
	return size
}

// newWholeLog returns key's log, locked.
func newWholeLog(key, namespace string) *wholeLog {
	l := &wholeLog{key: key, namespace: namespace}
	l.x.ring = new([modelRing]modelEntry)
	l.mu.Lock()
	return l
}

// lock returns key's log, locked, adding one when there is none.
func (m *wholeModel) lock(key, namespace string) *wholeLog {
	h := maphash.String(m.seed, key)
	if m.level >= levelShards {
		return m.lockShared(h, key, namespace)
	}
	for i := h & m.mask; ; i = (i + 1) & m.mask {
		s := &m.slots[i]
		if s.log == nil {
			s.hash, s.log = h, newWholeLog(key, namespace)
			return s.log
		}
		if l := s.log; s.hash == h && l.key == key && l.namespace == namespace {
			l.mu.Lock()
			if !l.dead.Load() {
				return l
			}
			l.mu.Unlock()
		}
	}
}

// lockShared is lock through the shards.
func (m *wholeModel) lockShared(h uint64, key, namespace string) *wholeLog {
	x := m.shards[h%uint64(len(m.shards))].idx.Load()
	for i := (h / uint64(len(m.shards))) & x.mask; ; i = (i + 1) & x.mask {
		s := &x.slots[i]
		l := s.log.Load()
		if l == nil {
			l = newWholeLog(key, namespace)
			s.hash.Store(h)
			s.log.Store(l)
			return l
		}
		if s.hash.Load() == h && l.key == key && l.namespace == namespace {
			l.mu.Lock()
			if !l.dead.Load() {
				return l
			}
			l.mu.Unlock()
		}
	}
}

// now reads the clock in microseconds.
func (m *wholeModel) now() int64 {
	if m.level >= levelClock {
		return m.store.Now()
	}
	return m.clock().UnixMicro()
}

// retainAndEvict sets l's retention to the window at now and drops the
// entries that left it, returning l's exact fields.
func (m *wholeModel) retainAndEvict(l *wholeLog, now int64) *modelExact {
	l.retain, l.retainUntil = m.window, now+m.window
	l.x.evict(now - m.window)
	return &l.x
}

// decide makes the exact decision on l at now for a request of cost 1,
// recording it under the log's next ID when it is admitted.
func (m *wholeModel) decide(l *wholeLog, now int64) (allowed bool, units, newest int64) {
	if m.noRing {
		l.retain, l.retainUntil = m.window, now+m.window
		return true, l.x.countOnly(now), now
	}
	x := m.retainAndEvict(l, now)
	units = x.total - x.base
	allowed = units+1 <= int64(m.policies[0].Limit)
	if allowed {
		x.ids++
		x.push(now, x.ids, 1)
		units++
	}
	return allowed, units, x.newest
}

// allow is wholeModel's Allow. It is not inlined, so that the Result is
// returned by value, as Limiter.Allow returns it.
//
//go:noinline
func (m *wholeModel) allow(ctx context.Context, key string) (res slidelog.Result, err error) {
	if m.level >= levelLimiter {
		err = m.decideLayered(ctx, &res, key, 1)
		return res, err
	}
	if m.closed.Load() {
		return res, slidelog.ErrClosed
	}
	if len(key) == 0 || len(key) > 1024 {
		return res, slidelog.ErrInvalidKey
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	l := m.lock(key, m.namespace)
	now := m.now()
	allowed, units, newest := m.decide(l, now)
	l.mu.Unlock()
	p := &m.policies[0]
	res.Allowed = allowed
	res.Limit = p.Limit
	res.Remaining = int(int64(p.Limit) - units)
	res.ResetAfter = time.Duration(newest+m.window-now) * time.Microsecond
	res.Policy = *p
	res.Source = memstore.Source
	res.DecidedAt = time.UnixMicro(now)
	return res, nil
}

// decideLayered is allow from levelLimiter on, layered as the limiter's
// decide, check and memory path are.
//
//go:noinline
func (m *wholeModel) decideLayered(ctx context.Context, res *slidelog.Result, key string, n int) error {
	if err := m.check(ctx, key); err != nil {
		return err
	}
	policies := m.policies
	if n < 1 || n > policies[0].Limit {
		return slidelog.ErrInvalidCost
	}
	var req wholeRequest
	req.namespace, req.key, req.cost = m.namespace, key, int64(n)
	var st wholeState
	var d wholeDecision
	var now int64
	if m.level >= levelTable {
		st, d, now = m.take(m.store, &req)
	} else {
		l := m.lock(req.key, req.namespace)
		now = m.now()
		allowed, units, newest := m.decide(l, now)
		l.mu.Unlock()
		st = wholeState{allowed: allowed, remaining: int64(policies[0].Limit) - units, resetAfter: newest + m.window - now}
		d = wholeDecision{allowed: allowed}
	}
	setWholeResult(res, &policies[0], d, now, st)
	return nil
}

// check is the limiter's checks, as functions.
func (m *wholeModel) check(ctx context.Context, key string) error {
	if m.closed.Load() {
		return slidelog.ErrClosed
	}
	if err := validateWholeKey(key); err != nil {
		return err
	}
	return ctx.Err()
}

func validateWholeKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty", slidelog.ErrInvalidKey)
	}
	if len(key) > 1024 {
		return fmt.Errorf("%w: %d bytes, want at most 1024", slidelog.ErrInvalidKey, len(key))
	}
	return nil
}

// setWholeResult writes one policy's Result, as the limiter does.
//
//go:noinline
func setWholeResult(res *slidelog.Result, p *slidelog.Policy, d wholeDecision, now int64, st wholeState) {
	res.Allowed = d.allowed
	res.Limit = p.Limit
	res.Remaining = int(st.remaining)
	res.RetryAfter = time.Duration(st.retryAfter) * time.Microsecond
	res.ResetAfter = time.Duration(st.resetAfter) * time.Microsecond
	res.Policy = *p
	res.Source = memstore.Source
	res.DecidedAt = time.UnixMicro(now)
	res.StableFor = time.Duration(d.steady) * time.Microsecond
}

// take is the table's take at levelTable.
//
//go:noinline
func (m *wholeModel) take(clock wholeClock, req *wholeRequest) (wholeState, wholeDecision, int64) {
	l := m.lock(req.key, req.namespace)
	now := clock.Now()
	if req.id == 0 {
		req.id = newWholeID(&l.x)
	}
	st, d := m.takeExact(l, now, req.id, req.cost)
	l.mu.Unlock()
	return st, d, now
}

// newWholeID is the log's next request ID, as window.Log.NewID draws it.
//
//go:noinline
func newWholeID(x *modelExact) uint64 {
	if x.ids == 0 {
		x.ids = int64(rand.Uint64() >> 1)
	}
	x.ids++
	if x.ids == 0 {
		x.ids = 1
	}
	return uint64(x.ids)
}

// takeExact is the log's exact decision at levelTable.
//
//go:noinline
func (m *wholeModel) takeExact(l *wholeLog, now int64, id uint64, cost int64) (out wholeState, d wholeDecision) {
	limit := int64(m.policies[0].Limit)
	x := m.retainAndEvict(l, now)
	units := x.total - x.base
	out.allowed = units+cost <= limit
	if out.allowed {
		insertWhole(x, now, int64(id), cost)
		units += cost
	}
	out.remaining = max(0, limit-units)
	if x.tail == x.head {
		return out, wholeDecision{allowed: out.allowed}
	}
	out.resetAfter = max(0, x.newest+m.window-now)
	return out, wholeDecision{allowed: out.allowed}
}

// insertWhole appends an entry, as the log's insertion does in time
// order (the model's entries all come in order).
//
//go:noinline
func insertWhole(x *modelExact, at, id, cost int64) { x.push(at, id, cost) }

// BenchmarkWholePathModel runs wholeModel as BenchmarkAdmitWithHistoryKeys
// runs Limiter.Allow (runHistory: the same keys, clock and warm-up), at
// 10,000 keys on one goroutine: whole-model is the floor of an admission
// on a key with history for a decision path rebuilt whole, the layout of
// the log-one-pair model with the limiter's part around it; each further
// row adds one more piece of today's path (the level constants), to set
// beside go-limiter's and Allow's in the same runs.
func BenchmarkWholePathModel(b *testing.B) {
	h := newHistory(historyKeys)
	for level, name := range wholeLevels {
		b.Run(name, func(b *testing.B) {
			clock := newFastClock()
			m := newWholeModel(level, historyKeys, clock.now)
			ctx := context.Background()
			var held int
			runHistory(b, h, 1, func(key string) {
				res, err := m.allow(ctx, key)
				if err != nil || !res.Allowed {
					b.Fatalf("%+v, %v", res, err)
				}
				held = res.Limit - res.Remaining
			}, func(n int) { clock.skew.Add(int64(n) * int64(h.step)) })
			checkHeld(b, held)
		})
	}
}

// BenchmarkDependentCalls runs Limiter.Allow, go-limiter and the
// whole-path model as BenchmarkAdmitWithHistoryKeys and
// BenchmarkWholePathModel do (10,000 keys, one goroutine), but with each
// call's key chosen from the result of the call before it (runDependent):
// the latency of a decision, as a server meets it between two requests,
// rather than the throughput of calls back to back, which lets a short
// path start the next call's loads before the last one returns.
// whole-model-no-ring is whole-model moving the exact log's counters only
// (noRing).
func BenchmarkDependentCalls(b *testing.B) {
	h := newHistory(historyKeys)
	ctx := context.Background()
	b.Run("slidelog", func(b *testing.B) {
		clock := newFastClock()
		store := memstore.New(memstore.WithClock(clock.now))
		defer store.Close()
		l := slidelog.MustNew(store, slidelog.Policy{Name: "p", Limit: slidelog.MaxLimit, Window: historyWindow})
		defer l.Close()
		runDependent(b, h, func(key string) int {
			res, err := l.Allow(ctx, key)
			if err != nil || !res.Allowed {
				b.Fatalf("%+v, %v", res, err)
			}
			return int(uint(res.Remaining) >> 63)
		}, func(n int) { clock.skew.Add(int64(n) * int64(h.step)) })
		res, err := l.Peek(ctx, h.names[0])
		if err != nil {
			b.Fatal(err)
		}
		checkHeld(b, res.Limit-res.Remaining)
	})
	b.Run("go-limiter", func(b *testing.B) {
		s := goLimiter(b, 1<<62, historyWindow)
		runDependent(b, h, func(key string) int {
			_, remaining, _, ok, _ := s.Take(ctx, key)
			if !ok {
				b.Fatal("denied")
			}
			return int(remaining >> 63)
		}, func(int) {})
	})
	for _, noRing := range []bool{false, true} {
		name := "whole-model"
		if noRing {
			name += "-no-ring"
		}
		b.Run(name, func(b *testing.B) {
			clock := newFastClock()
			m := newWholeModel(levelModel, historyKeys, clock.now)
			m.noRing = noRing
			var held int
			runDependent(b, h, func(key string) int {
				res, err := m.allow(ctx, key)
				if err != nil || !res.Allowed {
					b.Fatalf("%+v, %v", res, err)
				}
				held = res.Limit - res.Remaining
				return int(uint(res.Remaining) >> 63)
			}, func(n int) { clock.skew.Add(int64(n) * int64(h.step)) })
			checkHeld(b, held)
		})
	}
}

// runDependent warms every key of h as runHistory does, then measures
// decide on the keys in turn on one goroutine, each key's index offset by
// what the decision before it returned (0, computed from its result), so
// that no call starts before the one before it has returned.
func runDependent(b *testing.B, h history, decide func(key string) int, advance func(n int)) {
	keys := len(h.names)
	for i := range keys * historyPerKey {
		decide(h.names[i%keys])
		advance(1)
	}
	b.ReportAllocs()
	b.ResetTimer()
	dep := 0
	for i := 0; b.Loop(); i++ {
		dep = decide(h.names[(i+dep)%keys])
		if i%historyAdvance == historyAdvance-1 {
			advance(historyAdvance)
		}
	}
}

// checkHeld fails b unless a log holds about historyPerKey entries.
func checkHeld(b *testing.B, held int) {
	b.Helper()
	if held < historyPerKey-2 || held > historyPerKey+2 {
		b.Fatalf("a log holds %d entries, want about %d", held, historyPerKey)
	}
	b.ReportMetric(float64(held), "entries/key")
}
