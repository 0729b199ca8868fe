package redisstore_test

import (
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/internal/logbuf"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest"
)

// A field of a key's hashes overwritten with a value the script never
// writes (an operator's HSET, a stray write): a series' sum or bounds, a
// bucket's units, a window's running sum or cut, an entry's cost. The
// script never fails on it and no window admits more than its limit: a
// value derived from others is rebuilt from them, a primary one (a
// bucket's units, a cost) counts as the limit until it leaves the window.
// Every decision comes from Redis (none from the failure mode, which
// would admit on top of what Redis admitted), and the store logs a
// warning naming the key.
func TestDamagedFieldsAreRepaired(t *testing.T) {
	bucketed := slidelog.Policy{Name: "b", Limit: 10, Window: time.Minute, Precision: time.Second}
	exact := slidelog.Policy{Name: "p", Limit: 10, Window: time.Minute}
	const ser = "60000000/1000000" // the bucketed policy's series
	const (
		costs = 1
		state = 2
		bkt   = 3
	)
	cases := []struct {
		name  string
		p     slidelog.Policy
		cost  int
		key   int    // index into keysOf
		field string // a trailing * names every field with that prefix
		val   string
		quiet bool // the field is never read: no repair, no warning
	}{
		{"bucketNgarbage", bucketed, 1, bkt, ser + "n", "garbage", false},
		{"bucketNnegative", bucketed, 1, bkt, ser + "n", "-100", false},
		{"bucketNfraction", bucketed, 1, bkt, ser + "n", "2.5", false},
		{"bucketNdeleted", bucketed, 1, bkt, ser + "n", "", false},
		{"bucketFgarbage", bucketed, 1, bkt, ser + "f", "garbage", false},
		{"bucketFafterH", bucketed, 1, bkt, ser + "f", "99999999999999", false},
		{"bucketHgarbage", bucketed, 1, bkt, ser + "h", "garbage", false},
		{"bucketHfar", bucketed, 1, bkt, ser + "h", "99999999999999", false},
		{"bucketCountGarbage", bucketed, 1, bkt, ser + ":*", "garbage", false},
		{"bucketCountNegative", bucketed, 1, bkt, ser + ":*", "-100", false},
		{"bucketStrayField", bucketed, 1, bkt, ser + ":junk", "5", true},
		{"stateSnegative", exact, 2, state, "s60000000", "-100", false},
		{"stateSgarbage", exact, 2, state, "s60000000", "garbage", false},
		{"stateSdeleted", exact, 2, state, "s60000000", "", false},
		{"stateCgarbage", exact, 2, state, "c60000000", "garbage", false},
		{"stateCfuture", exact, 2, state, "c60000000", "99999999999999999", false},
		{"stateStrayCut", exact, 2, state, "cjunk", "5", false},
		{"costGarbage", exact, 2, costs, "*", "garbage", false},
		{"costZero", exact, 2, costs, "*", "0", false},
		// Numbers the script never writes in the fields of a time or a
		// retention: Lua reads "inf" and "nan" as numbers, and an expiry
		// computed from one fails the script on every call.
		{"stateRinf", exact, 2, state, "r", "inf", false},
		{"stateRhuge", exact, 2, state, "r", "1e300", false},
		{"stateRUnan", exact, 2, state, "ru", "nan", false},
		{"stateHinf", exact, 2, state, "h", "inf", false},
		{"stateHnan", exact, 2, state, "h", "nan", false},
		{"bucketXnan", bucketed, 1, bkt, "x", "nan", false},
		{"bucketXinf", bucketed, 1, bkt, "x", "inf", false},
		// The mark that sums are kept, deleted beside its sums: every
		// entry would count 1 whatever its cost.
		{"stateKdeleted", exact, 2, state, "k", "", false},
	}
	for _, topo := range scriptVariants(t) {
		client := topo.client
		for _, c := range cases {
			t.Run(topo.name+"/"+c.name, func(t *testing.T) {
				clock := newTestClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
				var logs logbuf.Buffer
				logger := slog.New(slog.NewTextHandler(&logs, nil))
				s := newVariantStore(t, topo, redisstore.WithClock(clock.Now), redisstore.WithLogger(logger))
				l, err := slidelog.New(s, c.p, slidelog.WithName("dmg-"+c.name), slidelog.WithDenyCache(0))
				require.NoError(t, err)
				defer l.Close()
				keys := keysOf(s, l.Name(), "k")

				// Fill the window in two halves, 30 s apart, so that the
				// first half leaves it while the second still counts.
				used, half := 0, c.p.Limit/2
				for used+c.cost <= c.p.Limit {
					if used < half && used+c.cost >= half {
						clock.Advance(30 * time.Second)
					}
					res, err := l.AllowN(t.Context(), "k", c.cost)
					require.NoError(t, err)
					require.True(t, res.Allowed)
					clock.Advance(time.Millisecond)
					used += c.cost
				}
				damage(t, client, keys[c.key], c.field, c.val)
				// Peek reads the damage without repairing it, and never
				// reports more room than there is.
				peek, err := l.Peek(t.Context(), "k")
				require.NoError(t, err)
				require.Equal(t, redisstore.Source, peek.Source)
				assert.LessOrEqual(t, peek.Remaining, c.p.Limit-used, "room peek reports")

				admitted := 0
				decide := func() {
					for range 2 * c.p.Limit {
						res, err := l.Allow(t.Context(), "k")
						require.NoError(t, err)
						require.Equal(t, redisstore.Source, res.Source, "every decision comes from redis, none from the failure mode")
						if res.Allowed {
							admitted++
						}
						clock.Advance(time.Millisecond)
					}
				}
				decide()
				assert.LessOrEqual(t, admitted+used, c.p.Limit, "units in one window")

				// The first half leaves the window: at most its units
				// are admitted again until the second half leaves.
				clock.Advance(31 * time.Second)
				admitted = 0
				decide()
				assert.LessOrEqual(t, admitted, half+c.cost-1, "units admitted once the first half left the window")

				// Once every unit has left, the key is limited as before.
				clock.Advance(2 * time.Minute)
				admitted = 0
				decide()
				assert.Equal(t, c.p.Limit, admitted, "a new window after the damage left")

				warned := false
				for _, line := range strings.Split(logs.String(), "\n") {
					if strings.Contains(line, "level=WARN") && strings.Contains(line, "damaged") && strings.Contains(line, keys[0]) {
						warned = true
					}
				}
				if !c.quiet {
					assert.True(t, warned, "a warning names the damaged key")
				}
			})
		}
	}
}

