package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/redisstore"
)

// Sizing is what one key costs at one quota under one model: its bytes
// when its window is full and steady, and on Redis the server time of a
// decision on such a key.
type Sizing struct {
	Case      string   `json:"case"` // "10,000 per hour"
	Limit     int      `json:"limit"`
	Window    Duration `json:"window"`
	Model     string   `json:"model"`               // sizingExact, "P = W/100", ... or sizingGCRA
	Precision Duration `json:"precision,omitempty"` // 0 for the exact log and GCRA
	Store     string   `json:"store"`               // "redis" or "memory"
	Keys      int      `json:"keys"`                // keys filled and measured
	// BytesPerKey is, on Redis, the MEMORY USAGE (SAMPLES 0) of all of an
	// identity's keys, averaged over the keys, the larger of the readings
	// after the fill and after the measured decisions; in memory, the live
	// heap the store holds per key.
	BytesPerKey float64 `json:"bytes_per_key"`
	// Extrapolated is set when BytesPerKey was computed, not measured
	// (the exact log at a limit too large to fill): From says from what.
	Extrapolated bool   `json:"extrapolated,omitempty"`
	From         string `json:"from,omitempty"`
	// Entries is the log's entries (exact) or the buckets' fields (bucketed)
	// per key at the end of the fill; Recent the members of the ":r" set.
	Entries float64 `json:"entries,omitempty"`
	Recent  float64 `json:"recent,omitempty"`
	// Parts is BytesPerKey's reading split by Redis key: "log", ":c",
	// ":s", ":b" and ":r" (see redisstore.Store.LogKey).
	Parts map[string]float64 `json:"parts,omitempty"`
	// Encodings is OBJECT ENCODING of the first key's non-empty parts.
	Encodings string `json:"encodings,omitempty"`
	// UsecPerDecision is INFO commandstats' usec of every command over the
	// measured decisions, per decision (Redis only; 0 when not measured).
	UsecPerDecision float64 `json:"usec_per_decision,omitempty"`
	Decisions       int64   `json:"decisions,omitempty"`
	Admitted        int64   `json:"admitted,omitempty"`
	FillCalls       int64   `json:"fill_calls"`
	FillSeconds     float64 `json:"fill_seconds"`
}

// Model names of the sizing figures.
const (
	sizingExact = "exact log"
	sizingGCRA  = "redis_rate v10 (GCRA)"
)

// sizingConfig is the part of the configuration the sizing figures use.
type sizingConfig struct {
	keys       int // Redis keys per bucketed or GCRA case
	exactKeys  int // Redis keys for the exact log
	memKeys    int // memory-store keys per bucketed case
	measured   int // measured decisions per key (rounds) on Redis
	exactLimit int // largest limit the exact log is filled to; above, extrapolated
}

func (c *sizingConfig) flags(fs interface {
	IntVar(*int, string, int, string)
}) {
	fs.IntVar(&c.keys, "sizing-keys", 16, "sizing: Redis keys per bucketed and GCRA case")
	fs.IntVar(&c.exactKeys, "sizing-exact-keys", 4, "sizing: Redis keys of the exact log case")
	fs.IntVar(&c.memKeys, "sizing-mem-keys", 256, "sizing: memory-store keys per bucketed case (exact: 1 key per 250,000 entries, at least 1)")
	fs.IntVar(&c.measured, "sizing-decisions", 300, "sizing: measured decisions per key on Redis (Redis µs per decision)")
	fs.IntVar(&c.exactLimit, "sizing-exact-max", 10_000, "sizing: largest limit the exact log is filled to on Redis; larger ones are extrapolated from bytes per entry")
}

// quotaCases are the quotas of the sizing figures, and the precisions
// measured at each.
var quotaCases = []struct {
	name   string
	limit  int
	window time.Duration
}{
	{"10,000 per hour", 10_000, time.Hour},
	{"1,000,000 per day", 1_000_000, 24 * time.Hour},
}

