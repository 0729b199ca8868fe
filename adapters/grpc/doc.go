// Package slidegrpc rate-limits gRPC calls with a slidelog.Limiter: a
// strict sliding-window log on Redis, Redis Cluster or memory.
//
//	srv := grpc.NewServer(slidegrpc.LimitByPeer(slidelog.PerMinute(100)))
//
// or, with a limiter of your own (on Redis, say):
//
//	srv := grpc.NewServer(slidegrpc.ServerOption(l), grpc.MaxRecvMsgSize(1<<20))
//
// Both decide each call when its headers arrive (a tap.ServerInHandle,
// grpc.InTapHandle), before its message is read: a denied call costs the
// server its headers, however large its message; its denial carries the
// RetryInfo and QuotaFailure details but no metadata. For a key that
// needs what an interceptor sets (httplimit.ByContextValue after your
// authentication interceptor), use the interceptors instead, chained
// after it:
//
//	srv := grpc.NewServer(
//		grpc.ChainUnaryInterceptor(auth, slidegrpc.UnaryServerInterceptor(l, httplimit.WithKeyFunc(httplimit.ByContextValue(userKey)))),
//		grpc.ChainStreamInterceptor(slidegrpc.StreamServerInterceptor(l)),
//	)
//
// grpc-go reads and decodes a unary call's whole message before any
// interceptor runs, denied or not (up to grpc.MaxRecvMsgSize, 4 MB by
// default): keep that limit low with the interceptors.
//
// Each call (each stream, for streaming methods) is keyed, by default by
// the peer's address, checked, and given the rate-limit fields as
// response header metadata: ratelimit-policy and ratelimit, the same
// values as slidelog's HTTP adapters send. A denied call fails with
// codes.ResourceExhausted, a RetryInfo detail giving the delay and a
// QuotaFailure naming the violated policies, in a trailers-only response.
// From the interceptors, its trailer carries the rate-limit fields,
// retry-after and grpc-retry-pushback-ms (the delay in milliseconds): no
// header metadata is sent first, so a grpc-go client whose retry policy
// lists RESOURCE_EXHAUSTED waits the pushback and retries. From the tap
// (ServerOption, LimitByPeer), grpc-go sends no metadata with it, and
// such a client retries after its own backoff. A call with a bad identity fails with
// InvalidArgument; when the limiter cannot decide, the call fails with
// Unavailable (Internal when the server is misconfigured), never with the
// error's text.
//
// The options are package httplimit's, the HTTP adapters', read for gRPC: a call's path and
// route are its full method ("/package.Service/Method"), its headers its
// incoming metadata, its remote address its peer. So httplimit.ByRoute
// keys by full method, httplimit.ByContextValue by an identity your
// authentication interceptor verified (chain a per-peer limit before it),
// httplimit.SkipPaths skips full methods, and httplimit.WithClientIP with
// TrustedProxies and Header "x-forwarded-for" believes the one metadata
// key that trusted proxies write (AllPeersTrusted: the entry the peer
// appended). httplimit.ByHeader keys by a metadata value your own
// proxy or gateway sets; sent twice, the call fails with InvalidArgument. WithMethodLimiters and WithMethodCosts
// set per-method policies and costs.
//
// For go-grpc-middleware v2's ratelimit interceptors, NewMiddlewareLimiter
// returns a value that satisfies their Limiter interface.
package slidegrpc