// damage writes val into field of the hash at key (deleting it for an
// empty val); a field ending in * stands for every field of key with that
// prefix.
func damage(t *testing.T, client redis.UniversalClient, key, field, val string) {
	t.Helper()
	fields := []string{field}
	if prefix, ok := strings.CutSuffix(field, "*"); ok {
		all, err := client.HKeys(t.Context(), key).Result()
		require.NoError(t, err)
		fields = nil
		for _, f := range all {
			if strings.HasPrefix(f, prefix) {
				fields = append(fields, f)
			}
		}
		require.NotEmpty(t, fields, "no field of %s starts with %q", key, prefix)
	}
	for _, f := range fields {
		if val == "" {
			require.NoError(t, client.HDel(t.Context(), key, f).Err())
		} else {
			require.NoError(t, client.HSet(t.Context(), key, f, val).Err())
		}
	}
}

// TestForeignMemberInWeightedLog writes a member into a weighted log (one
// with running sums, made so by an entry of cost 2) by hand, at a score
// inside the window. No sum ever held it, so once the window's cut passed
// it, the sum would stay one unit short for good and every window admit
// limit + 1. The script finds a sum below the count of its window's
// entries (each costs at least one unit) and recounts it from the log.
// The clock moves 0.5 s per decision, 300 s in all, across a 10 s window.
func TestForeignMemberInWeightedLog(t *testing.T) {
	for name, client := range topologyClients(t) {
		t.Run(name, func(t *testing.T) {
			const limit, window = 5, 10 * time.Second
			var us atomic.Int64
			us.Store(time.Now().UnixMicro())
			s := newRedisStore(t, client, redisstore.WithClock(func() time.Time { return time.UnixMicro(us.Load()) }))
			policies := []slidelog.Policy{{Name: "p", Limit: limit, Window: window}}
			id := uint64(100)
			var admitted []slidelogtest.Admission
			take := func(cost int) {
				id++
				res, err := s.Take(t.Context(), slidelog.Request{Namespace: "foreign", Key: "k", Cost: cost, Policies: policies, ID: id})
				require.NoError(t, err)
				if res.Allowed {
					for range cost {
						admitted = append(admitted, slidelogtest.Admission{Key: "k", Start: res.DecidedAt})
					}
				}
			}
			take(2) // the log keeps running sums from here on
			require.NoError(t, client.ZAdd(t.Context(), s.LogKey("foreign", "k"), redis.Z{Score: float64(us.Load() + 1), Member: "stray"}).Err())
			for range 600 {
				us.Add(int64(500 * time.Millisecond / time.Microsecond))
				take(1)
			}
			_, over := slidelogtest.CheckWindows(admitted, limit, window)
			require.Empty(t, over, "a window over the limit")
			require.Greater(t, len(admitted), 140, "the key keeps being admitted")
		})
	}
}
