package slidefiber

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"
)

// Test serves req with app, in process, and returns the response, as
// app.Test does, but from the client address in req.RemoteAddr. app.Test
// serves every request from 0.0.0.0, so the middleware's default key
// (the socket peer) gives all of a test's clients one budget; with Test,
// requests given different addresses by slidelogtest.SetClientIP (or
// httptest.NewRequest's 192.0.2.1:1234) use different budgets:
//
//	req := slidelogtest.SetClientIP(httptest.NewRequest(http.MethodGet, "/hello", nil), "203.0.113.7")
//	resp, err := slidefiber.Test(app, req)
//
// req.RemoteAddr must be "host:port" with an IP address host, or empty
// (then the peer is 0.0.0.0:0, as with app.Test). Test runs the handlers
// on the calling goroutine, with no timeout; it is meant for tests.
func Test(app *fiber.App, req *http.Request) (*http.Response, error) {
	var peer net.Addr
	if req.RemoteAddr != "" {
		addr, err := net.ResolveTCPAddr("tcp", req.RemoteAddr)
		if err != nil || addr.IP == nil {
			return nil, fmt.Errorf("slidefiber: Test: remote address %q, want host:port with an IP address", req.RemoteAddr)
		}
		peer = addr
	}
	if req.Body != nil && req.Body != http.NoBody && req.Header.Get(fiber.HeaderContentLength) == "" {
		req.Header.Set(fiber.HeaderContentLength, strconv.FormatInt(req.ContentLength, 10))
	}
	dump, err := httputil.DumpRequest(req, true)
	if err != nil {
		return nil, fmt.Errorf("slidefiber: Test: %w", err)
	}
	var in fasthttp.Request
	if err := in.Read(bufio.NewReader(bytes.NewReader(dump))); err != nil {
		return nil, fmt.Errorf("slidefiber: Test: %w", err)
	}
	var ctx fasthttp.RequestCtx
	ctx.Init(&in, peer, nil)
	app.Handler()(&ctx)
	var out bytes.Buffer
	if _, err := ctx.Response.WriteTo(&out); err != nil {
		return nil, fmt.Errorf("slidefiber: Test: %w", err)
	}
	return http.ReadResponse(bufio.NewReader(&out), req)
}
