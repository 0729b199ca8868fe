package httplimit

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// Defaults of WithIPv6Aggregation.
const (
	// DefaultIPv6Network is the prefix length of the network (a /48, a
	// usual site allocation) whose client prefixes are counted.
	DefaultIPv6Network = 48
	// DefaultIPv6PrefixesPerNetwork is how many client prefixes (/64s) of
	// one network keep identities of their own; the network's further
	// prefixes share the network's identity.
	DefaultIPv6PrefixesPerNetwork = 64
	// DefaultIPv6Networks is how many networks are tracked, least
	// recently seen forgotten first.
	DefaultIPv6Networks = 16384
	// ipv6AggregationPeriod is how long a network's count of prefixes
	// lasts: an hour after its first counted prefix it starts again.
	ipv6AggregationPeriod = time.Hour
)

// networks counts, per IPv6 network, the client prefixes seen in it, and
// says when a new prefix must share the network's identity. Its memory is
// bounded: at most perNet prefixes (8 bytes each) for each of at most size
// networks.
type networks struct {
	bits   int
	perNet int
	cache  *lru.Cache[netip.Prefix, *network]
}

type network struct {
	mu    sync.Mutex
	since time.Time
	seen  []uint64 // prefixes seen, as prefixID; two that collide count once, which only lets a prefix keep its own identity
}

// prefixID condenses a client prefix to 64 bits.
func prefixID(p netip.Prefix) uint64 {
	b := p.Masked().Addr().As16()
	hi := binary.BigEndian.Uint64(b[:8])
	lo := binary.BigEndian.Uint64(b[8:])
	return hi ^ (lo * 0x9e3779b97f4a7c15)
}

func newNetworks(bits, perNet, size int) *networks {
	c, err := lru.New[netip.Prefix, *network](size)
	if err != nil {
		panic(err) // size > 0, checked by the option
	}
	return &networks{bits: bits, perNet: perNet, cache: c}
}

// group returns the identity prefix of p, a client prefix of a.
func (ns *networks) group(a netip.Addr, p netip.Prefix) netip.Prefix {
	if ns == nil || !a.Is6() || p.Bits() <= ns.bits {
		return p
	}
	netp, err := a.Prefix(ns.bits)
	if err != nil {
		return p
	}
	n, ok := ns.cache.Get(netp)
	if !ok {
		fresh := &network{}
		if prev, found, _ := ns.cache.PeekOrAdd(netp, fresh); found {
			n = prev
		} else {
			n = fresh
		}
	}
	now := time.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.since.IsZero() || now.Sub(n.since) > ipv6AggregationPeriod {
		n.seen, n.since = n.seen[:0], now
	}
	id := prefixID(p)
	if slices.Contains(n.seen, id) {
		return p
	}
	if len(n.seen) >= ns.perNet {
		return netp
	}
	n.seen = append(n.seen, id)
	return p
}
