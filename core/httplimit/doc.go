// Package httplimit is the HTTP side of slidelog: how a request becomes
// an identity, a cost and a decision, and how the answer is written. The
// framework adapters (slidechi, slidegin, slideecho, slideechov5,
// slidefiber, and slidegrpc for gRPC) are thin layers over it, and all
// take its Options, so an option means the same thing everywhere:
//
//	r.Use(slidechi.Middleware(l,
//		httplimit.WithKeyFunc(httplimit.ByHeader("X-Api-Key")),
//		httplimit.WithSkipFunc(httplimit.SkipPaths("/healthz")),
//	))
//
// For the common case, each HTTP adapter has LimitByIP, which limits by
// client IP in process memory:
//
//	r.Use(slidechi.LimitByIP(slidelog.PerMinute(100)))
//
// # Identity
//
// Each request is limited by the identity its KeyFunc returns; the
// default is ByClientIP. ByHeader, ByContextValue, ByRoute, Composite and
// FirstOf build others, such as an account for signed-in users and the
// address for everyone else:
//
//	httplimit.WithKeyFunc(httplimit.FirstOf(httplimit.ByContextValue(userKey), httplimit.ByClientIP()))
//
// A request without a valid identity is answered 400 (431 when it is too
// long) before any store call.
//
// # Client IP
//
// The client is the socket peer, whatever headers it sends. Behind a
// proxy, list the proxy with WithTrustedProxies and name the one header
// it writes with WithClientIPHeader: the client is then the rightmost
// address of that header that is not a trusted proxy. IPv6 clients are
// grouped by /64 (WithIPv6Prefix), since one host usually owns a whole
// /64.
//
// # Answers
//
// An admitted request goes on to the handler with rate-limit header
// fields: by default RateLimit-Policy and RateLimit of the IETF draft
// (WithHeaders chooses the legacy X-RateLimit-* fields or none). A denied
// request is answered 429 with Retry-After and an RFC 9457 problem body
// (DeniedProblem). When the limiter cannot decide (its store is down and
// its failure mode says so), the request is answered 503 (ErrorProblem),
// never with the error's text. The adapters' WithDeniedHandler and
// WithErrorHandler replace these answers.
//
// # More options
//
// WithSkipFunc lets requests bypass the limiter; WithCost and
// WithCostFunc make some requests cost more; WithLimiterFunc chooses the
// limiter, and so the policies, per request; WithShadowMode decides but
// never blocks, to roll out a limit safely; WithRefundOnServerError does
// not count requests the server failed.
//
// # Writing an adapter
//
// An adapter presents its framework's request as a Source, calls
// Engine.Check, sets Decision.Header, and then either calls the handler
// and Decision.Finish with its status, or answers the denial or error.
package httplimit
