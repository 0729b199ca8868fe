// Package slidegrpc rate-limits gRPC calls with a slidelog.Limiter: a
// strict sliding-window log on Redis, Redis Cluster or memory.
//
//	l, _ := slidelog.New(memstore.New(), slidelog.PerMinute(100))
//	srv := grpc.NewServer(
//		grpc.ChainUnaryInterceptor(slidegrpc.UnaryServerInterceptor(l)),
//		grpc.ChainStreamInterceptor(slidegrpc.StreamServerInterceptor(l)),
//	)
//
// Each call (each stream, for streaming methods) is keyed, by default by
// the peer's address, checked, and given the rate-limit fields as
// response header metadata: ratelimit-policy and ratelimit, the same
// values as slidelog's HTTP adapters send. A denied call fails with
// codes.ResourceExhausted, a RetryInfo detail giving the delay and a
// retry-after header; a call with a bad identity fails with
// InvalidArgument; when the limiter cannot decide, the call fails with
// Unavailable (Internal when the server is misconfigured), never with the
// error's text.
//
// The options are package httplimit's, the HTTP adapters', read for gRPC: a call's path and
// route are its full method ("/package.Service/Method"), its headers its
// incoming metadata, its remote address its peer. So httplimit.ByRoute
// keys by full method, httplimit.ByContextValue by an identity your
// authentication interceptor verified (chain a per-peer limit before it),
// httplimit.SkipPaths skips full methods, and httplimit.WithTrustedProxies
// with httplimit.WithClientIPHeader("x-forwarded-for") believes the one metadata
// key that trusted proxies write (httplimit.WithAllPeersTrusted: the entry
// the peer appended). httplimit.ByHeader keys by a metadata value your own
// proxy or gateway sets; sent twice, the call fails with InvalidArgument. WithMethodLimiters and WithMethodCosts
// set per-method policies and costs.
//
// For go-grpc-middleware v2's ratelimit interceptors, NewMiddlewareLimiter
// returns a value that satisfies their Limiter interface.
package slidegrpc
