package redisstore_test

import (
	"math/rand/v2"
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

// With one policy, decode fills the Result's fields itself instead of
// building it with NewResult; every reply, admissions and denials with and
// without a retry, gives the Result NewResult gives for that policy's
// state.
func TestDecodeOnePolicyIsNewResult(t *testing.T) {
	p := slidelog.Policy{Name: "p", Limit: 7, Window: time.Minute}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		reply := []int64{rng.Int64N(2), 1e15 + rng.Int64N(1e9), rng.Int64N(60e6) - 1,
			rng.Int64N(8), rng.Int64N(60e6) - 30e6, rng.Int64N(60e6)}
		allowed := reply[0] == 1
		state := slidelog.PolicyResult{
			Policy: p, Allowed: allowed, Remaining: int(reply[3]),
			RetryAfter: time.Duration(max(reply[4], 0)) * time.Microsecond,
			ResetAfter: time.Duration(reply[5]) * time.Microsecond,
		}
		want := slidelog.NewResult([]slidelog.PolicyResult{state}, redisstore.Source)
		want.DecidedAt = time.UnixMicro(reply[1])
		want.StableFor = time.Duration(reply[2]) * time.Microsecond
		assert.Equal(t, want, redisstore.Decode(reply, []slidelog.Policy{p}, redisstore.Source), "reply %v", reply)
	}
}
