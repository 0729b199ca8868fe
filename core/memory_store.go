package slidelog

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of the MemoryStore.
const (
	// DefaultMaxKeys is how many identities a MemoryStore tracks with a
	// log of their own (see MemoryStore).
	DefaultMaxKeys = 100_000
	// DefaultSweepInterval is how often a MemoryStore removes the logs
	// whose every entry has left its longest window.
	DefaultSweepInterval = time.Minute
	// MinSweepInterval is the shortest sweep interval WithSweepInterval
	// accepts: a sweep visits every log, so a shorter one mostly burns CPU.
	MinSweepInterval = time.Second
)

// MemoryStore keeps each identity's log in process memory, with exactly the
// semantics of RedisStore (it passes the same conformance suite) but for
// one process only. It is the store to use without Redis, in tests, and as
// the fallback of a Redis-backed limiter.
//
// The number of identities with their own log is bounded (WithMaxKeys).
// A new identity at a full store takes the place of a log whose entries
// have all left their windows, the one that expired first; a log that
// still holds entries is never dropped, so minting identities never
// resets anyone's window. When every log is live, new identities share
// one overflow log per limiter (per Request.Namespace) until a log
// expires: together they get one identity's budget. Size WithMaxKeys
// above the number of identities active within the longest window, so
// that real clients never share it. A background goroutine sweeps
// expired logs every sweep interval until Close. MemoryStore is safe for
// concurrent use.
type MemoryStore struct {
	err    error // an invalid option: every call fails with it
	logs   *logTable
	clock  func() time.Time
	start  time.Time
	closed atomic.Bool
	stop   chan struct{}
	done   sync.WaitGroup
}

// logKey names a log: the limiter's namespace and the identity, kept as
// two strings so that no key is concatenated per call.
type logKey struct{ namespace, key string }

// memoryLog is one identity's log: entries in time order, one per admitted
// request, with the running total of units so counts are two lookups.
type memoryLog struct {
	mu      sync.Mutex
	entries []memoryEntry
	expires int64       // microseconds; when every entry has left the longest window
	dead    atomic.Bool // removed from the store; a caller holding it must look again
	// retain is the longest window a limiter of this log needs, until
	// retainUntil (microseconds): a limiter with shorter windows keeps the
	// entries it needs meanwhile, as the Redis script does.
	retain, retainUntil int64
}

type memoryEntry struct {
	at   int64  // microseconds
	id   uint64 // request ID
	cost int64
	cum  int64 // units recorded in this log up to and including this entry
}

// NewMemoryStore returns a store in process memory. Options: WithMaxKeys,
// WithSweepInterval, WithClock; options of RedisStore are ignored. An
// invalid option (a sweep interval under MinSweepInterval) makes New fail
// on the store, and every call of the store, with ErrInvalidOption; the
// store must still be closed.
func NewMemoryStore(opts ...StoreOption) *MemoryStore {
	cfg := storeConfig{}
	for _, o := range opts {
		if o != nil {
			_ = o.applyStore(&cfg) // only RedisStore's options fail here
		}
	}
	if cfg.maxKeys <= 0 {
		cfg.maxKeys = DefaultMaxKeys
	}
	if cfg.sweepInterval <= 0 {
		cfg.sweepInterval = DefaultSweepInterval
	}
	s := &MemoryStore{err: cfg.memoryErr, logs: newLogTable(cfg.maxKeys), clock: cfg.clock, start: time.Now(), stop: make(chan struct{})}
	s.done.Add(1)
	go s.sweep(cfg.sweepInterval)
	return s
}

// WithMaxKeys bounds how many identities a MemoryStore keeps (default
// DefaultMaxKeys; n <= 0 keeps the default). RedisStore ignores it.
func WithMaxKeys(n int) StoreOption {
	return storeOptionFunc(func(c *storeConfig) error {
		c.maxKeys = n
		return nil
	})
}

// WithSweepInterval sets how often a MemoryStore removes expired logs
// (default DefaultSweepInterval; d <= 0 keeps the default). An interval
// under MinSweepInterval is rejected with ErrInvalidOption (see
// NewMemoryStore). RedisStore ignores it; Redis expires its keys itself.
func WithSweepInterval(d time.Duration) StoreOption {
	return storeOptionFunc(func(c *storeConfig) error {
		if d > 0 && d < MinSweepInterval {
			c.memoryErr = fmt.Errorf("%w: sweep interval %v, want >= %v", ErrInvalidOption, d, MinSweepInterval)
			return nil
		}
		c.sweepInterval = d
		return nil
	})
}

