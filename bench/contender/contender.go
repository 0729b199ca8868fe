package contender

import (
	"context"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/httprate"
	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	golimiter "github.com/sethvargo/go-limiter"
	"github.com/sethvargo/go-limiter/memorystore"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/throttled/throttled/v2"
	goredisstore "github.com/throttled/throttled/v2/store/goredisstore.v9"
	"github.com/ulule/limiter/v3"
	ululeredis "github.com/ulule/limiter/v3/drivers/store/redis"
	"golang.org/x/time/rate"
)

// Limiter is one rate limiter under test. Allow decides one request of
// cost 1 for key; an error means no decision was made.
type Limiter interface {
	Allow(ctx context.Context, key string) (bool, error)
	Close() error
}

// Names of the contenders, as they appear in tables and charts.
const (
	Slidelog       = "slidelog"
	SlidelogMemory = "slidelog (memory)"
	RedisRate      = "redis_rate v10"
	Ulule          = "ulule/limiter v3"
	Throttled      = "throttled v2"
	EvalSHA        = "EVALSHA round trip"
	// Article is the design article's script (ZREMRANGEBYSCORE, ZCARD,
	// ZADD, EXPIRE), run with plain EVALSHA and the caller's clock.
	Article        = "article's script (4 commands)"
	SlidelogScript = "slidelog script, plain EVALSHA"
	// SlidelogNoPipelining and SlidelogNoDenyCache are slidelog with one
	// of its performance features switched off, to show what it brings.
	SlidelogNoPipelining = "slidelog, pipelining off"
	SlidelogNoDenyCache  = "slidelog, deny cache off"
	HTTPRate             = "httprate"
	GoLimiter            = "go-limiter (memory)"
	XTimeRate            = "x/time/rate"
)

// Redis lists the contenders that keep their state in Redis, slidelog
// first, in the order they are run and shown.
var Redis = []string{Slidelog, RedisRate, Ulule, Throttled}

// RTT lists the contenders of the round-trip sweep (the Cluster with
// latency added to every round trip): slidelog and the Redis peers.
var RTT = []string{Slidelog, RedisRate, Ulule, Throttled}

// RedisAll lists every Redis-backed row of the report, peers and
// baselines included, in the order shown.
var RedisAll = []string{Slidelog, SlidelogNoPipelining, SlidelogNoDenyCache, RedisRate, Ulule, Throttled, Article, EvalSHA, SlidelogScript}

// Memory lists the in-process contenders, slidelog's memory store first.
var Memory = []string{SlidelogMemory, GoLimiter, HTTPRate, XTimeRate}

// NewRedis returns the Redis-backed contender name on client, limit
// requests per window, every key it writes starting with prefix (possibly
// after the peer's own fixed prefix).
func NewRedis(ctx context.Context, name string, client redis.UniversalClient, prefix string, limit int, window time.Duration) (Limiter, error) {
	switch name {
	case Slidelog, SlidelogNoPipelining, SlidelogNoDenyCache:
		storeOpts := []redisstore.Option{redisstore.WithKeyPrefix(prefix)}
		if name == SlidelogNoPipelining {
			storeOpts = append(storeOpts, redisstore.WithAutoPipelining(0))
		}
		store, err := redisstore.New(client, storeOpts...)
		if err != nil {
			return nil, err
		}
		var opts []slidelog.Option
		if name == SlidelogNoDenyCache {
			opts = append(opts, slidelog.WithDenyCache(0))
		}
		return newSlidelog(store, limit, window, opts...)
	case RedisRate:
		return &redisRate{l: redis_rate.NewLimiter(client), prefix: prefix,
			limit: redis_rate.Limit{Rate: limit, Burst: limit, Period: window}}, nil
	case Ulule:
		store, err := ululeredis.NewStoreWithOptions(client, limiter.StoreOptions{Prefix: prefix})
		if err != nil {
			return nil, err
		}
		return &ulule{l: limiter.New(store, limiter.Rate{Period: window, Limit: int64(limit)})}, nil
	case Throttled:
		store, err := goredisstore.NewCtx(client, prefix)
		if err != nil {
			return nil, err
		}
		l, err := throttled.NewGCRARateLimiterCtx(store, throttled.RateQuota{
			MaxRate: throttled.PerDuration(limit, window), MaxBurst: limit - 1})
		if err != nil {
			return nil, err
		}
		return &throttledGCRA{l: l}, nil
	case EvalSHA:
		return &evalSHA{client: client, prefix: prefix}, nil
	case Article:
		return &article{client: client, prefix: prefix, limit: limit, window: window}, nil
	}
	return nil, fmt.Errorf("unknown redis contender %q", name)
}

