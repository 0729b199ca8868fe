package main

import (
	"math"
	"testing"
	"time"
)

func TestHistogramQuantile(t *testing.T) {
	var h histogram
	for i := 1; i <= 10000; i++ {
		h.record(time.Duration(i) * time.Microsecond)
	}
	tests := []struct {
		give float64
		want float64 // ns
	}{
		{0.50, 5000e3},
		{0.99, 9900e3},
		{0.999, 9990e3},
	}
	for _, tt := range tests {
		got := h.quantile(tt.give)
		if math.Abs(got-tt.want)/tt.want > 0.01 {
			t.Errorf("quantile(%v) = %v, want %v within 1%%", tt.give, got, tt.want)
		}
	}
}

func TestBucketRoundTrip(t *testing.T) {
	for _, v := range []uint64{0, 1, 127, 128, 255, 256, 1000, 123456, 987654321} {
		got := valueOf(bucketOf(v))
		if math.Abs(got-float64(v)) > math.Max(1, float64(v)/128) {
			t.Errorf("valueOf(bucketOf(%d)) = %v, want within 1/128", v, got)
		}
	}
}

func TestMaxInWindow(t *testing.T) {
	tests := []struct {
		name  string
		times []float64
		w     float64
		want  int
	}{
		{"empty", nil, 1, 0},
		{"one", []float64{0.5}, 1, 1},
		{"all in one window", []float64{0, 0.2, 0.9}, 1, 3},
		{"edge excluded", []float64{0, 1, 2}, 1, 1},
		{"boundary burst", []float64{0.9, 0.95, 1.05, 1.1, 2.5}, 1, 4},
	}
	for _, tt := range tests {
		if got := maxInWindow(tt.times, tt.w); got != tt.want {
			t.Errorf("%s: maxInWindow = %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestRollingCounts(t *testing.T) {
	times := []float64{0.5, 1.0, 1.2}
	got := rollingCounts(times, 1, []float64{0.4, 0.5, 1.0, 1.4, 1.5, 2.0, 2.3})
	want := []int{0, 1, 2, 3, 2, 1, 0}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("rollingCounts[%d] = %d, want %d", i, got[i], want[i])
		}
	}
}

func TestParseGoBench(t *testing.T) {
	out := `goos: linux
BenchmarkMemory/slidelog_memory/allow-2   	 1000000	      1228 ns/op	     237 B/op	       4 allocs/op
BenchmarkMemory/x-time-rate/deny-2        	11184331	       106.6 ns/op	       0 B/op	       0 allocs/op
BenchmarkMemory/x-time-rate/deny-2        	11184331	       99.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkMemory/x-time-rate/deny-2        	11184331	       140.1 ns/op	       0 B/op	       0 allocs/op
PASS`
	got := parseGoBench(out)
	if len(got) != 2 {
		t.Fatalf("got %d benchmarks, want 2", len(got))
	}
	if got[0].name != "Memory/slidelog_memory/allow" || got[0].nsPerOp != 1228 || got[0].allocs != 4 || got[0].bytes != 237 {
		t.Errorf("got %+v, want Memory/slidelog_memory/allow 1228 ns/op 237 B/op 4 allocs/op", got[0])
	}
	if got[1].name != "Memory/x-time-rate/deny" || got[1].nsPerOp != 106.6 || got[1].runs != 3 {
		t.Errorf("got %+v, want Memory/x-time-rate/deny, median 106.6 ns/op of 3 runs", got[1])
	}
}
