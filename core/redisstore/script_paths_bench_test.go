package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
)

// BenchmarkScriptPathDecision measures what a decision costs Redis and
// this process on the paths of script.lua that common.lua does not take:
// a weighted log (every request of cost 2, one policy of 100 units a
// minute, so the log keeps running sums) and a bucketed window (100 a
// minute, precision 1 s), with 16 callers on 10,000 keys at random, on
// the rig's standalone server and Cluster. It is the comparison for a
// change of script.lua's per-call work (redis-cpu-µs/op, as
// BenchmarkMultiPolicyDecision reports it).
//
//	eval "$(scripts/redis-rig.sh env)"
//	cd core && go test -run '^$' -bench ScriptPathDecision -benchtime 3s -count 3 ./redisstore
func BenchmarkScriptPathDecision(b *testing.B) {
	keys := benchKeys(10_000)
	onEachPlainClient(b, func(b *testing.B, client redis.UniversalClient, store *redisstore.Store) {
		for _, path := range []struct {
			name   string
			policy slidelog.Policy
			cost   int
		}{
			{"weighted", slidelog.PerMinute(100), 2},
			{"bucketed", slidelog.Policy{Name: "b", Limit: 100, Window: time.Minute, Precision: time.Second}, 1},
		} {
			l, err := slidelog.New(store, path.policy, slidelog.WithName(path.name), slidelog.WithDenyCache(0))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = l.Close() })
			b.Run(path.name, func(b *testing.B) {
				// Denials are not reported: only the paths' cost is
				// compared.
				decideFrom(b, client, keys, 16, func(ctx context.Context, key string) (bool, error) {
					_, err := l.AllowN(ctx, key, path.cost)
					return true, err
				})
			})
		}
	})
}
