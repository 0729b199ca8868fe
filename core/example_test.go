package slidelog_test

import (
	"context"
	"fmt"
	"sync"
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

// listStore is a third-party store in a few lines: one exact policy per
// key, in a map. It implements only Store, plus Describer to name its
// decisions and say it is local.
type listStore struct {
	mu   sync.Mutex
	logs map[string][]time.Time
}

func (s *listStore) Describe() slidelog.StoreInfo {
	return slidelog.StoreInfo{Name: "list", Local: true}
}

func (s *listStore) Take(_ context.Context, req slidelog.Request) (slidelog.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, now := req.Policies[0], time.Now() // the limiter validated req: one policy here
	key := req.Namespace + "\x00" + req.Key
	log := s.logs[key]
	for len(log) > 0 && !log[0].After(now.Add(-p.Window)) {
		log = log[1:]
	}
	st := slidelog.PolicyResult{Policy: p, Allowed: len(log)+req.Cost <= p.Limit}
	if st.Allowed {
		for range req.Cost {
			log = append(log, now)
		}
	} else {
		st.RetryAfter = log[len(log)-p.Limit+req.Cost-1].Add(p.Window).Sub(now)
	}
	st.Remaining = p.Limit - len(log)
	s.logs[key] = log
	return slidelog.NewResult([]slidelog.PolicyResult{st}, ""), nil
}

func (s *listStore) Refund(context.Context, slidelog.Request) error { return nil }

func (s *listStore) Reset(_ context.Context, req slidelog.Request) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.logs, req.Namespace+"\x00"+req.Key)
	return nil
}

func (s *listStore) Close() error { return nil }

// A store defined outside this module: four methods, and Describe to name
// its decisions. It is a sketch: it decides on the first policy only,
// refunds nothing and takes no clock, all of which
// slidelogtest.RunStoreSuite, the check for any store, would refuse.
func Example_thirdPartyStore() {
	store := &listStore{logs: map[string][]time.Time{}}
	limiter := slidelog.MustNew(store, slidelog.PerMinute(2))
	defer limiter.Close()
	for range 3 {
		res, _ := limiter.Allow(context.Background(), "client")
		fmt.Println(res.Allowed, res.Remaining, res.Source)
	}
	// Output:
	// true 1 list
	// true 0 list
	// false 0 list
}

func ExampleWithPolicyFunc() {
	store := memstore.New()
	defer store.Close()
	// Plans, as a database would give them: a key's plan may change at
	// any time, and its usage carries over.
	var mu sync.Mutex
	plan := map[string]string{"acct:1": "free"}
	limits := map[string][]slidelog.Policy{
		"free": {slidelog.PerMinute(2)},
		"pro":  {slidelog.PerMinute(5)},
	}
	limiter, err := slidelog.New(store, slidelog.PerMinute(1), // for keys without a plan
		slidelog.WithName("api"),
		slidelog.WithPolicyFunc(func(_ context.Context, key string) ([]slidelog.Policy, error) {
			mu.Lock()
			defer mu.Unlock()
			return limits[plan[key]], nil // nil: the limiter's own policy
		}))
	if err != nil {
		panic(err)
	}
	defer limiter.Close()

	ctx := context.Background()
	for i := range 3 {
		res, _ := limiter.Allow(ctx, "acct:1")
		fmt.Printf("free %d: allowed=%v %d/%d left\n", i+1, res.Allowed, res.Remaining, res.Limit)
	}
	mu.Lock()
	plan["acct:1"] = "pro"
	mu.Unlock()
	res, _ := limiter.Allow(ctx, "acct:1")
	fmt.Printf("pro: allowed=%v %d/%d left\n", res.Allowed, res.Remaining, res.Limit)
	res, _ = limiter.Allow(ctx, "acct:2")
	fmt.Printf("no plan: allowed=%v %d/%d left\n", res.Allowed, res.Remaining, res.Limit)
	// Output:
	// free 1: allowed=true 1/2 left
	// free 2: allowed=true 0/2 left
	// free 3: allowed=false 0/2 left
	// pro: allowed=true 2/5 left
	// no plan: allowed=true 0/1 left
}
