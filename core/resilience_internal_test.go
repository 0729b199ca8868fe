package slidelog

import "testing"

// TestCeilDiv: the fallback's share of a limit, without the overflow of
// (a+b-1)/b.
func TestCeilDiv(t *testing.T) {
	const maxInt = int(^uint(0) >> 1)
	for _, tc := range []struct{ a, b, want int }{
		{0, 1, 0}, {1, 1, 1}, {100, 3, 34}, {99, 3, 33}, {MaxLimit, 2, 1 << 52}, {maxInt, 1, maxInt}, {maxInt, 2, maxInt/2 + 1},
	} {
		if got := ceilDiv(tc.a, tc.b); got != tc.want {
			t.Errorf("ceilDiv(%d, %d) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
