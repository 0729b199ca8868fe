// Package slidechi rate-limits chi (and any net/http) requests with a
// slidelog.Limiter: a strict sliding-window log on Redis, Redis Cluster or
// memory.
//
// The common case, 100 requests per rolling minute per client IP counted
// in process memory, is one statement:
//
//	r.Use(slidechi.LimitByIP(slidelog.PerMinute(100)))
//
// Middleware takes any limiter (on Redis, shared by every instance) and
// the options of package httplimit, the same in every adapter; only the
// framework-typed WithDeniedHandler and WithErrorHandler are this
// package's:
//
//	r.Use(slidechi.Middleware(perIP, httplimit.WithSkipFunc(httplimit.SkipPaths("/healthz"))))
//	r.Use(auth) // verifies the token, then stores its subject under userKey{}
//	r.Use(slidechi.Middleware(perUser,
//		httplimit.WithKeyFunc(httplimit.ByContextValue(userKey{}))))
//
// Key by client IP (the default, httplimit.ByClientIP) and by identities
// your own authentication verified (httplimit.ByContextValue), with the
// per-IP limit in front of the authentication. httplimit.ByHeader is for
// a value your own proxy or gateway sets, never one the client picks:
// each new value would be a new budget.
//
// Middleware returns func(http.Handler) http.Handler, so it also wraps a
// plain http.ServeMux or any handler.
//
// Each request is keyed (by default by client IP), checked, and answered
// with the rate-limit header fields (IETF RateLimit-Policy and RateLimit by
// default). A denied request gets 429 with Retry-After and an
// application/problem+json body; a request with a bad identity gets 400 or
// 431 before any store call; when the limiter cannot decide, the error
// handler answers (503 by default, never with the error's text).
//
// Per-route limits: pass different limiters to Middleware on different
// routes and groups (r.With(slidechi.Middleware(searchLimiter)).Get(...),
// r.Group, r.Route), key by route with httplimit.ByRoute (chi's route
// pattern, such as "/users/{id}", found even for middleware added with
// r.Use), or choose a limiter per request with httplimit.WithLimiterFunc.
//
// # Client IP and chi's RealIP
//
// The middleware reads r.RemoteAddr, the socket address, and by default
// ignores X-Forwarded-For, X-Real-IP and Forwarded. Do not put chi's
// middleware.RealIP in front of it unless every request comes through a
// proxy that overwrites those headers: RealIP copies a client-supplied
// header into r.RemoteAddr. Behind a proxy, list it in httplimit.ClientIP's
// TrustedProxies and name the one header it writes in Header
// (httplimit.WithClientIP) instead: the client is then the rightmost
// forwarded address that is not a trusted proxy. AllPeersTrusted trusts
// the socket peer only (the entry it appended is the client), and
// UnixSocketProxy a proxy on a Unix socket.
package slidechi
