package slidelog_test

import (
	"context"
	"fmt"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/memstore"
)

func Example() {
	store := memstore.New()
	defer store.Close() // whoever creates a store closes it
	limiter, err := slidelog.New(store, slidelog.PerMinute(3))
	if err != nil {
		panic(err)
	}
	defer limiter.Close()

	for range 4 {
		res, err := limiter.Allow(context.Background(), "client-42")
		if err != nil {
			fmt.Println("no decision:", err)
			continue
		}
		fmt.Printf("allowed=%v remaining=%d retry-after=%v\n", res.Allowed, res.Remaining, res.RetryAfter.Round(time.Second))
	}
	// Output:
	// allowed=true remaining=2 retry-after=0s
	// allowed=true remaining=1 retry-after=0s
	// allowed=true remaining=0 retry-after=0s
	// allowed=false remaining=0 retry-after=1m0s
}

func ExampleWithPolicy() {
	store := memstore.New()
	defer store.Close()
	// 2 per second AND 1,000 per hour, checked and recorded together.
	limiter, err := slidelog.New(store, slidelog.PerSecond(2), slidelog.WithPolicy(slidelog.PerHour(1000)))
	if err != nil {
		panic(err)
	}
	defer limiter.Close()

	for range 3 {
		res, _ := limiter.Allow(context.Background(), "client-42")
		fmt.Println(res.Allowed, res.Policy.Name, res.Remaining, res.Violated())
	}
	// Output:
	// true per-second 1 []
	// true per-second 0 []
	// false per-second 0 [per-second]
}
