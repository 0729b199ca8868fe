package monotime

import (
	"testing"
	"time"
)

func TestNowAdvances(t *testing.T) {
	a := Now()
	time.Sleep(10 * time.Millisecond)
	if d := time.Duration(Now() - a); d < 10*time.Millisecond {
		t.Errorf("Now advanced %v over a 10 ms sleep", d)
	}
}
