package slidelogtest

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/memstore"
)

// ClientGoneServer starts, on store, an adapter's server on a port of its
// own on 127.0.0.1 (a net/http server, or the framework's own) whose
// route GET "/" calls handler behind the framework's recovery middleware
// (outside) and the adapter's limiter of two requests a minute (made with
// NewLimiter, with opts), keyed by the default, the client's address. The
// route answers the status handler returns; handler receives the context
// the framework gives the route's handlers, which must be done once the
// client has gone. The server is shut down when the test ends.
// ClientGoneServer returns its base URL, such as "http://127.0.0.1:8080".
type ClientGoneServer func(t *testing.T, store slidelog.Store, handler func(ctx context.Context) int, opts ...httplimit.Option) (url string)

// clientGoneWait bounds how long a handler waits for its context to be
// done after its client has gone.
const clientGoneWait = 5 * time.Second

// CheckNoRefundWhenClientGone tests that httplimit.WithRefundOnServerError
// does not refund a request whose client went away while its handler
// ran. A real client sends five requests in turn, and cancels each once
// the handler has started; the handler waits for its context to be done
// and then answers 500, or panics with http.ErrAbortHandler as
// httputil.ReverseProxy does. The first two requests count: the
// handler runs twice, the other three are denied 429, and nothing is
// refunded. A client that stays for its answer has its 500s refunded:
// four requests, four handler runs, four refunds, so the request's
// context is not reported done before the handler's status is known.
func CheckNoRefundWhenClientGone(t *testing.T, newServer ClientGoneServer) {
	t.Helper()
	for _, c := range []struct {
		name  string
		abort bool
	}{{"ClientGone500", false}, {"ClientGoneAbort", true}} {
		t.Run(c.name, func(t *testing.T) {
			checkClientGone(t, newServer, c.abort)
		})
	}
	t.Run("ServerError", func(t *testing.T) {
		store := NewCountingStore(memstore.New())
		t.Cleanup(func() { _ = store.Close() })
		var runs atomic.Int64
		url := newServer(t, store, func(context.Context) int {
			runs.Add(1)
			return http.StatusInternalServerError
		}, httplimit.WithRefundOnServerError())
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
		for i := range 4 {
			resp, err := client.Get(url + "/")
			if err != nil {
				t.Fatalf("request %d: %v", i+1, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusInternalServerError {
				t.Errorf("request %d: got %d, want 500", i+1, resp.StatusCode)
			}
		}
		if n := runs.Load(); n != 4 {
			t.Errorf("handler runs: got %d, want 4", n)
		}
		if n := store.Refunds(); n != 4 {
			t.Errorf("refunds: got %d, want 4 (a client that stays has the server's errors refunded)", n)
		}
	})
}

// checkClientGone is CheckNoRefundWhenClientGone's test of a client that
// goes away; with abort the handler panics with http.ErrAbortHandler
// instead of answering 500.
func checkClientGone(t *testing.T, newServer ClientGoneServer, abort bool) {
	store := NewCountingStore(memstore.New())
	t.Cleanup(func() { _ = store.Close() })
	// Buffered, so that no handler blocks on a check that has stopped.
	started := make(chan struct{}, 5)
	returned := make(chan bool, 5) // whether the handler saw its context done
	handler := func(ctx context.Context) int {
		started <- struct{}{}
		done := true
		select {
		case <-ctx.Done():
		case <-time.After(clientGoneWait):
			done = false
		}
		defer func() { returned <- done }()
		if abort {
			panic(http.ErrAbortHandler)
		}
		return http.StatusInternalServerError
	}
	url := newServer(t, store, handler, httplimit.WithRefundOnServerError())
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
	runs := 0
	for i := range 5 {
		ctx, cancel := context.WithCancel(t.Context())
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		answered := make(chan int, 1)
		go func() {
			resp, err := client.Do(req)
			if err != nil {
				answered <- 0 // canceled: the client is gone
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			answered <- resp.StatusCode
		}()
		select {
		case <-started:
			runs++
			cancel()
			select {
			case done := <-returned:
				if !done {
					t.Errorf("request %d: the handler's context was not done %v after its client went away", i+1, clientGoneWait)
				}
			case <-time.After(2 * clientGoneWait):
				t.Fatalf("request %d: the handler did not return", i+1)
			}
			<-answered
			// The middleware finishes the request as the handler
			// returns; let a refund, if any, land before the next.
			time.Sleep(50 * time.Millisecond)
		case status := <-answered:
			cancel()
			if status != http.StatusTooManyRequests {
				t.Errorf("request %d: got %d without running the handler, want 429", i+1, status)
			}
		}
		cancel()
	}
	client.CloseIdleConnections()
	if runs != 2 {
		t.Errorf("handler runs: got %d, want 2 (the limit: a request whose client went away counts)", runs)
	}
	if n := store.Refunds(); n != 0 {
		t.Errorf("refunds: got %d, want 0 (the client went away before the handler failed)", n)
	}
}
