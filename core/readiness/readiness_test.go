package readiness_test

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/readiness"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func status(t *testing.T, h http.Handler) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	return rec.Code, rec.Body.String()
}

// The events a limiter reports decide readiness, and a failover counts
// for the hold time only.
func TestReadinessFollowsEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ready := readiness.New(readiness.WithHold(5 * time.Second))
		lo, err := ready.Bind("api", nil)
		require.NoError(t, err)
		type step struct {
			name  string
			do    func()
			after time.Duration
			want  int
		}
		for _, s := range []step{
			{"no decision yet", func() {}, 0, http.StatusOK},
			{"a store decision", func() { lo.Decision(slidelog.Source("redis"), true) }, 0, http.StatusOK},
			{"a failover", func() { lo.Failover("error", slidelog.FailFallback); lo.Decision(slidelog.SourceFallback, true) }, time.Millisecond, http.StatusServiceUnavailable},
			{"a store decision again", func() { lo.Decision(slidelog.Source("redis"), false) }, time.Millisecond, http.StatusOK},
			{"a breaker opens", func() {
				lo.BreakerState("10.0.0.1:6379", slidelog.BreakerOpen)
				lo.Failover("breaker_open", slidelog.FailFallback)
			}, time.Millisecond, http.StatusServiceUnavailable},
			{"other nodes still answer", func() { lo.Decision(slidelog.Source("redis"), true) }, time.Millisecond, http.StatusServiceUnavailable},
			{"the hold passes without traffic", func() {}, 5 * time.Second, http.StatusOK},
			{"the breaker closes", func() { lo.BreakerState("10.0.0.1:6379", slidelog.BreakerClosed) }, 0, http.StatusOK},
			{"fail open", func() { lo.Failover("stalled", slidelog.FailOpen); lo.Decision(slidelog.SourceFailOpen, true) }, time.Millisecond, http.StatusServiceUnavailable},
			{"the deny cache is not the store", func() { lo.Decision(slidelog.SourceDenyCache, false) }, time.Millisecond, http.StatusServiceUnavailable},
		} {
			s.do()
			time.Sleep(s.after)
			code, body := status(t, ready)
			assert.Equal(t, s.want, code, "%s: got %d %q, want %d", s.name, code, body, s.want)
			if s.want == http.StatusOK {
				assert.NoError(t, ready.Ready(), s.name)
				continue
			}
			assert.True(t, errors.Is(ready.Ready(), readiness.ErrNotReady), s.name)
			assert.Contains(t, body, `"api"`, s.name)
			assert.NotContains(t, body, "10.0.0.1", "%s: the body names a store node", s.name)
		}
		lo.Unbind()
		code, _ := status(t, ready)
		assert.Equal(t, http.StatusOK, code, "after Unbind")
	})
}

// A limiter on a Redis that is down is not ready after its first
// decision; one on its memory store is.
func TestReadinessWithLimiters(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := ln.Addr().String()
	require.NoError(t, ln.Close())
	client := redis.NewClient(redisstore.ClientOptions(dead))
	t.Cleanup(func() { _ = client.Close() })
	down, err := redisstore.New(client, redisstore.WithStartUnreachable(), redisstore.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = down.Close() })
	mem := memstore.New()
	t.Cleanup(func() { _ = mem.Close() })

	ready := readiness.New()
	lm, err := slidelog.New(mem, slidelog.PerMinute(1), slidelog.WithName("mem"), slidelog.WithObserver(ready))
	require.NoError(t, err)
	t.Cleanup(func() { _ = lm.Close() })
	lr, err := slidelog.New(down, slidelog.PerMinute(1), slidelog.WithName("redis"), slidelog.WithObserver(ready))
	require.NoError(t, err)

	for range 2 {
		_, err := lm.Allow(t.Context(), "k")
		require.NoError(t, err)
	}
	code, body := status(t, ready)
	assert.Equal(t, http.StatusOK, code, body)

	res, err := lr.Allow(t.Context(), "k")
	require.NoError(t, err)
	require.Equal(t, slidelog.SourceFallback, res.Source)
	code, body = status(t, ready)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, `limiter "redis"`)
	assert.False(t, strings.Contains(body, `"mem"`), "got %q: the memory limiter is ready", body)
	assert.NotContains(t, body, dead)

	require.NoError(t, lr.Close())
	code, body = status(t, ready)
	assert.Equal(t, http.StatusOK, code, "after the failing limiter closed: %s", body)
}
