package slidelogtest

import (
	"net/http"
	"testing"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/memstore"
)

// PanicHandler builds, on store, an adapter's route whose handler panics,
// behind the framework's recovery middleware (outside) and the adapter's
// limiter of two requests a minute (made with NewLimiter, with opts), and
// returns a function that sends it one request, always from the same
// client, and returns the status answered.
type PanicHandler func(t *testing.T, store slidelog.Store, opts ...httplimit.Option) (serve func() int)

// CheckPanicRefunds tests an adapter's refunds of a handler that panics.
// With httplimit.WithRefundOnServerError the panic is a server error like
// a 500 the handler writes: each of four requests is answered 500 by the
// recovery middleware and refunded, so none is denied. Without it the
// panics count: 500, 500, then 429, and nothing is refunded.
func CheckPanicRefunds(t *testing.T, newHandler PanicHandler) {
	t.Helper()
	for _, c := range []struct {
		name    string
		opts    []httplimit.Option
		want    []int
		refunds int
	}{
		{"WithRefundOnServerError", []httplimit.Option{httplimit.WithRefundOnServerError()}, []int{500, 500, 500, 500}, 4},
		{"WithoutRefunds", nil, []int{500, 500, http.StatusTooManyRequests, http.StatusTooManyRequests}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := NewCountingStore(memstore.New())
			t.Cleanup(func() { _ = store.Close() })
			serve := newHandler(t, store, c.opts...)
			for i, want := range c.want {
				if got := serve(); got != want {
					t.Errorf("request %d: got %d, want %d", i+1, got, want)
				}
			}
			if n := store.Refunds(); n != c.refunds {
				t.Errorf("refunds: got %d, want %d", n, c.refunds)
			}
		})
	}
}
