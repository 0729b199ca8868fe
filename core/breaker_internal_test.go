package slidelog

import (
	"errors"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"
)

// While a node's breaker is open, a request is refused without
// gobreaker's lock: here the lock is held (gobreaker calls OnStateChange
// under it, and the callback blocks) while another request asks, and is
// refused at once. Once the open timeout has passed, the breaker probes.
func TestOpenBreakerRefusesWithoutItsLock(t *testing.T) {
	block, unblock := make(chan struct{}), make(chan struct{})
	b := newBreakers(BreakerSettings{ConsecutiveFailures: 1, OpenTimeout: 200 * time.Millisecond, HalfOpenProbes: 1}.withDefaults(), func(_ string, _, to gobreaker.State) {
		if to == gobreaker.StateOpen {
			close(block)
			<-unblock
		}
	}, nil)
	nb := b.get("node")
	done, err := nb.Allow()
	if err != nil {
		t.Fatalf("closed breaker refused: %v", err)
	}
	go done(errors.New("node failed")) // opens it, and blocks in the callback with gobreaker's lock held
	<-block
	refused := make(chan error, 1)
	go func() {
		_, err := nb.Allow()
		refused <- err
	}()
	select {
	case err := <-refused:
		if !errors.Is(err, gobreaker.ErrOpenState) {
			t.Errorf("open breaker: got %v, want ErrOpenState", err)
		}
	case <-time.After(2 * time.Second):
		close(unblock)
		t.Fatal("a request to an open breaker waited for gobreaker's lock")
	}
	close(unblock)
	time.Sleep(250 * time.Millisecond) // the open timeout passes
	probe, err := nb.Allow()
	if err != nil {
		t.Fatalf("after the open timeout: %v, want a probe", err)
	}
	probe(nil)
	if st := nb.cb.State(); st != gobreaker.StateClosed {
		t.Errorf("after a successful probe the breaker is %v, want closed", st)
	}
}

// Close stops the open timers, and waits for one whose callback is under
// way: once it has returned, no change to half-open is reported (the
// limiter unbinds its observers next).
func TestBreakersCloseWaitsForOpenTimer(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	b := newBreakers(BreakerSettings{ConsecutiveFailures: 1, OpenTimeout: 10 * time.Millisecond, HalfOpenProbes: 1}.withDefaults(), func(_ string, _, to gobreaker.State) {
		if to == gobreaker.StateHalfOpen {
			close(entered)
			<-release
		}
	}, nil)
	done, err := b.get("node").Allow()
	if err != nil {
		t.Fatal(err)
	}
	done(errors.New("node failed")) // opens it: its timer reports half-open in 10 ms
	select {
	case <-entered:
	case <-time.After(2 * time.Second):
		t.Fatal("the open breaker's timer did not report half-open")
	}
	closed := make(chan struct{})
	go func() {
		b.close()
		close(closed)
	}()
	select {
	case <-closed:
		close(release)
		t.Fatal("close returned while the timer was still reporting a change")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	select {
	case <-closed:
	case <-time.After(2 * time.Second):
		t.Fatal("close did not return once the timer's report ended")
	}
}
