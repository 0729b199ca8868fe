// Package slidegin rate-limits gin requests with a slidelog.Limiter: a
// strict sliding-window log on Redis, Redis Cluster or memory.
//
// The common case, 100 requests per rolling minute per client IP counted
// in process memory, is one statement:
//
//	r.Use(slidegin.LimitByIP(slidelog.PerMinute(100)))
//
// Middleware takes any limiter (on Redis, shared by every instance) and
// the options of package httplimit, the same in every adapter; only the
// framework-typed WithDeniedHandler and WithErrorHandler are this
// package's:
//
//	r.Use(slidegin.Middleware(perIP, httplimit.WithSkipFunc(httplimit.SkipPaths("/healthz"))))
//	r.Use(auth) // verifies the token, then stores its subject under userKey{}
//	r.Use(slidegin.Middleware(perUser,
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
// routes and groups (r.GET("/search", slidegin.Middleware(searchLimiter),
// h)), key by route with httplimit.ByRoute, or choose a limiter per request
// with httplimit.WithLimiterFunc.
//
// # Client IP and gin's trusted proxies
//
// The middleware never uses c.ClientIP(). By default it keys by the socket
// address (c.Request.RemoteAddr), whatever X-Forwarded-For, X-Real-IP or
// Forwarded headers say, so it is safe even though gin trusts every proxy
// unless SetTrustedProxies is called (CVE-2020-28483).
// Behind a proxy, list it in httplimit.ClientIP's TrustedProxies and
// name the one header it writes in Header (httplimit.WithClientIP): the
// client is then the rightmost forwarded address that is not a trusted
// proxy. Give gin's SetTrustedProxies the same list
// so that c.ClientIP() in your handlers agrees with the limiter; calling
// engine.SetTrustedProxies(nil) is a good default when there is no proxy.
package slidegin
