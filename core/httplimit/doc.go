// Package httplimit is the HTTP side of slidelog: how a request becomes
// an identity, a cost and a decision, and how the answer is written. The
// framework adapters (slidechi, slidegin, slideecho, slideechov5,
// slidefiber, and slidegrpc for gRPC) are thin layers over it, and all
// take its Options, so an option means the same thing everywhere:
//
//	r.Use(slidechi.Middleware(perIP, httplimit.WithSkipFunc(httplimit.SkipPaths("/healthz"))))
//	r.Use(auth) // verifies the token, then stores its subject under userKey{}
//	r.Use(slidechi.Middleware(perUser, httplimit.WithKeyFunc(httplimit.ByContextValue(userKey{}))))
//
// For the common case, each HTTP adapter has LimitByIP, which limits by
// client IP in process memory:
//
//	r.Use(slidechi.LimitByIP(slidelog.PerMinute(100)))
//
// # Identity
//
// Each request is limited by the identity its KeyFunc returns; the
// default is ByClientIP. Key by what the client cannot choose: its
// address, and identities your own authentication verified
// (ByContextValue), with a per-IP limit in front of the authentication,
// since every identity a client can mint is a fresh budget. FirstOf
// combines them, such as an account for signed-in users and the address
// for everyone else:
//
//	httplimit.WithKeyFunc(httplimit.FirstOf(httplimit.ByContextValue(userKey), httplimit.ByClientIP()))
//
// ByHeader is for a value your own proxy or gateway sets (a consumer id
// written after checking the API key); a header sent twice or as a list
// is refused (ErrDuplicateHeader), since a proxy that adds the field puts
// its value after the client's. ByRoute and Composite key per route.
//
// A request without a valid identity is answered 400 (431 when it is too
// long) before any store call.
//
// # Client IP
//
// The client is the socket peer, whatever headers it sends. Behind a
// proxy, one option says who the client is, with every setting that
// belongs to it (ClientIP documents them all):
//
//	httplimit.WithClientIP(httplimit.ClientIP{
//		TrustedProxies: []string{"10.0.0.0/8"}, // your proxies, nothing wider
//		Header:         "X-Forwarded-For",      // the one header they write
//	})
//
// The client is then the rightmost address of that header that is not a
// trusted proxy. AllPeersTrusted makes every socket peer a trusted proxy,
// and only the peer: the entry it appended is the client.
// UnixSocketProxy says a Unix-socket peer is the proxy. IPv6 clients are
// grouped by /64 (IPv6Prefix), since one host usually owns a whole /64,
// and a /48 that has 64 active /64s with identities of their own shares
// one identity for its further ones, a /32 past 64 such /48s likewise:
// at most MaxIPv6Identities IPv6 identities in all, so minted prefixes
// cannot fill the store and lock new clients out.
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
// WithErrorHandler replace these answers. What the server's own setup
// gets wrong at run time (a key, skip, cost or limiter function that
// panics, a key function that fails, a limiter function that chooses no
// limiter where the middleware has none) is answered 500 or 503 and
// logged to the limiter's logger (slog.Default() when there is none), at
// most once every 10 seconds per kind (Engine.Check).
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
// An adapter presents its framework's request as an Incoming, calls
// Engine.Check, sets the response header fields (Decision.SetHeader on a
// net/http header), and then either calls the handler and
// Decision.Finish with its status (Decision.Serve does both, and finishes
// a handler that panics as a 500 without recovering the panic;
// slidelogtest.CheckPanicRefunds tests it, and
// slidelogtest.CheckNoRefundWhenClientGone that a request whose client
// went away is not refunded), or answers the denial or error.
package httplimit
