package slideechov5_test

import (
	"net/http"
	"testing"

	"github.com/labstack/echo/v5"
	slideechov5 "github.com/slidelog/slidelog/adapters/echov5"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/slidelogtest"
)

// statusError is an application error that carries its status, as echo
// v5's HTTPStatusCoder lets any error do.
type statusError int

func (e statusError) Error() string   { return http.StatusText(int(e)) }
func (e statusError) StatusCode() int { return int(e) }

// An error that names its own status through echo.HTTPStatusCoder (echo
// v5) counts with that status: refunded when 5xx, kept otherwise; a
// response the handler already wrote keeps its status whatever it returns.
func TestRefundByStatusCoder(t *testing.T) {
	mem := memstore.New()
	t.Cleanup(func() { _ = mem.Close() })
	store := slidelogtest.NewCountingStore(mem)
	l := slidelogtest.NewLimiter(t, store, slidelog.PerMinute(2))
	r := echo.New()
	r.Use(slideechov5.Middleware(l, httplimit.WithRefundOnServerError()))
	r.GET("/unavailable", func(*echo.Context) error { return statusError(http.StatusServiceUnavailable) })
	r.GET("/conflict", func(*echo.Context) error { return statusError(http.StatusConflict) })
	r.GET("/written", func(c *echo.Context) error {
		_ = c.String(http.StatusOK, "ok")
		return statusError(http.StatusInternalServerError) // too late: 200 was sent
	})
	for _, tt := range []struct {
		give string
		want int
	}{
		{"/unavailable", 503}, {"/unavailable", 503}, {"/conflict", 409}, {"/written", 200}, {"/conflict", 429},
	} {
		if got := serve(r, tt.give, "192.0.2.1:1").Code; got != tt.want {
			t.Errorf("GET %s: got %d, want %d", tt.give, got, tt.want)
		}
	}
	if n := store.Refunds(); n != 2 {
		t.Errorf("refunds: got %d, want 2", n)
	}
}
