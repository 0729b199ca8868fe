package httplimit

import (
	"hash/maphash"
	"net/netip"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// Defaults and bounds of ClientIP's IPv6 aggregation.
const (
	// DefaultIPv6Network is the prefix length of the network (a /48, a
	// usual site allocation) whose client prefixes are counted.
	DefaultIPv6Network = 48
	// DefaultIPv6PrefixesPerNetwork is how many client prefixes (/64s) of
	// one network keep identities of their own at once; the network's
	// further prefixes share the network's identity.
	DefaultIPv6PrefixesPerNetwork = 64
	// MaxIPv6Identities bounds how many IPv6 identities ByClientIP hands
	// out while ClientIP.NoIPv6Aggregation is off (the default), whatever the
	// traffic: at most 32,768 client prefixes, 4,096 networks and 1,024
	// wider prefixes (a /32 with the default /48 network) with identities
	// of their own at once, and the /12s beyond them (4,096 in all). It
	// stays below memstore.DefaultMaxKeys and the limiter's fallback's
	// 100,000 keys, so that minted IPv6 prefixes never fill them.
	MaxIPv6Identities = ipv6ClientGrants + ipv6NetworkGrants + ipv6WideGrants + 1<<ipv6TopBits
)

const (
	maxIPv6PrefixesPerNetwork = 4096  // the largest ClientIP.IPv6PrefixesPerNetwork
	ipv6ClientGrants          = 32768 // client prefixes (/64s) with identities of their own at once
	ipv6NetworkGrants         = 4096  // networks (/48s) with identities of their own at once
	ipv6WideGrants            = 1024  // wider prefixes (/32s) with identities of their own at once
	ipv6WideStep              = 16    // the wider prefix is the network's /(network-16)
	ipv6ShareOfWide           = 8     // one wider prefix (/32) holds at most 1/8 of a table's grants
	ipv6TopBits               = 12    // beyond every table, a client shares its /12's identity
	// ipv6MinIdle is the shortest time a prefix keeps its identity after
	// it was last seen; the longest window of the Engine's limiter when
	// that is longer.
	ipv6MinIdle = time.Hour
)

// aggregator chooses the identity prefix of an IPv6 client: its own client
// prefix (a /64) while it holds a grant at that level, else its network's
// (a /48), else a wider prefix's (a /32), else its /12's. A prefix is
// granted an identity of its own when the level's table has room, its
// parent has fewer than maxPer granted children and the level two up (a
// /32 for a /64) holds less than an eighth of the table, so that one /32
// cannot take every client prefix's grant; a grant lasts while the
// prefix is seen, and ends idle after its last request, so that a client
// seen before keeps its window as long as it stays active, and no minting
// or churn can make more than MaxIPv6Identities identities: a grant is
// never taken from an active prefix, and none is made when a table is
// full.
//
// Tables are keyed by a keyed hash (hash/maphash, with a random seed per
// process), so that no client can craft prefixes that share a grant. Each
// request costs a few map operations under one mutex.
type aggregator struct {
	mu     sync.Mutex
	levels []level // from the client prefix up; the last has no table
	maxPer int
	idle   time.Duration
	seed   maphash.Seed
	start  time.Time
}

type level struct {
	bits    int
	size    int
	grants  *simplelru.LRU[uint64, grant] // least recently seen first out
	per     map[uint64]int                // parent's hash → its granted children
	perWide map[uint64]int                // the level two up's hash → its granted descendants here
}

type grant struct {
	parent, wide uint64
	seen         time.Duration // since aggregator.start
}

// newAggregator returns the aggregator for client prefixes of clientBits,
// counted per network of netBits: levels /clientBits, /netBits,
// /(netBits-16) and /12, those of them longer than /12 (or than the
// network) with tables. It returns nil when the client prefix is so short
// (at most /12) that there are few enough of them.
func newAggregator(clientBits, netBits, maxPer int, idle time.Duration) *aggregator {
	bits := []int{clientBits}
	top := min(netBits, ipv6TopBits)
	for _, b := range []int{netBits, netBits - ipv6WideStep, top} {
		if b >= top && b < bits[len(bits)-1] {
			bits = append(bits, b)
		}
	}
	if len(bits) == 1 {
		return nil
	}
	sizes := []int{ipv6ClientGrants, ipv6NetworkGrants, ipv6WideGrants}
	ag := &aggregator{maxPer: maxPer, idle: max(idle, ipv6MinIdle), seed: maphash.MakeSeed(), start: time.Now()}
	for i, b := range bits {
		lv := level{bits: b}
		if i < len(bits)-1 {
			lv.size = sizes[i]
			lv.grants, _ = simplelru.NewLRU[uint64, grant](lv.size, nil) // size > 0
			lv.per, lv.perWide = map[uint64]int{}, map[uint64]int{}
		}
		ag.levels = append(ag.levels, lv)
	}
	return ag
}

// hash returns the keyed hash of a's prefix of bits.
func (ag *aggregator) hash(a netip.Addr, bits int) uint64 {
	var b [17]byte
	p, _ := a.Prefix(bits)
	*(*[16]byte)(b[:16]) = p.Addr().As16()
	b[16] = byte(bits)
	return maphash.Bytes(ag.seed, b[:])
}

// group returns the identity prefix of p, the client prefix of a.
func (ag *aggregator) group(a netip.Addr, p netip.Prefix) netip.Prefix {
	if ag == nil || !a.Is6() || p.Bits() != ag.levels[0].bits {
		return p
	}
	now := time.Since(ag.start)
	ag.mu.Lock()
	defer ag.mu.Unlock()
	for i := range len(ag.levels) - 1 {
		lv := &ag.levels[i]
		id := ag.hash(a, lv.bits)
		if g, ok := lv.grants.Peek(id); ok {
			g.seen = now
			lv.grants.Add(id, g) // and to the front
			return prefixAt(a, lv.bits)
		}
		lv.expire(now - ag.idle)
		parent := ag.hash(a, ag.levels[i+1].bits)
		wide := ag.hash(a, ag.levels[min(i+2, len(ag.levels)-1)].bits)
		if lv.grants.Len() < lv.size && lv.per[parent] < ag.maxPer && lv.perWide[wide] < lv.size/ipv6ShareOfWide {
			lv.grants.Add(id, grant{parent: parent, wide: wide, seen: now})
			lv.per[parent]++
			lv.perWide[wide]++
			return prefixAt(a, lv.bits)
		}
	}
	return prefixAt(a, ag.levels[len(ag.levels)-1].bits)
}

// expire ends the grants last seen before cutoff: the least recently
// seen, at the table's end. Each grant ends once, so the cost is constant
// per grant made.
func (lv *level) expire(cutoff time.Duration) {
	for {
		_, g, ok := lv.grants.GetOldest()
		if !ok || g.seen >= cutoff {
			return
		}
		lv.grants.RemoveOldest()
		if lv.per[g.parent]--; lv.per[g.parent] <= 0 {
			delete(lv.per, g.parent)
		}
		if lv.perWide[g.wide]--; lv.perWide[g.wide] <= 0 {
			delete(lv.perWide, g.wide)
		}
	}
}

func prefixAt(a netip.Addr, bits int) netip.Prefix {
	p, _ := a.Prefix(bits)
	return p
}
