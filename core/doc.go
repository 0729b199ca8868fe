// Package slidelog limits how often each client may act, with a strict
// sliding window: a request is admitted only if, counting it, no window of
// the policy's length ending now holds more than the policy's limit.
//
// A Limiter keeps, per client identity (a key), a log of the times of the
// requests it admitted, and decides each request against every policy it
// enforces:
//
//	store := memstore.New()
//	limiter := slidelog.MustNew(store, slidelog.PerMinute(100))
//	res, err := limiter.Allow(ctx, clientIP)
//	if err != nil {
//		// no decision: a bad key, or the caller's context ended
//	}
//	if !res.Allowed {
//		// denied: come back after res.RetryAfter
//	}
//
// A denial is a Result with Allowed == false, never an error; an error
// means no decision was made. Result tells how many units remain, exactly
// when a denied request would fit (RetryAfter), and which policy bound the
// decision. AllowN decides a request of several units, Refund gives back
// an admitted one, and Reset forgets a key.
//
// # Stores
//
// The logs live in a Store. Package memstore keeps them in process memory,
// for one process. Package redisstore keeps them in Redis, a single server
// or a Redis Cluster, where one Lua script decides each request
// atomically, so every process sharing the server enforces one budget per
// key exactly: while Redis decides, no rolling window admits more than its
// limit. Any other implementation of Store works too (see "Writing a
// store"). Package slidelogtest holds the conformance suite every store
// must pass.
//
// # Writing a store
//
// A store needs the four methods of Store: Take, Refund, Reset, Close.
// The limiter validates every request before the store sees it (key,
// cost, policies) and sets the Source of the store's decisions, so a
// store only decides. Everything else is optional, one small interface
// per capability:
//
//   - Describer: Describe returns a StoreInfo once, when a limiter is
//     created: Name, the Source of the store's decisions and its metric
//     label ("redis", "memory"; "store" when there is no Describer);
//     Local, for a store in this process's memory that cannot fail or
//     stall (no breaker, fallback or write-back); Clock, the
//     clock its decisions follow, for the deny cache.
//   - Router: Route places a request on a node, once per decision; the
//     limiter keeps a circuit breaker per Route.Node and
//     hands the Route back in Request.Route to Take and Record, so the
//     store computes a request's key and node once.
//   - Recorder: Record writes the fallback's admissions into the store
//     before their key's next decision, and in the background once it
//     answers again.
//   - Keeper: Keep takes the fallback's admissions over; the store writes
//     each within its key's next decision, in the same atomic step.
//   - Peeker: Peek reports a key's usage per policy without recording
//     anything, for Limiter.Peek ("7,412 of 10,000 used today").
//
// A store without any of them is a remote store named "store" on one
// node: the limiter gives it a circuit breaker, the local fallback and a
// deny cache.
//
// How long a call may wait is the store's to bound (see "Waiting"): a
// store reached over a network ends a call on a node that stopped
// answering, with an error wrapping ErrStalled, and honours the caller's
// context: a call whose context ends while it waits returns at once with
// an error (Store states the bound), which slidelogtest.WithStall checks
// on a backend the test stops. An error that concerns one key only
// (ErrDamagedKey, ErrUnservedKey) is not counted against the node's
// breaker.
// slidelogtest.RunStoreSuite tests each capability only where the store
// has it (see Example_thirdPartyStore).
//
// # Waiting
//
// Every call a limiter makes to its store, a decision (Allow, AllowN) as
// well as Refund, Reset and Peek, follows one rule:
//
//   - It waits as long as the caller's context allows and the store
//     answers: the limiter adds no deadline of its own, since a busy
//     process would misjudge a healthy node by one. Bounding a call on a
//     node that stopped answering is the store's part (redisstore: its
//     stall judgement, for every call). When the context ends first, the call fails with the
//     context's error.
//   - It goes through the circuit breaker of the key's node (WithBreaker).
//     While the breaker is open, a decision goes to the failure mode at
//     once, and Refund, Reset and Peek fail at once with an error
//     wrapping ErrUnavailable: the error a decision gets under
//     FailError. A store error of any of them counts against the node as
//     a decision's does; the caller's own cancellation does not.
//   - Only a decision has a failure mode: a refund, a reset or a read of
//     usage the store could not make is an error, never invented.
//
// A store in this process's memory (StoreInfo.Local, package memstore)
// has no breaker and answers at once. A limiter on a memstore.Store
// decides on the store's logs itself, whatever its options, through the
// code its local fallback uses: the decisions are those of the store's
// Take, without the request and the Result passing through the Store
// interface. A store that embeds a memstore.Store is a store of its own,
// decided through its Take. A store builds a Result of several policies
// with NewResult, which chooses the binding policy. An HTTP middleware bounds the
// refund it makes after a 5xx itself (httplimit.RefundTimeout), since the
// client may be gone.
//
// # Policies
//
// A Policy is a limit and a window (PerSecond, PerMinute, PerHour, PerDay,
// PerWeek, a Policy literal, or ParsePolicy("10000/day precision=15m")
// from a configuration file). WithPolicy adds more: a request is admitted only when
// every policy has room and is then recorded in all of them. A policy with
// a Precision counts admissions in buckets instead of one log entry per
// request: memory per key is bounded whatever the limit, and the window is
// still never exceeded, at the price of some utilisation.
//
// WithPolicyFunc chooses the policies of each decision instead, such as a
// customer's plan looked up from the context: a key's log stays the same
// across plans, so a change of plan neither resets nor forgets its usage.
//
// # Failures
//
// When the store cannot decide (Redis down, failing over, answering
// errors, or a node that answers nothing for its store's stall timeout), the
// request goes to the failure mode (WithFailureMode): by default a local
// in-memory limiter of this instance (FailFallback), whose admissions are
// written into the store once it answers again; or FailOpen, FailClosed,
// FailError. A circuit breaker per store node (WithBreaker) sends the
// requests of a failing node straight to the failure mode, and a deny
// cache (WithDenyCache) answers repeated requests of a key the store just
// denied without a store call. Observers (WithObserver; packages
// prommetrics and otelmetrics) count every decision and failover, and the
// events a store reports of its own (Notifier), such as a Redis master
// that lost its keys.
//
// # HTTP and gRPC
//
// Package httplimit turns a limiter into HTTP middleware: identities from
// the client IP (with trusted proxies), a header or a route, costs, the
// RateLimit header fields and problem bodies. The adapter modules
// (slidechi, slidegin, slideecho, slideechov5, slidefiber, slidegrpc)
// plug it into each framework.
package slidelog