// NewMemory returns the in-process contender name, limit requests per
// window.
func NewMemory(name string, limit int, window time.Duration) (Limiter, error) {
	switch name {
	case SlidelogMemory:
		return newSlidelog(memstore.New(), limit, window)
	case GoLimiter:
		store, err := memorystore.New(&memorystore.Config{Tokens: uint64(limit), Interval: window})
		if err != nil {
			return nil, err
		}
		return &goLimiter{s: store}, nil
	case HTTPRate:
		return newHTTPRate(limit, window), nil
	case XTimeRate:
		return &xTimeRate{every: rate.Every(window / time.Duration(limit)), burst: limit}, nil
	}
	return nil, fmt.Errorf("unknown memory contender %q", name)
}

type slidelogLimiter struct{ l *slidelog.Limiter }

// ErrFailureMode is what slidelog's Allow returns here for a decision made
// by the failure mode (the local fallback, by default): the peers have no
// fallback, so such a decision counts as an error, never as a decision.
var ErrFailureMode = errors.New("slidelog: decided by the failure mode, not by the store")

// newSlidelog returns slidelog with its default options, as users get it
// (automatic pipelining, the deny cache, the fallback, the stall timeout).
// Every decision counted comes from the store or from the deny cache; one
// made by the failure mode is an error (ErrFailureMode).
func newSlidelog(store slidelog.Store, limit int, window time.Duration, opts ...slidelog.Option) (Limiter, error) {
	opts = append([]slidelog.Option{slidelog.WithName("bench")}, opts...)
	l, err := slidelog.New(store, slidelog.Policy{Name: "bench", Limit: limit, Window: window}, opts...)
	if err != nil {
		return nil, errors.Join(err, store.Close())
	}
	return slidelogLimiter{l}, nil
}

func (s slidelogLimiter) Allow(ctx context.Context, key string) (bool, error) {
	res, err := s.l.Allow(ctx, key)
	if err == nil && res.Source != redisstore.Source && res.Source != memstore.Source && res.Source != slidelog.SourceDenyCache {
		return false, fmt.Errorf("%w (%v)", ErrFailureMode, res.Source)
	}
	return res.Allowed, err
}

func (s slidelogLimiter) Close() error { return s.l.Close() }

type redisRate struct {
	l      *redis_rate.Limiter
	prefix string
	limit  redis_rate.Limit
}

func (r *redisRate) Allow(ctx context.Context, key string) (bool, error) {
	// redis_rate has no prefix option: its keys are "rate:" + key.
	res, err := r.l.Allow(ctx, r.prefix+key, r.limit)
	if err != nil {
		return false, err
	}
	return res.Allowed > 0, nil
}

func (r *redisRate) Close() error { return nil }

type ulule struct{ l *limiter.Limiter }

func (u *ulule) Allow(ctx context.Context, key string) (bool, error) {
	c, err := u.l.Get(ctx, key)
	return !c.Reached, err
}

func (u *ulule) Close() error { return nil }

type throttledGCRA struct{ l *throttled.GCRARateLimiterCtx }

func (t *throttledGCRA) Allow(ctx context.Context, key string) (bool, error) {
	limited, _, err := t.l.RateLimitCtx(ctx, key, 1)
	return !limited, err
}

func (t *throttledGCRA) Close() error { return nil }

// articleScript is the design article's snippet 2, as published: evict,
// count, add and set the expiry, with the caller's time in milliseconds.
// scripts/script-cost.sh measures the same file inside Redis.
var articleScript = redis.NewScript(articleSource)

//go:embed article.lua
var articleSource string

type article struct {
	client redis.UniversalClient
	prefix string
	limit  int
	window time.Duration
	seq    atomic.Uint64
}

func (a *article) Allow(ctx context.Context, key string) (bool, error) {
	now := time.Now().UnixMilli()
	member := strconv.FormatInt(now, 10) + "-" + strconv.FormatUint(a.seq.Add(1), 36)
	v, err := articleScript.Run(ctx, a.client, []string{a.prefix + "{" + key + "}"}, now, a.window.Milliseconds(), a.limit, member).Int64Slice()
	if err != nil {
		return false, err
	}
	return len(v) > 0 && v[0] == 1, nil
}

func (a *article) Close() error { return nil }

// evalSHAScript is the smallest keyed script: one EVALSHA round trip to the
// key's node, the floor under any script-based limiter.
var evalSHAScript = redis.NewScript(`return 1`)

