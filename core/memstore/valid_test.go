package memstore

import (
	"testing"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
)

// validExact must vouch only for requests Request.Validate accepts, and
// for the common ones: it is Take's shortcut past Validate.
func TestValidExactAgreesWithValidate(t *testing.T) {
	limits := []int{-1, 0, 1, 2, 100, slidelog.MaxLimit, slidelog.MaxLimit + 1}
	windows := []time.Duration{0, minWindow - 1, minWindow, time.Second, maxWindow, maxWindow + 1}
	precisions := []time.Duration{0, time.Millisecond, time.Millisecond * 500}
	costs := []int{-1, 0, 1, 2, 100, 101, slidelog.MaxLimit + 1}
	vouched := 0
	for _, l := range limits {
		for _, w := range windows {
			for _, p := range precisions {
				for _, c := range costs {
					pol := slidelog.Policy{Name: "p", Limit: l, Window: w, Precision: p}
					req := slidelog.Request{Cost: c, Policies: []slidelog.Policy{pol}}
					if validExact(&pol, c) {
						vouched++
						if err := req.Validate(); err != nil {
							t.Fatalf("validExact vouches for %+v cost %d, Validate: %v", pol, c, err)
						}
					}
				}
			}
		}
	}
	if !validExact(&slidelog.Policy{Limit: 100, Window: time.Minute}, 1) || vouched == 0 {
		t.Fatal("validExact vouches for nothing")
	}
}
