// Command gin serves GET /hello limited per client IP with slidegin, and
// GET /healthz and GET /metrics unlimited.
//
//	go run ./gin -addr :8080 -limit 10 -window 1m
//
// SLIDELOG_REDIS_ADDRS selects Redis (one address) or a Redis Cluster
// (several, comma-separated); unset, the memory store.
package main

import (
	"net/http"

	"github.com/gin-gonic/gin"
	slidegin "github.com/slidelog/slidelog/adapters/gin"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/examples/internal/setup"
)

func main() {
	app := setup.Start("gin")

	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	_ = r.SetTrustedProxies(nil) // no proxy: c.ClientIP() is the socket address, as for the limiter
	r.Use(slidegin.Middleware(app.Limiter, httplimit.WithSkipFunc(setup.Skip)))
	r.GET(setup.PathHello, func(c *gin.Context) { c.String(http.StatusOK, "hello\n") })
	r.GET(setup.PathHealthz, func(c *gin.Context) { c.String(http.StatusOK, "ok\n") })
	r.GET(setup.PathMetrics, gin.WrapH(app.Metrics))

	app.ServeHTTP(r)
}
