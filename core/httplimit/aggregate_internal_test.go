package httplimit

import (
	"encoding/binary"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestAggregatorLevels: the prefixes an IPv6 client's identity climbs
// through, from its client prefix, for the client prefix and network
// lengths of ClientIP.IPv6Prefix and ClientIP.IPv6Network.
func TestAggregatorLevels(t *testing.T) {
	tests := []struct {
		give [2]int // client prefix, network
		want []int
	}{
		{[2]int{64, 48}, []int{64, 48, 32, 12}},
		{[2]int{128, 120}, []int{128, 120, 104, 12}},
		{[2]int{48, 48}, []int{48, 32, 12}}, // IPv6Prefix 48 with the default network
		{[2]int{64, 20}, []int{64, 20, 12}},
		{[2]int{64, 10}, []int{64, 10}}, // a network shorter than /12 is the top
		{[2]int{13, 48}, []int{13, 12}},
		{[2]int{12, 48}, nil}, // 4,096 /12s at most: nothing to bound
	}
	for _, tt := range tests {
		var got []int
		if ag := newAggregator(tt.give[0], tt.give[1], 64, time.Hour); ag != nil {
			for _, lv := range ag.levels {
				got = append(got, lv.bits)
			}
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("client /%d, network /%d: got levels %v, want %v", tt.give[0], tt.give[1], got, tt.want)
		}
	}
}

// TestAggregatorConcurrent: goroutines minting prefixes at once keep the
// tables' counts consistent: every level holds at most its size, each
// parent at most maxPer grants, each wider prefix at most an eighth of
// the table, and the counts add up to the grants held.
func TestAggregatorConcurrent(t *testing.T) {
	ag := newAggregator(64, 48, 4, time.Hour)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 3000 {
				var b [16]byte
				b[0], b[1], b[2], b[3] = 0x20, 0x01, 0x0d, byte(g) // four /32s
				if i%2 == 1 {
					b[3] = byte((g + 1) % 4) // goroutines overlap in each /32
				}
				b[4], b[5], b[7] = byte(i>>12), byte(i>>4), byte(i) // 16 /64s in each /48
				a := netip.AddrFrom16(b)
				ag.group(a, prefixAt(a, 64))
			}
		})
	}
	wg.Wait()
	for i, lv := range ag.levels[:len(ag.levels)-1] {
		sum, wide := 0, 0
		for _, n := range lv.per {
			if n > ag.maxPer {
				t.Errorf("level /%d: a parent holds %d grants, want at most %d", lv.bits, n, ag.maxPer)
			}
			sum += n
		}
		for _, n := range lv.perWide {
			if n > lv.size/ipv6ShareOfWide {
				t.Errorf("level /%d: a wider prefix holds %d grants, want at most %d", lv.bits, n, lv.size/ipv6ShareOfWide)
			}
			wide += n
		}
		if n := lv.grants.Len(); n != sum || n != wide || n > lv.size {
			t.Errorf("level %d (/%d): %d grants, parents count %d, wider prefixes %d, size %d", i, lv.bits, n, sum, wide, lv.size)
		}
	}
}

// TestIPv6TablesFullMemory fills every table of the default aggregator
// (ClientIP's /64 clients in /48 networks) to its size, and measures the
// heap it then holds: the memory the docs state for minted IPv6
// prefixes, "when every table is full". It fails if a table is not full,
// or if the heap held is above 8 MB.
func TestIPv6TablesFullMemory(t *testing.T) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ag := newAggregator(64, DefaultIPv6Network, DefaultIPv6PrefixesPerNetwork, time.Hour)
	// An address's first 64 bits: its /12, the rest of its /32, of its
	// /48 and of its /64.
	mint := func(p12, p32, p48, p64 uint64) {
		var b [16]byte
		binary.BigEndian.PutUint64(b[:8], p12<<52|p32<<32|p48<<16|p64)
		a := netip.AddrFrom16(b)
		ag.group(a, prefixAt(a, 64))
	}
	// The /64s' table: 8 /32s of 64 /48s of 64 /64s (a /32 holds at most
	// an eighth of the table, a /48 at most 64).
	for p32 := range uint64(8) {
		for p48 := range uint64(64) {
			for p64 := range uint64(64) {
				mint(0x200, p32, p48, p64)
			}
		}
	}
	// The /48s' table, the /64s' being full: 8 /12s of 8 /32s of 64 /48s
	// (a /12 holds at most an eighth of it, a /32 at most 64).
	for p12 := range uint64(8) {
		for p32 := range uint64(8) {
			for p48 := range uint64(64) {
				mint(0x210+p12, p32, p48, 0)
			}
		}
	}
	// The /32s' table, the others being full: 16 /12s of 64 /32s.
	for p12 := range uint64(16) {
		for p32 := range uint64(64) {
			mint(0x220+p12, p32, 0, 0)
		}
	}
	for i, want := range []int{ipv6ClientGrants, ipv6NetworkGrants, ipv6WideGrants} {
		if got := ag.levels[i].grants.Len(); got != want {
			t.Fatalf("the /%d table holds %d grants, want it full (%d)", ag.levels[i].bits, got, want)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	held := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	runtime.KeepAlive(ag)
	t.Logf("every table full (%d identities of their own): %.1f MB of heap", ipv6ClientGrants+ipv6NetworkGrants+ipv6WideGrants, float64(held)/(1<<20))
	if held > 8<<20 {
		t.Fatalf("every table full holds %d bytes, want at most 8 MB", held)
	}
}