type evalSHA struct {
	client redis.UniversalClient
	prefix string
}

func (e *evalSHA) Allow(ctx context.Context, key string) (bool, error) {
	err := evalSHAScript.Run(ctx, e.client, []string{e.prefix + key}).Err()
	return err == nil, err
}

func (e *evalSHA) Close() error { return nil }

// ReadScript returns the text Redis runs for slidelog's script file at
// path: the file with the lib.lua beside it joined in after its first
// line, as core/redisstore/scripts.go joins them (a file without a
// lib.lua beside it, as before the library, is returned as it is).
func ReadScript(path string) (string, error) {
	file, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	lib, err := os.ReadFile(filepath.Join(filepath.Dir(path), "lib.lua"))
	if errors.Is(err, fs.ErrNotExist) {
		return string(file), nil
	} else if err != nil {
		return "", err
	}
	first, rest, _ := strings.Cut(string(file), "\n")
	return first + "\n" + string(lib) + rest, nil
}

// NewScript returns a contender that runs slidelog's decision script src
// (core/redisstore/common.lua, the script that decides a take of cost 1 on
// exact policies) with one plain EVALSHA per call, on the key slidelog's
// Redis store would use: what slidelog costs with nothing around the
// script. Its arguments follow the script's header: a unique member, now
// (0, the server's clock), then limit and window in microseconds.
func NewScript(client redis.UniversalClient, src, prefix string, limit int, window time.Duration) (Limiter, error) {
	store, err := redisstore.New(client, redisstore.WithKeyPrefix(prefix))
	if err != nil {
		return nil, err
	}
	return &plainScript{client: client, script: redis.NewScript(src), store: store, limit: limit, window: window.Microseconds()}, nil
}

type plainScript struct {
	client redis.UniversalClient
	script *redis.Script
	store  *redisstore.Store
	limit  int
	window int64
}

func (p *plainScript) Allow(ctx context.Context, key string) (bool, error) {
	// A 6-byte random member, the size slidelog's store sends.
	var member [8]byte
	binary.BigEndian.PutUint64(member[:], rand.Uint64())
	k := p.store.LogKey("bench", key)
	reply, err := p.script.Run(ctx, p.client, []string{k}, member[2:], 0, p.limit, p.window).Int64Slice()
	if err != nil {
		return false, err
	}
	if len(reply) == 0 || reply[0] == -1 {
		return false, errors.New("slidelog's common script handed over (a key it does not decide alone)")
	}
	return reply[0] == 1, nil
}

func (p *plainScript) Close() error { return nil }

type goLimiter struct{ s golimiter.Store }

func (g *goLimiter) Allow(ctx context.Context, key string) (bool, error) {
	_, _, _, ok, err := g.s.Take(ctx, key)
	return ok, err
}

func (g *goLimiter) Close() error { return g.s.Close(context.Background()) }

// httpRate drives httprate's RateLimiter the way its middleware does,
// through OnLimit, which needs a request (for its context) and a
// response writer (for its headers). The header maps are pooled, so that
// the allocations counted are httprate's own.
type httpRate struct {
	l       *httprate.RateLimiter
	req     *http.Request
	headers sync.Pool
}

func newHTTPRate(limit int, window time.Duration) *httpRate {
	req, _ := http.NewRequest(http.MethodGet, "/", nil)
	h := &httpRate{l: httprate.NewRateLimiter(limit, window), req: req}
	h.headers.New = func() any { return headerWriter{} }
	return h
}

func (h *httpRate) Allow(_ context.Context, key string) (bool, error) {
	w := h.headers.Get().(headerWriter)
	clear(w)
	limited := h.l.OnLimit(w, h.req, key)
	h.headers.Put(w)
	return !limited, nil
}

func (h *httpRate) Close() error { return nil }

type headerWriter http.Header

func (w headerWriter) Header() http.Header         { return http.Header(w) }
func (w headerWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w headerWriter) WriteHeader(int)             {}

// xTimeRate is the usual keyed use of golang.org/x/time/rate: one token
// bucket per key in a sync.Map, never evicted.
type xTimeRate struct {
	every   rate.Limit
	burst   int
	buckets sync.Map
}

func (x *xTimeRate) Allow(_ context.Context, key string) (bool, error) {
	b, ok := x.buckets.Load(key)
	if !ok {
		b, _ = x.buckets.LoadOrStore(key, rate.NewLimiter(x.every, x.burst))
	}
	return b.(*rate.Limiter).Allow(), nil
}

func (x *xTimeRate) Close() error { return nil }
