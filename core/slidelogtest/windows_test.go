package slidelogtest_test

import (
	"testing"
	"time"

	"github.com/slidelog/slidelog/core/slidelogtest"
)

func TestCheckWindows(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(key string, ms int) slidelogtest.Admission {
		return slidelogtest.Admission{Key: key, Start: t0.Add(time.Duration(ms) * time.Millisecond)}
	}
	call := func(key string, ms, tookMS int) slidelogtest.Admission {
		a := at(key, ms)
		a.End = a.Start.Add(time.Duration(tookMS) * time.Millisecond)
		return a
	}
	lost := func(a slidelogtest.Admission) slidelogtest.Admission { a.Epoch = 1; return a }
	costs := func(a slidelogtest.Admission, n int) slidelogtest.Admission { a.Cost = n; return a }
	tests := []struct {
		name     string
		give     []slidelogtest.Admission
		wantPeak map[string]int
		wantOver []string
	}{
		{"within the limit", []slidelogtest.Admission{at("a", 0), at("a", 500), at("a", 1000), at("a", 1500)}, map[string]int{"a": 2}, nil},
		{"a window is half-open", []slidelogtest.Admission{at("a", 0), at("a", 999), at("a", 1000)}, map[string]int{"a": 2}, nil},
		{"three in one window", []slidelogtest.Admission{at("a", 0), at("a", 400), at("a", 999), at("b", 0)}, map[string]int{"a": 3, "b": 1}, []string{"a"}},
		{"costs count", []slidelogtest.Admission{costs(at("a", 0), 2), at("a", 10)}, map[string]int{"a": 3}, []string{"a"}},
		{"a loss starts afresh", []slidelogtest.Admission{at("a", 0), at("a", 10), lost(at("a", 20)), lost(at("a", 30))}, map[string]int{"a": 2}, nil},
		{"calls that may lie apart are not counted together", []slidelogtest.Admission{call("a", 0, 600), call("a", 500, 10), call("a", 900, 200)}, map[string]int{"a": 2}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fullest, over := slidelogtest.CheckWindows(tt.give, 2, time.Second)
			got := map[string]int{}
			for _, w := range fullest {
				got[w.Key] = max(got[w.Key], w.Units)
			}
			for k, want := range tt.wantPeak {
				if got[k] != want {
					t.Errorf("key %s: got a fullest window of %d, want %d", k, got[k], want)
				}
			}
			var overKeys []string
			for _, w := range over {
				overKeys = append(overKeys, w.Key)
			}
			if len(overKeys) != len(tt.wantOver) || (len(overKeys) > 0 && overKeys[0] != tt.wantOver[0]) {
				t.Errorf("got windows over the limit %v, want %v", overKeys, tt.wantOver)
			}
		})
	}
}
