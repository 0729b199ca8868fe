package main

import (
	"context"
	"errors"
	"fmt"
	"image/color"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/slidelog/slidelog/bench/contender"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
)

// Bucketed slidelog rows of the accuracy runs: slidelog with the
// non-default option Policy.Precision, at W/100 and W/10 of the attack's
// window.
var (
	slidelogP100 = fmt.Sprintf("slidelog, Precision W/100 (%v)", attackWindow/100)
	slidelogP10  = fmt.Sprintf("slidelog, Precision W/10 (%v)", attackWindow/10)
)

// accuracyContenders are the limiters of both accuracy runs, in the order
// shown: slidelog exact, bucketed, then the fixed window and GCRA.
var accuracyContenders = []string{contender.Slidelog, slidelogP100, slidelogP10, contender.Ulule, contender.RedisRate}

func init() {
	colors[slidelogP100] = color.RGBA{R: 0x17, G: 0xbe, B: 0xcf, A: 0xff}
	colors[slidelogP10] = color.RGBA{R: 0x7f, G: 0xa8, B: 0xf0, A: 0xff}
}

// newAccuracyLimiter returns one of accuracyContenders on client: slidelog
// and the peers as contender.NewRedis makes them, the bucketed rows as
// slidelog with its default options plus a Precision.
func newAccuracyLimiter(ctx context.Context, name string, client redis.UniversalClient, prefix string) (contender.Limiter, error) {
	var precision time.Duration
	switch name {
	case slidelogP100:
		precision = attackWindow / 100
	case slidelogP10:
		precision = attackWindow / 10
	case contender.Slidelog:
	default:
		return contender.NewRedis(ctx, name, client, prefix, attackLimit, attackWindow)
	}
	store, err := redisstore.New(client, redisstore.WithKeyPrefix(prefix))
	if err != nil {
		return nil, err
	}
	l, err := slidelog.New(store, slidelog.Policy{Name: "bench", Limit: attackLimit, Window: attackWindow, Precision: precision}, slidelog.WithName("bench"))
	if err != nil {
		return nil, errors.Join(err, store.Close())
	}
	return timedSlidelog{bucketed{l}}, nil
}

// timedSlidelog is slidelog with the time of each decision by the Redis
// server's clock (Result.DecidedAt), the clock its guarantee is about.
type timedSlidelog struct{ bucketed }

// AllowAt is Allow, with when the store decided.
func (t timedSlidelog) AllowAt(ctx context.Context, key string) (bool, time.Time, error) {
	res, err := t.l.Allow(ctx, key)
	if err == nil && res.Source != redisstore.Source && res.Source != slidelog.SourceDenyCache {
		return false, time.Time{}, fmt.Errorf("%w (%v)", contender.ErrFailureMode, res.Source)
	}
	return res.Allowed, res.DecidedAt, err
}

// allowAt decides key on l and returns when: by the server's clock for
// slidelog, else the middle of the round trip as the client saw it.
func allowAt(ctx context.Context, l contender.Limiter, key string) (bool, time.Time, error) {
	if t, ok := l.(timedSlidelog); ok {
		return t.AllowAt(ctx, key)
	}
	t0 := time.Now()
	ok, err := l.Allow(ctx, key)
	t1 := time.Now()
	return ok, t0.Add(t1.Sub(t0) / 2), err
}

// Steady overload: every limiter receives overloadFactor times its limit's
// rate, evenly paced, for overloadWindows windows.
const (
	overloadFactor  = 2
	overloadWindows = 10
)

// steadyOverload sends the same evenly paced overload to every accuracy
// contender at once, on real Redis, and records when each admitted: the
// most in any rolling window, and the utilisation admitted / (span / W ×
// limit).
func steadyOverload(ctx context.Context, client redis.UniversalClient, prefix string) ([]Accuracy, error) {
	limiters := make([]contender.Limiter, len(accuracyContenders))
	for i, name := range accuracyContenders {
		l, err := newAccuracyLimiter(ctx, name, client, fmt.Sprintf("%s%d:", prefix, i))
		if err != nil {
			return nil, err
		}
		defer func() { _ = l.Close() }()
		limiters[i] = l
	}
	span := overloadWindows * attackWindow
	n := overloadFactor * attackLimit * overloadWindows
	every := span / time.Duration(n)
	out := make([]Accuracy, len(limiters))
	errs := make([]error, len(limiters))
	var wg sync.WaitGroup
	start := time.Now()
	for i := range limiters {
		wg.Go(func() {
			a := Accuracy{Contender: accuracyContenders[i], Limit: attackLimit, Window: Duration(attackWindow), Span: Duration(span)}
			for j := range n {
				time.Sleep(time.Until(start.Add(time.Duration(j) * every)))
				ok, at, err := allowAt(ctx, limiters[i], "steady")
				a.Sent++
				if err != nil {
					errs[i] = err
					break
				}
				if ok {
					a.Admitted = append(a.Admitted, at.Sub(start).Seconds())
				}
			}
			slices.Sort(a.Admitted)
			a.MaxInWin = maxInWindow(a.Admitted, attackWindow.Seconds())
			out[i] = a
		})
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// utilisation is admitted / (span / window × limit), 0 without a span.
func utilisation(a Accuracy) float64 {
	if a.Span == 0 || a.Window == 0 {
		return 0
	}
	return float64(len(a.Admitted)) / (float64(a.Span) / float64(a.Window) * float64(a.Limit))
}

// accuracyLabel names a contender by its model in the accuracy tables.
func accuracyLabel(name string) string {
	switch name {
	case contender.Slidelog:
		return "slidelog (sliding log, default)"
	case contender.Ulule:
		return name + " (fixed window)"
	case contender.RedisRate:
		return name + " (GCRA)"
	case slidelogP100, slidelogP10:
		return name + " (bucketed, non-default option)"
	}
	return name
}

// runBucketedExtras runs, on the standalone Redis, the steady overload
// (cells "standalone/overload") and the sizing figures
// ("standalone/sizing"), when selected, into res.
func runBucketedExtras(ctx context.Context, cfg runConfig, topo topology, runID string, res *Results, selected func(...string) bool) error {
	if selected("standalone", "overload") {
		client := topo.newClient()
		acc, err := steadyOverload(ctx, client, runID+"over:")
		err = errors.Join(err, deleteKeys(ctx, client, runID+"over:"), client.Close())
		if err != nil {
			return fmt.Errorf("steady overload: %w", err)
		}
		res.Overload = acc
		for _, a := range acc {
			fmt.Printf("overload  %-40s limit %d per %v: at most %d admitted in any rolling window (%.2fx), utilisation %.3f (%d of %d sent)\n",
				a.Contender, a.Limit, a.Window, a.MaxInWin, float64(a.MaxInWin)/float64(a.Limit), utilisation(a), len(a.Admitted), a.Sent)
		}
	}
	if selected("standalone", "sizing") {
		client := redis.NewClient(&redis.Options{Addr: cfg.standalone, ContextTimeoutEnabled: true})
		sz, err := measureSizing(ctx, client, runID+"size:", cfg.sizing)
		err = errors.Join(err, client.Close())
		if err != nil {
			return fmt.Errorf("sizing: %w", err)
		}
		res.Sizing = sz
	}
	return nil
}
