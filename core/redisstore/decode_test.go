package redisstore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
)

// Allowed is the script's verdict alone: a denial whose policies carry no
// retry (a log that lost its entries) is still a denial.
func TestDecodeAllowedIsTheVerdict(t *testing.T) {
	a := slidelog.Policy{Name: "a", Limit: 10, Window: time.Minute}
	b := slidelog.Policy{Name: "b", Limit: 5, Window: time.Second}
	for _, tt := range []struct {
		name     string
		reply    []int64
		policies []slidelog.Policy
		want     bool
		wantEach []bool
	}{
		{"admission", []int64{1, 1e15, 0, 9, 0, 60e6}, []slidelog.Policy{a}, true, []bool{true}},
		{"denial with a retry", []int64{0, 1e15, 5e6, 0, 5e6, 60e6}, []slidelog.Policy{a}, false, []bool{false}},
		{"denial without a retry", []int64{0, 1e15, 0, 0, 0, 0}, []slidelog.Policy{a}, false, []bool{false}},
		{"two policies, one violated", []int64{0, 1e15, 0, 3, 0, 60e6, 0, 2e5, 1e6}, []slidelog.Policy{a, b}, false, []bool{true, false}},
		{"two policies, no retry", []int64{0, 1e15, 0, 3, 0, 0, 0, 0, 0}, []slidelog.Policy{a, b}, false, []bool{false, false}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := redisstore.Decode(tt.reply, tt.policies, redisstore.Source)
			assert.Equal(t, tt.want, res.Allowed, "Allowed")
			states := res.States()
			for i, w := range tt.wantEach {
				assert.Equal(t, w, states[i].Allowed, "policy %s: Allowed", tt.policies[i].Name)
			}
		})
	}
}
