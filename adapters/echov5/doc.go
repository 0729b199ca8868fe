// Package slideechov5 rate-limits echo v5 (github.com/labstack/echo/v5)
// requests with a slidelog.Limiter: a
// strict sliding-window log on Redis, Redis Cluster or memory.
//
// The common case, 100 requests per rolling minute per client IP counted
// in process memory, is one statement:
//
//	e.Use(slideechov5.LimitByIP(slidelog.PerMinute(100)))
//
// Middleware takes any limiter (on Redis, shared by every instance) and
// the options of package httplimit, the same in every adapter; only the
// framework-typed WithDeniedHandler and WithErrorHandler are this
// package's:
//
//	e.Use(slideechov5.Middleware(perIP, httplimit.WithSkipFunc(httplimit.SkipPaths("/healthz"))))
//	e.Use(auth) // verifies the token, then stores its subject under userKey{}
//	e.Use(slideechov5.Middleware(perUser,
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
// routes and groups (e.GET("/search", h,
// slideechov5.Middleware(searchLimiter))), key by route with httplimit.ByRoute
// (echo's route pattern, c.Path()), or choose a limiter per request with
// httplimit.WithLimiterFunc.
//
// # Client IP and echo's IPExtractor
//
// The middleware never uses c.RealIP(). By default it keys by the socket
// address (c.Request().RemoteAddr), whatever X-Forwarded-For, X-Real-IP or
// Forwarded headers say, as echo v5 without an IPExtractor does.
// Behind a proxy, list it in httplimit.ClientIP's TrustedProxies and
// name the one header it writes in Header (httplimit.WithClientIP): the
// client is then the rightmost forwarded address that is not a trusted
// proxy. Set e.IPExtractor to
// echo.ExtractIPFromXFFHeader(echo.TrustIPRange(...)) with the same ranges
// so that c.RealIP() in your handlers agrees with the limiter.
//
// The options and behaviour are those of the echo v4 adapter
// (github.com/slidelog/slidelog/adapters/echo); only the framework types
// differ: handlers take *echo.Context.
package slideechov5
