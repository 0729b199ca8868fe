// Package slidefiber rate-limits fiber v2 requests with a slidelog.Limiter:
// a strict sliding-window log on Redis, Redis Cluster or memory.
//
// The common case, 100 requests per rolling minute per client IP counted
// in process memory, is one statement:
//
//	app.Use(slidefiber.LimitByIP(slidelog.PerMinute(100)))
//
// Middleware takes any limiter (on Redis, shared by every instance) and
// the options of package httplimit, the same in every adapter; only the
// framework-typed WithDeniedHandler and WithErrorHandler are this
// package's:
//
//	app.Use(slidefiber.Middleware(perIP, httplimit.WithSkipFunc(httplimit.SkipPaths("/healthz"))))
//	app.Use(auth) // verifies the token, then stores its subject under userKey{}
//	app.Use(slidefiber.Middleware(perUser,
//		httplimit.WithKeyFunc(httplimit.ByContextValue(userKey{}))))
//
// Key by client IP (the default, httplimit.ByClientIP) and by identities
// your own authentication verified (httplimit.ByContextValue), with the
// per-IP limit in front of the authentication. httplimit.ByHeader is for
// a value your own proxy or gateway sets, never one the client picks:
// each new value would be a new budget.
//
// Each request is keyed (by default by client IP), checked, and answered
// with the rate-limit header fields (IETF RateLimit-Policy and RateLimit by
// default). A denied request gets 429 with Retry-After and an
// application/problem+json body; a request with a bad identity gets 400 or
// 431 before any store call; when the limiter cannot decide, the error
// handler answers (503 by default, never with the error's text).
//
// Per-route limits: pass different limiters to Middleware on different
// routes and groups (app.Get("/search",
// slidefiber.Middleware(searchLimiter), h)), or choose a limiter per
// request with httplimit.WithLimiterFunc. httplimit.ByRoute sees the path the
// middleware was registered with: register it on the route (or the group)
// to key by route pattern; under app.Use every request has the Use prefix
// as its route, because fiber has not matched the final route yet.
//
// # Client IP and fiber's ProxyHeader
//
// The middleware never uses c.IP(). It keys by the socket address
// (c.Context().RemoteAddr()) and by default ignores X-Forwarded-For,
// X-Real-IP and Forwarded, so it is safe even when fiber.Config.ProxyHeader
// is set without EnableTrustedProxyCheck (then c.IP() returns the raw,
// client-chosen header: GHSA-3q5p-3558-364f).
// Behind a proxy, list it in httplimit.ClientIP's TrustedProxies and
// name the one header it writes in Header (httplimit.WithClientIP): the
// client is then the rightmost forwarded address that is not a trusted
// proxy. If you also want c.IP() in your handlers to
// agree, set ProxyHeader together with EnableTrustedProxyCheck and the same
// TrustedProxies.
//
// # Prefork
//
// With fiber.Config.Prefork every child process builds its own
// middleware, so a memory store (LimitByIP's too) is per child: n
// children admit up to n times the limit. Use a Redis store shared by the
// children.
package slidefiber
