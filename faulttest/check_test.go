package faulttest

import (
	"strconv"
	"testing"
	"time"

	"github.com/slidelog/slidelog/core/redisstore"
)

// The over-admission a failover may cause is bounded per key (one window's
// worth, the limit): one key over by more fails the check, however many
// keys the failed master held, and so does any excess on a healthy node.
func TestCheckWithLossIsPerKey(t *testing.T) {
	base := time.Now()
	nodeOf := map[string]string{}
	var ds []decision
	admit := func(key string, n int) {
		for i := range n {
			ds = append(ds, decision{key: key, allowed: true, src: redisstore.Source, at: base.Add(time.Duration(i) * time.Millisecond).UnixMicro()})
		}
	}
	for i := range 10 {
		key := "k" + strconv.Itoa(i)
		nodeOf[key] = "victim"
		admit(key, limit) // at the limit
	}
	nodeOf["hot"], nodeOf["healthy"] = "victim", "other"
	admit("hot", 2*limit+5) // over by more than one window's worth

	r := summarize(ds, nodeOf, "victim", base, base.Add(time.Second))
	if len(r.problems(ds, limit)) == 0 {
		t.Errorf("a key %d over the limit passed a per-key bound of %d", limit+5, limit)
	}

	ds = ds[:0]
	admit("hot", 2*limit)
	admit("healthy", limit+1)
	r = summarize(ds, nodeOf, "victim", base, base.Add(time.Second))
	if len(r.problems(ds, limit)) == 0 {
		t.Error("an over-admission on a healthy node's key passed")
	}
	ds = ds[:0]
	admit("hot", 2*limit)
	r = summarize(ds, nodeOf, "victim", base, base.Add(time.Second))
	if p := r.problems(ds, limit); len(p) != 0 {
		t.Errorf("one window's worth over on the failed node's key: %v; want no problem", p)
	}

	// Per key, not summed: every key of the failed node one window's
	// worth over is within the bound (a sum would be 11 windows' worth
	// over), and one admission over on a healthy node's key is not (a
	// sum would hide it under the failed node's allowance).
	ds = ds[:0]
	for i := range 10 {
		admit("k"+strconv.Itoa(i), 2*limit)
	}
	admit("hot", 2*limit)
	r = summarize(ds, nodeOf, "victim", base, base.Add(time.Second))
	if p := r.problems(ds, limit); len(p) != 0 {
		t.Errorf("each of the failed node's keys one window's worth over: %v; want no problem", p)
	}
	ds = ds[:0]
	admit("healthy", limit+1)
	r = summarize(ds, nodeOf, "victim", base, base.Add(time.Second))
	if len(r.problems(ds, limit)) == 0 {
		t.Error("one admission over on a healthy node's key passed")
	}
}
