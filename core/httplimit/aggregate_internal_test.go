package httplimit

import (
	"slices"
	"testing"
	"time"
)

// TestAggregatorLevels: the prefixes an IPv6 client's identity climbs
// through, from its client prefix, for the client prefix and network
// lengths of WithIPv6Prefix and WithIPv6Aggregation.
func TestAggregatorLevels(t *testing.T) {
	tests := []struct {
		give [2]int // client prefix, network
		want []int
	}{
		{[2]int{64, 48}, []int{64, 48, 32, 12}},
		{[2]int{128, 120}, []int{128, 120, 104, 12}},
		{[2]int{48, 48}, []int{48, 32, 12}}, // WithIPv6Prefix(48) with the default network
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
