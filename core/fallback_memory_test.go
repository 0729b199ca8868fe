package slidelog

import (
	"testing"
	"time"
)

// The fallback decides a key it tracks, with one policy, without an
// allocation, admitted or denied, exact or bucketed, and its single-policy
// Result carries no Policies slice.
func TestFallbackTakeAllocatesNothing(t *testing.T) {
	for _, precision := range []time.Duration{0, time.Minute} {
		t.Run("precision="+precision.String(), func(t *testing.T) {
			// The fallback runs on the process's clock: a limit that the
			// test cannot reach keeps every admission allowed, a limit of
			// one makes every later call a denial.
			roomy := newFallback([]Policy{{Name: "roomy", Limit: 1 << 40, Window: time.Hour, Precision: precision}}, 10)
			tight := newFallback([]Policy{{Name: "tight", Limit: 1, Window: time.Hour, Precision: precision}}, 10)
			t.Cleanup(func() { _ = roomy.close(); _ = tight.close() })
			req := Request{Namespace: "n", Key: "k", Cost: 1, ID: 1}
			take := func(f *fallback, wantAllowed bool) {
				req.ID++
				res, _, err := f.take(t.Context(), req)
				if err != nil || res.Allowed != wantAllowed || res.Source != SourceFallback {
					t.Fatalf("take = %+v, %v; want allowed %v from the fallback", res, err, wantAllowed)
				}
				if res.Policies != nil || res.Limit != f.policies[0].Limit || res.Policy != f.policies[0] {
					t.Fatalf("take of one policy = %+v; want Policies nil and the policy's state on top", res)
				}
			}
			// 1,100 admissions grow an exact ring to 2,048 entries, room
			// for the 101 calls AllocsPerRun makes.
			for range 1100 {
				take(roomy, true)
			}
			take(tight, true)
			if n := testing.AllocsPerRun(100, func() { take(roomy, true) }); n != 0 {
				t.Errorf("admission: %v allocations, want 0", n)
			}
			if n := testing.AllocsPerRun(100, func() { take(tight, false) }); n != 0 {
				t.Errorf("denial: %v allocations, want 0", n)
			}
		})
	}
}