var quotaDivisors = []int{100, 1000}

// The fill: the exact log gets requests of cost 1 at the limit's rate for a
// window and two more steps. A bucketed key gets, once per bucket, one
// request of cost bucketFill × limit × P / W for a window and two more
// buckets (so that it holds its steady number of buckets and its oldest
// have left), then recentTail requests of cost 1 at the limit's rate, so
// that its ":r" set holds its steady RECENT (127) latest admissions. The
// 10% headroom lets those be admitted.
const (
	bucketFill = 0.9
	recentTail = 160
)

// sizingSchedule is one fill: steps of step, each of cost cost, then the
// tail of cost 1 every tailStep.
type sizingSchedule struct {
	steps    int
	step     time.Duration
	cost     int
	tail     int
	tailStep time.Duration
}

func scheduleFor(limit int, window, precision time.Duration) sizingSchedule {
	perUnit := window / time.Duration(limit)
	if precision == 0 {
		return sizingSchedule{steps: limit + 2, step: perUnit, cost: 1}
	}
	buckets := int(window / precision)
	return sizingSchedule{steps: buckets + 2, step: precision,
		cost: max(1, int(bucketFill*float64(limit)/float64(buckets))), tail: recentTail, tailStep: perUnit}
}

// synthClock is the time given to the store with WithClock: the driver
// moves it, every decision of a round reads the same time.
type synthClock struct{ us atomic.Int64 }

func (c *synthClock) now() time.Time          { return time.UnixMicro(c.us.Load()) }
func (c *synthClock) advance(d time.Duration) { c.us.Add(d.Microseconds()) }
func newSynthClock(start time.Time) *synthClock {
	c := &synthClock{}
	c.us.Store(start.UnixMicro())
	return c
}
func sizingPolicy(limit int, window, precision time.Duration) slidelog.Policy {
	return slidelog.Policy{Name: "sizing", Limit: limit, Window: window, Precision: precision}
}

// newSizingLimiter is a limiter on store whose every decision is the
// store's: no deny cache, and an error instead of the fallback.
func newSizingLimiter(store slidelog.Store, p slidelog.Policy) (*slidelog.Limiter, error) {
	return slidelog.New(store, p, slidelog.WithName("sizing"), slidelog.WithDenyCache(0), slidelog.WithFailureMode(slidelog.FailError))
}

