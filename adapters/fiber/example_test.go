package slidefiber_test

import (
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/gofiber/fiber/v2"
	slidefiber "github.com/slidelog/slidelog/adapters/fiber"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/memstore"
)

// Limit GET /hello to 2 requests per minute per client IP; /healthz is
// never limited.
func Example() {
	l, err := slidelog.New(memstore.New(), slidelog.Policy{Name: "hello", Limit: 2, Window: time.Minute})
	if err != nil {
		panic(err)
	}
	defer l.Close()

	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Use(slidefiber.Middleware(l, httplimit.WithSkipFunc(httplimit.SkipPaths("/healthz"))))
	app.Get("/hello", func(c *fiber.Ctx) error { return c.SendString("hello") })
	app.Get("/healthz", func(c *fiber.Ctx) error { return c.SendStatus(fiber.StatusNoContent) })

	for range 3 {
		resp, err := app.Test(httptest.NewRequest(fiber.MethodGet, "/hello", nil))
		if err != nil {
			panic(err)
		}
		_ = resp.Body.Close()
		fmt.Printf("%d RateLimit: %s Retry-After: %q\n", resp.StatusCode, resp.Header.Get("RateLimit"), resp.Header.Get("Retry-After"))
	}
	// Output:
	// 200 RateLimit: "hello";r=1;t=60 Retry-After: ""
	// 200 RateLimit: "hello";r=0;t=60 Retry-After: ""
	// 429 RateLimit: "hello";r=0;t=60 Retry-After: "60"
}

// A heavy route costs 5 units of the same per-client budget, with the
// middleware registered on the route.
func Example_cost() {
	l, _ := slidelog.New(memstore.New(), slidelog.Policy{Name: "units", Limit: 10, Window: time.Minute})
	defer l.Close()

	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Get("/export", slidefiber.Middleware(l, httplimit.WithCost(5)), func(c *fiber.Ctx) error { return c.SendString("csv") })

	for range 3 {
		resp, _ := app.Test(httptest.NewRequest(fiber.MethodGet, "/export", nil))
		_ = resp.Body.Close()
		fmt.Println(resp.StatusCode, resp.Header.Get("RateLimit"))
	}
	// Output:
	// 200 "units";r=5;t=60
	// 200 "units";r=0;t=60
	// 429 "units";r=0;t=60
}
