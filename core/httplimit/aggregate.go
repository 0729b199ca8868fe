package httplimit

import (
	"net/netip"
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
	DefaultIPv6Networks = 4096
	// ipv6AggregationPeriod is how long a network's count of prefixes
	// lasts: an hour after its first counted prefix it starts again.
	ipv6AggregationPeriod = time.Hour
)

// networks counts, per IPv6 network, the client prefixes seen in it, and
// says when a new prefix must share the network's identity. Its memory is
// bounded: at most max prefixes for each of at most size networks.
type networks struct {
	bits  int
	max   int
	cache *lru.Cache[netip.Prefix, *network]
}

type network struct {
	mu    sync.Mutex
	since time.Time
	seen  map[netip.Prefix]struct{}
}

func newNetworks(bits, max, size int) *networks {
	c, err := lru.New[netip.Prefix, *network](size)
	if err != nil {
		panic(err) // size > 0, checked by the option
	}
	return &networks{bits: bits, max: max, cache: c}
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
	if n.seen == nil || now.Sub(n.since) > ipv6AggregationPeriod {
		n.seen, n.since = make(map[netip.Prefix]struct{}), now
	}
	if _, ok := n.seen[p]; ok {
		return p
	}
	if len(n.seen) >= ns.max {
		return netp
	}
	n.seen[p] = struct{}{}
	return p
}