// rounds runs n rounds of one decision of cost on every key at once,
// moving clock by step before each; it returns the admissions.
func rounds(ctx context.Context, l *slidelog.Limiter, keys []string, clock *synthClock, n int, step time.Duration, cost int) (int64, error) {
	var admitted atomic.Int64
	errs := make([]error, len(keys))
	for range n {
		clock.advance(step)
		var wg sync.WaitGroup
		for i, key := range keys {
			wg.Go(func() {
				res, err := l.AllowN(ctx, key, cost)
				if err != nil {
					errs[i] = err
					return
				}
				if res.Allowed {
					admitted.Add(1)
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return admitted.Load(), err
		}
	}
	return admitted.Load(), nil
}

// measureSizing fills keys of every case and model on the standalone
// Redis and in the memory store and measures their bytes, and on Redis
// the server time per decision.
func measureSizing(ctx context.Context, client *redis.Client, prefix string, cfg sizingConfig) ([]Sizing, error) {
	var out []Sizing
	perEntry := 0.0 // the exact log's bytes per entry at the largest limit filled
	filledAt := ""
	for ci, c := range quotaCases {
		models := []time.Duration{0}
		for _, d := range quotaDivisors {
			models = append(models, c.window/time.Duration(d))
		}
		for mi, precision := range models {
			s := Sizing{Case: c.name, Limit: c.limit, Window: Duration(c.window), Precision: Duration(precision), Store: "redis", Model: modelName(c.window, precision)}
			if precision == 0 && c.limit > cfg.exactLimit && perEntry > 0 {
				s.Extrapolated = true
				s.BytesPerKey = perEntry * float64(c.limit)
				s.From = fmt.Sprintf("%.1f B per entry measured at %s", perEntry, filledAt)
				out = append(out, s)
				printSizing(s)
				continue
			}
			keys := cfg.keys
			if precision == 0 {
				keys = cfg.exactKeys
			}
			if err := sizeRedis(ctx, client, fmt.Sprintf("%ss%d.%d:", prefix, ci, mi), &s, keys, cfg.measured); err != nil {
				return out, fmt.Errorf("%s, %s: %w", c.name, s.Model, err)
			}
			if precision == 0 {
				perEntry = s.BytesPerKey / max(s.Entries, 1)
				filledAt = c.name
			}
			out = append(out, s)
			printSizing(s)
		}
		s := Sizing{Case: c.name, Limit: c.limit, Window: Duration(c.window), Store: "redis", Model: sizingGCRA}
		if err := sizeGCRA(ctx, client, fmt.Sprintf("%sg%d:", prefix, ci), &s, cfg.keys, cfg.measured); err != nil {
			return out, fmt.Errorf("%s, %s: %w", c.name, s.Model, err)
		}
		out = append(out, s)
		printSizing(s)
	}
	for _, c := range quotaCases {
		for _, precision := range append([]time.Duration{0}, c.window/100, c.window/1000) {
			s := Sizing{Case: c.name, Limit: c.limit, Window: Duration(c.window), Precision: Duration(precision), Store: "memory", Model: modelName(c.window, precision)}
			keys := cfg.memKeys
			if precision == 0 {
				keys = max(1, 1_000_000/c.limit)
			}
			if err := sizeMemory(ctx, &s, keys); err != nil {
				return out, fmt.Errorf("memory, %s, %s: %w", c.name, s.Model, err)
			}
			out = append(out, s)
			printSizing(s)
		}
	}
	return out, deleteKeys(ctx, client, prefix)
}

func modelName(window, precision time.Duration) string {
	if precision == 0 {
		return sizingExact
	}
	return fmt.Sprintf("P = W/%d (%v)", window/precision, precision)
}

func printSizing(s Sizing) {
	extra := ""
	if s.Extrapolated {
		extra = " (extrapolated: " + s.From + ")"
	}
	if s.UsecPerDecision > 0 {
		extra += fmt.Sprintf("  %.2f µs/decision (%d decisions, %.0f%% admitted)", s.UsecPerDecision, s.Decisions, 100*float64(s.Admitted)/float64(max(s.Decisions, 1)))
	}
	if s.FillCalls > 0 {
		extra += fmt.Sprintf("  fill %d calls in %.1fs", s.FillCalls, s.FillSeconds)
	}
	for _, part := range []string{"log", ":c", ":s", ":b", ":r"} {
		if s.Parts[part] > 0 {
			extra += fmt.Sprintf("  %s %.0f B", part, s.Parts[part])
		}
	}
	if s.Encodings != "" {
		extra += " (" + s.Encodings + ")"
	}
	fmt.Printf("sizing    %-6s %-18s %-26s %10.0f B/key  entries %.0f  recent %.0f%s\n",
		s.Store, s.Case, s.Model, s.BytesPerKey, s.Entries, s.Recent, extra)
}

// sizeRedis fills keys identities to their steady state with a synthetic
// clock, reads their bytes, then measures cost-1 decisions at the limit's
// rate on them with INFO commandstats.
func sizeRedis(ctx context.Context, client *redis.Client, prefix string, s *Sizing, keys, measured int) error {
	clock := newSynthClock(time.Now())
	store, err := redisstore.New(client, redisstore.WithKeyPrefix(prefix), redisstore.WithClock(clock.now))
	if err != nil {
		return err
	}
	l, err := newSizingLimiter(store, sizingPolicy(s.Limit, time.Duration(s.Window), time.Duration(s.Precision)))
	if err != nil {
		return err
	}
	defer func() { _ = l.Close() }()
	ids := make([]string, keys)
	for i := range ids {
		ids[i] = "tenant-" + strconv.Itoa(i)
	}
	s.Keys = keys
	sch := scheduleFor(s.Limit, time.Duration(s.Window), time.Duration(s.Precision))
	began := time.Now()
	if _, err := rounds(ctx, l, ids, clock, sch.steps, sch.step, sch.cost); err != nil {
		return err
	}
	if _, err := rounds(ctx, l, ids, clock, sch.tail, sch.tailStep, 1); err != nil {
		return err
	}
	s.FillCalls = int64(keys * (sch.steps + sch.tail))
	s.FillSeconds = time.Since(began).Seconds()
	names := func(id string) []string {
		k := store.LogKey(l.Name(), id)
		return []string{k, k + ":c", k + ":s", k + ":b", k + ":r"}
	}
	parts := []string{"log", ":c", ":s", ":b", ":r"}
	readBytes := func() (float64, map[string]float64, error) {
		var total int64
		byPart := map[string]float64{}
		for _, id := range ids {
			for i, k := range names(id) {
				n, err := client.MemoryUsage(ctx, k, 0).Result()
				if err != nil && !errors.Is(err, redis.Nil) {
					return 0, nil, err
				}
				total += n
				byPart[parts[i]] += float64(n) / float64(len(ids))
			}
		}
		return float64(total) / float64(len(ids)), byPart, nil
	}
	if s.BytesPerKey, s.Parts, err = readBytes(); err != nil {
		return err
	}
	var entries, recent int64
	for _, id := range ids {
		n := names(id)
		if s.Precision == 0 {
			entries += client.ZCard(ctx, n[0]).Val()
		} else {
			entries += client.HLen(ctx, n[3]).Val()
		}
		recent += client.ZCard(ctx, n[4]).Val()
	}
	s.Entries, s.Recent = float64(entries)/float64(keys), float64(recent)/float64(keys)
	var encs []string
	for i, k := range names(ids[0]) {
		if enc, err := client.ObjectEncoding(ctx, k).Result(); err == nil {
			encs = append(encs, parts[i]+" "+enc)
		}
	}
	s.Encodings = strings.Join(encs, ", ")

	if err := client.ConfigResetStat(ctx).Err(); err != nil {
		return err
	}
	s.Admitted, err = rounds(ctx, l, ids, clock, measured, time.Duration(s.Window)/time.Duration(s.Limit), 1)
	if err != nil {
		return err
	}
	s.Decisions = int64(measured * keys)
	if s.UsecPerDecision, err = statsUsec(ctx, client, s.Decisions); err != nil {
		return err
	}
	after, byPart, err := readBytes()
	if after > s.BytesPerKey {
		s.BytesPerKey, s.Parts = after, byPart
	}
	return err
}

// statsUsec reads INFO commandstats and returns the usec of every
// command but the statistics' own, per decision.
func statsUsec(ctx context.Context, client *redis.Client, decisions int64) (float64, error) {
	info, err := client.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	var mu sync.Mutex
	usec, _, _ := parseCommandStats(info, map[string]int64{}, &mu)
	return float64(usec) / float64(max(decisions, 1)), nil
}

// sizeGCRA runs redis_rate on keys identities (its state is one string
// whatever the limit, so a few decisions fill it) and measures decisions.
func sizeGCRA(ctx context.Context, client *redis.Client, prefix string, s *Sizing, keys, measured int) error {
	l := redis_rate.NewLimiter(client)
	limit := redis_rate.Limit{Rate: s.Limit, Burst: s.Limit, Period: time.Duration(s.Window)}
	s.Keys = keys
	for i := range keys {
		if _, err := l.Allow(ctx, prefix+strconv.Itoa(i), limit); err != nil {
			return err
		}
	}
	s.FillCalls = int64(keys)
	if err := client.ConfigResetStat(ctx).Err(); err != nil {
		return err
	}
	var admitted atomic.Int64
	errs := make([]error, keys)
	for range measured {
		var wg sync.WaitGroup
		for i := range keys {
			wg.Go(func() {
				res, err := l.Allow(ctx, prefix+strconv.Itoa(i), limit)
				if err != nil {
					errs[i] = err
				} else if res.Allowed > 0 {
					admitted.Add(1)
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}
	s.Decisions, s.Admitted = int64(measured*keys), admitted.Load()
	var err error
	if s.UsecPerDecision, err = statsUsec(ctx, client, s.Decisions); err != nil {
		return err
	}
	var total int64
	for i := range keys {
		// redis_rate's keys are "rate:" + the key it is given.
		n, err := client.MemoryUsage(ctx, "rate:"+prefix+strconv.Itoa(i), 0).Result()
		if err != nil {
			return fmt.Errorf("MEMORY USAGE of redis_rate's key: %w", err)
		}
		total += n
	}
	s.BytesPerKey = float64(total) / float64(keys)
	return nil
}

// sizeMemory fills keys identities of a memory store by the same schedule
// as on Redis, one key after the other, and measures the live heap the
// store holds per key (keys' strings included, a few bytes each).
func sizeMemory(ctx context.Context, s *Sizing, keys int) error {
	clock := newSynthClock(time.Now())
	sch := scheduleFor(s.Limit, time.Duration(s.Window), time.Duration(s.Precision))
	ids := make([]string, keys)
	for i := range ids {
		ids[i] = "tenant-" + strconv.Itoa(i)
	}
	s.Keys = keys
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	began := time.Now()
	l, err := newSizingLimiter(memstore.New(memstore.WithClock(clock.now)), sizingPolicy(s.Limit, time.Duration(s.Window), time.Duration(s.Precision)))
	if err != nil {
		return err
	}
	fill := func(n int, step time.Duration, cost int) error {
		for range n {
			clock.advance(step)
			for _, id := range ids {
				if _, err := l.AllowN(ctx, id, cost); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := errors.Join(fill(sch.steps, sch.step, sch.cost), fill(sch.tail, sch.tailStep, 1)); err != nil {
		return err
	}
	s.FillCalls = int64(keys * (sch.steps + sch.tail))
	s.FillSeconds = time.Since(began).Seconds()
	runtime.GC()
	runtime.ReadMemStats(&after)
	s.BytesPerKey = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(keys)
	runtime.KeepAlive(l)
	runtime.KeepAlive(ids)
	return l.Close()
}

// sizingMain is `slidebench sizing`: the sizing figures alone, written to
// a results file of their own.
func sizingMain(args []string) error {
	fs := newFlagSet("sizing")
	var cfg sizingConfig
	cfg.flags(fs)
	addr := fs.String("redis", os.Getenv("SLIDELOG_REDIS_ADDR"), "standalone Redis host:port (default $SLIDELOG_REDIS_ADDR)")
	out := fs.String("out", "results/sizing.json", "results file to write (its sizing field)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *addr == "" {
		return errors.New("need a standalone Redis (-redis or SLIDELOG_REDIS_ADDR)")
	}
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: *addr, ContextTimeoutEnabled: true})
	defer client.Close()
	prefix := "slidebench:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":size:"
	res := &Results{}
	res.Env.Date = time.Now().UTC()
	res.Env.LoadStart = loadAverage()
	var err error
	res.Sizing, err = measureSizing(ctx, client, prefix, cfg)
	res.Env.LoadEnd = loadAverage()
	if info, ierr := client.Info(ctx, "server").Result(); ierr == nil {
		res.Env.RedisVersion = infoField(info, "redis_version")
	}
	if err != nil {
		return err
	}
	res.Env.Command = strings.Join(os.Args, " ")
	return writeResults(*out, res)
}