// configErr returns the error of an invalid option, which New reports.
func (s *MemoryStore) configErr() error { return s.err }

// usable reports why the store cannot serve a call: closed, an invalid
// option, or ctx done.
func (s *MemoryStore) usable(ctx context.Context) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if s.err != nil {
		return s.err
	}
	return ctx.Err()
}

// Len returns how many identities the store holds now.
func (s *MemoryStore) Len() int { return s.logs.len() }

// now returns the store's time in microseconds: monotonic unless a test
// clock was given.
func (s *MemoryStore) now() int64 {
	if s.clock != nil {
		return s.clock().UnixMicro()
	}
	return s.start.UnixMicro() + time.Since(s.start).Microseconds()
}

// Take implements Store.
func (s *MemoryStore) Take(ctx context.Context, req Request) (Result, error) {
	if err := s.usable(ctx); err != nil {
		return Result{}, err
	}
	if err := req.validate(); err != nil {
		return Result{}, err
	}
	now := s.now()
	longest := req.longestWindow()
	l := s.lock(logKey{req.Namespace, req.Key}, true)
	defer l.mu.Unlock()

	retention := l.retention(now, longest)
	l.evict(now - retention)
	replay := l.find(req.ID) >= 0
	cost := int64(req.Cost)
	allowed := true
	if !replay {
		for _, p := range req.Policies {
			if l.count(now-p.windowMicros())+cost > int64(p.Limit) {
				allowed = false
				break
			}
		}
		if allowed {
			l.add(now, req.ID, cost)
		}
	}
	l.expires = max(l.expires, now+retention)

	states := make([]PolicyResult, len(req.Policies))
	var steady int64
	for i, p := range req.Policies {
		w := p.windowMicros()
		count := l.count(now - w)
		st := PolicyResult{Policy: p, Allowed: true, Remaining: int(max(0, int64(p.Limit)-count))}
		if !allowed {
			if first := l.firstAfter(now - w); first >= 0 {
				if leave := l.entries[first].at + w - now; steady == 0 || leave < steady {
					steady = leave
				}
			}
			if count+cost > int64(p.Limit) {
				st.Allowed = false
				st.RetryAfter = time.Duration(l.nthUnitAt(now-w, count+cost-int64(p.Limit))+w-now) * time.Microsecond
			}
		}
		if n := len(l.entries); n > 0 && l.entries[n-1].at+w > now {
			st.ResetAfter = time.Duration(l.entries[n-1].at+w-now) * time.Microsecond
		}
		states[i] = st
	}
	res := NewResult(states, SourceMemory)
	res.DecidedAt = time.UnixMicro(now)
	res.steady = time.Duration(steady) * time.Microsecond
	return res, nil
}

// Record writes an admission decided elsewhere into req's log at time
// at, to the microsecond, with req.Cost, without checking any limit, as
// RedisStore.Record does: idempotent by req.ID, counting against later
// decisions until at plus each window, not written when it has already
// left every window.
func (s *MemoryStore) Record(ctx context.Context, req Request, at time.Time) error {
	if err := s.usable(ctx); err != nil {
		return err
	}
	if err := req.validateRecord(at); err != nil {
		return err
	}
	now, t := s.now(), at.UnixMicro()
	longest := req.longestWindow()
	l := s.lock(logKey{req.Namespace, req.Key}, true)
	defer l.mu.Unlock()
	retention := l.retention(now, longest)
	l.evict(now - retention)
	l.expires = max(l.expires, now+retention)
	if l.find(req.ID) >= 0 || t <= now-longest {
		return nil
	}
	l.add(t, req.ID, int64(req.Cost))
	l.expires = max(l.expires, t+longest)
	return nil
}

