// Package slideconnect rate-limits connect-go handlers
// (connectrpc.com/connect) with a slidelog.Limiter: a strict
// sliding-window log on Redis, Redis Cluster or memory. One interceptor
// covers the Connect, gRPC and gRPC-Web protocols, unary and streaming:
//
//	l, err := slidelog.New(memstore.New(), slidelog.PerMinute(100))
//	...
//	limit := slideconnect.NewInterceptor(l)
//	path, handler := greetv1connect.NewGreetServiceHandler(greeter,
//		connect.WithInterceptors(limit), connect.WithReadMaxBytes(1<<20))
//	mux.Handle(path, limit.Handler(handler))
//
// Interceptor.Handler decides each call when its headers arrive, before
// its body is read, so a denied call costs the server its headers however
// large its body; the interceptor then sends the admitted call's headers.
// An interceptor alone (LimitByPeer's too) decides after connect-go has
// read the whole request, which it does without limit unless
// connect.WithReadMaxBytes sets one: five denied calls with 50 MiB bodies
// cost the server about 890 MiB of allocations that way, against about
// 5 MiB behind Handler.
//
// Each call (each stream, for streaming procedures) is keyed, by default
// by the peer's address, checked, and given the rate-limit response
// headers: RateLimit-Policy and RateLimit, the same values as slidelog's
// HTTP adapters send. A denied call fails with
// connect.CodeResourceExhausted, a google.rpc.RetryInfo detail giving the
// delay and a google.rpc.QuotaFailure naming the violated policies; the
// error's metadata carries the rate-limit fields, Retry-After and
// grpc-retry-pushback-ms (the delay in milliseconds). A call with a bad
// identity fails with CodeInvalidArgument; when the limiter cannot decide,
// with CodeUnavailable (CodeInternal when the server is misconfigured),
// never with the error's text. These are the codes, details and messages
// of slidegrpc, so gRPC clients see the same answers from either adapter.
//
// The options are package httplimit's, the HTTP adapters', read for
// connect: a call's path and route are its procedure
// ("/package.Service/Method"), its headers the request headers, its remote
// address the peer's. So httplimit.ByRoute keys by procedure,
// httplimit.ByHeader("X-Api-Key") by a request header,
// httplimit.SkipPaths skips procedures, and httplimit.WithClientIP with
// TrustedProxies and Header "X-Forwarded-For" believes the one header
// that trusted proxies write.
package slideconnect
