package slidegrpc

import (
	"fmt"
	"maps"
	"strings"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
)

// WithMethodCosts sets the cost of calls to the listed full methods (such
// as "/shop.Catalog/Search": 5); other methods cost 1. The map is copied.
// It is a cost function, so it cannot be combined with
// httplimit.WithCost or httplimit.WithCostFunc. It panics when a name is
// not a full method or a cost is below 1, so that the mistake shows at
// start-up.
func WithMethodCosts(costs map[string]int) httplimit.Option {
	for m, n := range costs {
		mustFullMethod("WithMethodCosts", m)
		if n < 1 {
			panic(fmt.Sprintf("slidegrpc: WithMethodCosts: cost %d for %s, want >= 1", n, m))
		}
	}
	costs = maps.Clone(costs)
	return httplimit.WithCostFunc(func(r *httplimit.Request) int {
		if n, ok := costs[r.Route()]; ok {
			return n
		}
		return 1
	})
}

// WithMethodLimiters gives the listed full methods their own limiters,
// and so their own policies and budgets (such as a tighter limit on
// "/shop.Checkout/Pay"); other methods use the limiter given to the
// interceptor. The map is copied. It is a limiter function, so it cannot
// be combined with httplimit.WithLimiterFunc. It panics when a name is
// not a full method or a limiter is nil.
func WithMethodLimiters(limiters map[string]*slidelog.Limiter) httplimit.Option {
	for m, l := range limiters {
		mustFullMethod("WithMethodLimiters", m)
		if l == nil {
			panic("slidegrpc: WithMethodLimiters: nil limiter for " + m)
		}
	}
	limiters = maps.Clone(limiters)
	return httplimit.WithLimiterFunc(func(r *httplimit.Request) *slidelog.Limiter { return limiters[r.Route()] })
}

// mustFullMethod panics unless m is a gRPC full method,
// "/package.Service/Method".
func mustFullMethod(who, m string) {
	svc, method, ok := strings.Cut(strings.TrimPrefix(m, "/"), "/")
	if !strings.HasPrefix(m, "/") || !ok || svc == "" || method == "" || strings.Contains(method, "/") {
		panic(fmt.Sprintf("slidegrpc: %s: %q is not a full method name like /package.Service/Method", who, m))
	}
}

// noHandler is the handler type no option has: slidegrpc answers with
// DeniedStatus and ErrorStatus, and refuses an HTTP adapter's handlers.
type noHandler struct{}

// build returns the engine opts describe, or panics.
func build(who string, l *slidelog.Limiter, opts []httplimit.Option) *httplimit.Engine {
	e, err := httplimit.New(l, opts...)
	if err == nil {
		_, _, err = httplimit.Handlers[noHandler, noHandler](e)
	}
	if err != nil {
		panic("slidegrpc: " + who + ": " + err.Error())
	}
	return e
}