// Refund implements Store: it removes the request's entry, with the cost
// recorded in it (whatever req.Cost says).
func (s *MemoryStore) Refund(ctx context.Context, req Request) error {
	if err := s.usable(ctx); err != nil {
		return err
	}
	l := s.lock(logKey{req.Namespace, req.Key}, false)
	if l == nil {
		return nil
	}
	defer l.mu.Unlock()
	if i := l.find(req.ID); i >= 0 {
		cost := l.entries[i].cost
		l.entries = append(l.entries[:i], l.entries[i+1:]...)
		for j := i; j < len(l.entries); j++ {
			l.entries[j].cum -= cost
		}
	}
	return nil
}

// Reset implements Store.
func (s *MemoryStore) Reset(ctx context.Context, req Request) error {
	if err := s.usable(ctx); err != nil {
		return err
	}
	key := logKey{req.Namespace, req.Key}
	if l := s.lock(key, false); l != nil {
		l.dead.Store(true)
		s.logs.remove(key, l)
		l.mu.Unlock()
	}
	return nil
}

// Close stops the sweeper and forgets every log. It is idempotent.
func (s *MemoryStore) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	close(s.stop)
	s.done.Wait()
	s.logs.purge()
	return nil
}

// sweep removes, every interval, the logs whose entries have all expired.
func (s *MemoryStore) sweep(interval time.Duration) {
	defer s.done.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.sweepOnce()
		}
	}
}

// retention returns how far back the log must keep entries at now for a
// limiter whose longest window is longest: a longer window some limiter
// used within that window wins.
func (l *memoryLog) retention(now, longest int64) int64 {
	if l.retain > longest && l.retainUntil > now {
		return l.retain
	}
	l.retain, l.retainUntil = longest, now+longest
	return longest
}

// firstAfter returns the index of the oldest entry stamped after cutoff,
// or -1.
func (l *memoryLog) firstAfter(cutoff int64) int {
	i := sort.Search(len(l.entries), func(i int) bool { return l.entries[i].at > cutoff })
	if i == len(l.entries) {
		return -1
	}
	return i
}

// evict drops the entries stamped at or before cutoff.
func (l *memoryLog) evict(cutoff int64) {
	i := sort.Search(len(l.entries), func(i int) bool { return l.entries[i].at > cutoff })
	if i > 0 {
		l.entries = l.entries[i:]
	}
}

// find returns the index of the entry of request id, or -1.
func (l *memoryLog) find(id uint64) int {
	for i := range l.entries {
		if l.entries[i].id == id {
			return i
		}
	}
	return -1
}

// count returns the units stamped after cutoff.
func (l *memoryLog) count(cutoff int64) int64 {
	n := len(l.entries)
	i := sort.Search(n, func(i int) bool { return l.entries[i].at > cutoff })
	if i == n {
		return 0
	}
	return l.entries[n-1].cum - (l.entries[i].cum - l.entries[i].cost)
}

// nthUnitAt returns the time of the k-th oldest unit stamped after cutoff
// (k >= 1): the entry whose leaving frees k units.
func (l *memoryLog) nthUnitAt(cutoff, k int64) int64 {
	n := len(l.entries)
	i := sort.Search(n, func(i int) bool { return l.entries[i].at > cutoff })
	if i == n {
		return cutoff
	}
	base := l.entries[i].cum - l.entries[i].cost
	j := i + sort.Search(n-i, func(j int) bool { return l.entries[i+j].cum-base >= k })
	if j == n {
		j = n - 1
	}
	return l.entries[j].at
}

// add records an entry, keeping time order even if a test clock went back.
func (l *memoryLog) add(at int64, id uint64, cost int64) {
	n := len(l.entries)
	var cum int64
	if n > 0 {
		cum = l.entries[n-1].cum
	}
	e := memoryEntry{at: at, id: id, cost: cost, cum: cum + cost}
	if n == 0 || l.entries[n-1].at <= at {
		l.entries = append(l.entries, e)
		return
	}
	i := sort.Search(n, func(i int) bool { return l.entries[i].at > at })
	l.entries = append(l.entries, memoryEntry{})
	copy(l.entries[i+1:], l.entries[i:])
	l.entries[i] = e
	for j := i; j < len(l.entries); j++ {
		prev := int64(0)
		if j > 0 {
			prev = l.entries[j-1].cum
		}
		l.entries[j].cum = prev + l.entries[j].cost
	}
}
