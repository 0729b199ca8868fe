package slidelog

import (
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// denyCache remembers, per key, the latest denial by the store, so that
// further requests of the same cost get the same denial locally, without
// a store call, for as long as the store would answer exactly that.
//
// A denial holds, field for field but for the elapsed time, until the
// first entry leaves any of its policies' windows (Result.StableFor, which
// redisstore and memstore report): no count changes before, so every
// Remaining, RetryAfter and violated policy stays what the store said.
// For another store, a denial is cached only when every policy denied
// and is exactly one unit short (its first leaving entry is then the one
// RetryAfter waits for). A request of another cost is not answered from
// the cache, and an admission of the key by this limiter removes its
// entry. Only what another instance does to the key (an admission, a
// Refund or a Reset) can change the store's answer earlier; this
// instance then keeps its cached denial until it expires. Elapsed time is
// measured from just before the store call, so a cached denial ends at
// most one round trip before the store's answer would change, never
// after it.
type denyCache struct {
	entries *lru.Cache[string, denyEntry]
	// clock is the store's clock when it has one (tests); nil means the
	// process's monotonic clock.
	clock func() time.Time
}

type denyEntry struct {
	cost    int
	at      time.Time // when the denied call was sent, by the cache's clock
	expires time.Time // at + how long the denial holds (at most RetryAfter)
	res     Result
}

func newDenyCache(size int, clock func() time.Time) *denyCache {
	c, err := lru.New[string, denyEntry](size)
	if err != nil { // only for size <= 0, which New rules out
		return nil
	}
	return &denyCache{entries: c, clock: clock}
}

func (d *denyCache) now() time.Time {
	if d.clock != nil {
		return d.clock()
	}
	return time.Now()
}

// put records the denial res of a call of cost sent at sent. With a store
// clock, the store stamped the decision itself (DecidedAt), which is the
// exact start.
func (d *denyCache) put(key string, cost int, sent time.Time, res Result) {
	if res.Allowed || res.RetryAfter <= 0 {
		return
	}
	hold := min(res.StableFor, res.RetryAfter)
	if res.StableFor <= 0 {
		// The store does not say when its counts change: only a denial
		// by every policy, each one unit short, is known to hold until
		// RetryAfter.
		for _, p := range res.States() {
			if p.Allowed || p.Remaining != cost-1 {
				d.entries.Remove(key)
				return
			}
		}
		hold = res.RetryAfter
	}
	if d.clock != nil {
		sent = res.DecidedAt
	}
	if res.Policies != nil {
		res.Policies = append([]PolicyResult(nil), res.Policies...)
	}
	d.entries.Add(key, denyEntry{cost: cost, at: sent, expires: sent.Add(hold), res: res})
}

// get returns a cached denial of key for a request of cost, with its
// durations reduced by the time elapsed since the store decided.
func (d *denyCache) get(key string, cost int) (Result, bool) {
	e, ok := d.entries.Get(key)
	if !ok || cost != e.cost {
		return Result{}, false
	}
	now := d.now()
	if !now.Before(e.expires) {
		d.entries.Remove(key)
		return Result{}, false
	}
	elapsed := now.Sub(e.at)
	res := e.res
	res.Source = SourceDenyCache
	res.RetryAfter = e.res.RetryAfter - elapsed
	res.ResetAfter = max(0, res.ResetAfter-elapsed)
	if res.StableFor > 0 {
		res.StableFor -= elapsed // still positive: the entry expires by then
	}
	res.DecidedAt = res.DecidedAt.Add(elapsed)
	if e.res.Policies != nil {
		res.Policies = make([]PolicyResult, len(e.res.Policies))
		for i, p := range e.res.Policies {
			if p.RetryAfter > 0 {
				p.RetryAfter = max(0, p.RetryAfter-elapsed)
			}
			p.ResetAfter = max(0, p.ResetAfter-elapsed)
			res.Policies[i] = p
		}
	}
	return res, true
}

func (d *denyCache) remove(key string) { d.entries.Remove(key) }

func (d *denyCache) len() int { return d.entries.Len() }
