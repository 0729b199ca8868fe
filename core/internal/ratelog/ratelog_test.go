package ratelog

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The first event is logged, the next ones within the interval are
// counted, and the first one past it is logged with their number.
func TestEvery(t *testing.T) {
	var e Every
	t0 := time.Unix(1000, 0)
	if n, ok := e.Note(t0, 10*time.Second); !ok || n != 1 {
		t.Fatalf("first event: n=%d ok=%v, want 1 true", n, ok)
	}
	for i := range 5 {
		if _, ok := e.Note(t0.Add(time.Duration(i)*time.Second), 10*time.Second); ok {
			t.Fatalf("event %d within the interval logged", i)
		}
	}
	if n, ok := e.Note(t0.Add(10*time.Second), 10*time.Second); !ok || n != 6 {
		t.Fatalf("event past the interval: n=%d ok=%v, want 6 true", n, ok)
	}
}

// Goroutines racing on one Every log one record.
func TestEveryConcurrent(t *testing.T) {
	var e Every
	var logged, counted atomic.Int64
	var wg sync.WaitGroup
	now := time.Now()
	for range 100 {
		wg.Go(func() {
			for range 10 {
				if n, ok := e.Note(now, time.Hour); ok {
					logged.Add(1)
					counted.Add(n)
				}
			}
		})
	}
	wg.Wait()
	if logged.Load() != 1 {
		t.Fatalf("%d records, want 1", logged.Load())
	}
	if c := counted.Load() + e.events.Load(); c != 1000 {
		t.Fatalf("%d events counted, want 1000", c)
	}
}
