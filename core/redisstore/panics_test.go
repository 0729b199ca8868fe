package redisstore_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/internal/logbuf"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
)

// panicHook is a go-redis hook of the application's that panics in every
// command and pipeline while on is set.
type panicHook struct{ on *atomic.Bool }

func (h panicHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h panicHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.on.Load() {
			panic("hook boom")
		}
		return next(ctx, cmd)
	}
}
func (h panicHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.on.Load() {
			panic("hook boom")
		}
		return next(ctx, cmds)
	}
}

// requireOnePanicRecord checks that buf holds one record of a recovered
// panic, at ERROR, recovered in in, with the panic's value and a stack
// naming wantFunc.
func requireOnePanicRecord(t *testing.T, buf *logbuf.Buffer, in, value, wantFunc string) {
	t.Helper()
	// A reading of the canaries through the same client recovers its
	// panics at a site of its own ("canary"), with a record of its own.
	var lines []string
	for _, l := range buf.Lines("recovered a panic") {
		if strings.Contains(l, "in="+in+" ") {
			lines = append(lines, l)
		}
	}
	require.Len(t, lines, 1, "got %d records of recovered panics in %s, want 1 (at most one per interval):\n%s", len(lines), in, buf.String())
	for _, want := range []string{"level=ERROR", "in=" + in, value, "stack=", wantFunc} {
		assert.Contains(t, lines[0], want, "the record of a recovered panic")
	}
}

// A panic of the Redis client's (here a hook of the application's) in a
// round trip is recovered wherever the store sent it: on a sender
// goroutine of the store's own, where it ended the process, or in the
// caller's goroutine, which sends the other callers' calls of its batch
// too. The caller of every call of the round trip receives the panic,
// on its own goroutine; the panic is logged at ERROR once per interval
// where it was recovered; and once the client stops
// panicking, the node's senders are all there: decisions go on.
func TestClientPanicInRoundTripIsRecovered(t *testing.T) {
	for _, tt := range []struct {
		name string
		// early: the client has a connection before New, which the store
		// cannot break off: every call goes to a sender goroutine.
		early bool
	}{
		{"sender goroutines", true},
		{"callers' goroutines", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			client := redis.NewClient(redisstore.ClientOptions(redistest.RedisClient(t).Options().Addr))
			t.Cleanup(func() { _ = client.Close() })
			if tt.early {
				require.NoError(t, client.Ping(t.Context()).Err())
			}
			var buf logbuf.Buffer
			s := newRedisStore(t, client, redisstore.WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
			var on atomic.Bool
			client.AddHook(panicHook{&on})
			p := slidelog.Policy{Limit: 1_000_000, Window: time.Minute}
			take := func(i int) (panicked any, err error) {
				defer func() { panicked = recover() }()
				_, err = s.Take(context.Background(), slidelog.Request{Namespace: "panic", Key: "k" + string(rune('a'+i%16)),
					ID: uint64(i + 1), Cost: 1, Policies: []slidelog.Policy{p}})
				return nil, err
			}
			on.Store(true)
			var wg sync.WaitGroup
			var failed atomic.Int64
			for g := range 32 {
				wg.Go(func() {
					for i := range 10 {
						if p, err := take(g*10 + i); p != "hook boom" {
							t.Errorf("take with a panicking client: got %v, panic %v, want the client's panic on the caller's goroutine", err, p)
						}
						failed.Add(1)
					}
				})
			}
			wg.Wait()
			require.Equal(t, int64(320), failed.Load())
			on.Store(false)
			for i := range 320 {
				p, err := take(1000 + i)
				require.Nil(t, p, "take %d after the client stopped panicking", i)
				require.NoError(t, err, "take %d after the client stopped panicking", i)
			}
			requireOnePanicRecord(t, &buf, "round_trip", `panic="hook boom"`, "panicHook.ProcessHook")
		})
	}
}

// panicConn is a connection of the application's dialer whose
// SetDeadline panics, while on is set, when given a deadline long past:
// the store's, breaking the connection off.
type panicConn struct {
	net.Conn
	on *atomic.Bool
}

func (c panicConn) SetDeadline(t time.Time) error {
	if c.on.Load() && !t.IsZero() && t.Year() < 2000 {
		panic("deadline boom")
	}
	return c.Conn.SetDeadline(t)
}

// A stalled node's connections are broken off on the store's monitor
// goroutine, by setting their deadlines in the past: a connection of the
// application's dialer that panics there is recovered and logged (it
// ended the process), and the calls waiting on the node still end with
// ErrStalled.
func TestConnectionPanicBreakingOffIsRecovered(t *testing.T) {
	srv := redistest.StartServer(t, redistest.ServerConfig{})
	var on atomic.Bool
	opts := redisstore.ClientOptions(srv.Addr)
	opts.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		conn, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return panicConn{conn, &on}, nil
	}
	client := redis.NewClient(opts)
	t.Cleanup(func() { _ = client.Close() })
	var buf logbuf.Buffer
	s := newRedisStore(t, client, redisstore.WithLogger(slog.New(slog.NewTextHandler(&buf, nil))),
		redisstore.WithStallTimeout(100*time.Millisecond))
	p := slidelog.Policy{Limit: 100, Window: time.Minute}
	req := slidelog.Request{Namespace: "panic", Key: "conn", ID: 1, Cost: 1, Policies: []slidelog.Policy{p}}
	_, err := s.Take(t.Context(), req)
	require.NoError(t, err)
	on.Store(true)
	require.NoError(t, srv.Signal(syscall.SIGSTOP)) // the node answers nothing
	defer func() { _ = srv.Signal(syscall.SIGCONT) }()
	req.ID = 2
	_, err = s.Take(t.Context(), req)
	require.ErrorIs(t, err, slidelog.ErrStalled)
	on.Store(false)
	requireOnePanicRecord(t, &buf, "connection", `panic="deadline boom"`, "panicConn.SetDeadline")
}

// WriteBack writes the kept admissions on goroutines of the store's own:
// a panic there (here WithClock's clock, which Record reads) is recovered
// and logged (it ended the process), and the admission is left for a
// later attempt, as after a failed write.
func TestWriteBackPanicIsRecovered(t *testing.T) {
	var buf logbuf.Buffer
	var on atomic.Bool
	var reads atomic.Int64
	clock := func() time.Time {
		// The first read is WriteBack's own, on its caller's goroutine
		// (where a panic would reach the caller); the others are its
		// writers'.
		if on.Load() && reads.Add(1) > 1 {
			panic("clock boom")
		}
		return time.Now()
	}
	s := newRedisStore(t, redistest.RedisClient(t), redisstore.WithClock(clock),
		redisstore.WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	p := slidelog.Policy{Limit: 100, Window: time.Minute}
	for i := range 5 {
		s.Keep(slidelog.Request{Namespace: "panic", Key: "wb", ID: uint64(i + 1), Cost: 1, Policies: []slidelog.Policy{p}}, time.Now())
	}
	on.Store(true)
	written, left := s.WriteBack(t.Context())
	assert.Equal(t, 0, written)
	assert.Equal(t, 5, left)
	assert.Equal(t, 5, s.Unwritten(), "the admissions stay for a later attempt")
	on.Store(false)
	requireOnePanicRecord(t, &buf, "write_back", `panic="clock boom"`, "TestWriteBackPanicIsRecovered.func1")
	written, left = s.WriteBack(t.Context())
	assert.Equal(t, 5, written)
	assert.Equal(t, 0, left)
}

// A panic of the Redis client's in a round trip is no answer of the
// store's, and no fault of the node: it reaches the caller of each call
// the round trip carried, on the caller's own goroutine, where the
// limiter gives back its breaker's permission and httplimit answers 500.
// It never goes to the failure mode, so a limiter that fails open admits
// nothing for it, and a breaker does not open on it: once the client
// stops panicking, the store decides again at once.
func TestClientPanicReachesTheCaller(t *testing.T) {
	client := redis.NewClient(redisstore.ClientOptions(redistest.RedisClient(t).Options().Addr))
	t.Cleanup(func() { _ = client.Close() })
	var buf logbuf.Buffer
	s := newRedisStore(t, client, redisstore.WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	var on atomic.Bool
	client.AddHook(panicHook{&on})
	l, err := slidelog.New(s, slidelog.Policy{Limit: 1_000_000, Window: time.Minute},
		slidelog.WithName("client-panic"), slidelog.WithFailureMode(slidelog.FailOpen))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	allow := func(key string) (p any, res slidelog.Result, err error) {
		defer func() { p = recover() }()
		res, err = l.Allow(t.Context(), key)
		return nil, res, err
	}
	on.Store(true)
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 10 { // more than the breaker's 5 failures in a row
				p, res, err := allow("k" + string(rune('a'+(g*10+i)%16)))
				if p == nil {
					t.Errorf("Allow with a panicking client: got %+v, %v, want the client's panic", res, err)
				} else if p != "hook boom" {
					t.Errorf("Allow with a panicking client: got panic %v, want hook boom", p)
				}
			}
		})
	}
	wg.Wait()
	on.Store(false)
	res, err := l.Allow(t.Context(), "after")
	require.NoError(t, err)
	assert.True(t, res.Allowed, "after the client stopped panicking")
	assert.Equal(t, slidelog.Source("redis"), res.Source, "after the client stopped panicking: the store decides, the breaker is closed")
}

// slowHook holds each command and pipeline for delay, counting those
// under way.
type slowHook struct {
	delay  time.Duration
	inside *atomic.Int64
}

func (h slowHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h slowHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.inside.Add(1)
		defer h.inside.Add(-1)
		time.Sleep(h.delay)
		return next(ctx, cmd)
	}
}
func (h slowHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.inside.Add(1)
		defer h.inside.Add(-1)
		time.Sleep(h.delay)
		return next(ctx, cmds)
	}
}

// A clock that panics in WriteBack's own loop, on its caller's goroutine
// (a limiter's write-back, which recovers it), after WriteBack started
// writers for an earlier key: the panic goes on only once those writers
// are done, so that none outlives the call, nor the Close of the
// limiter that waits for it.
func TestWriteBackClockPanicWaitsForWriters(t *testing.T) {
	client := redis.NewClient(redisstore.ClientOptions(redistest.RedisClient(t).Options().Addr))
	t.Cleanup(func() { _ = client.Close() })
	var inside atomic.Int64
	var loopReads atomic.Int64
	clock := func() time.Time {
		// WriteBack's loop reads the clock once per key; its writers
		// read it in Record, on goroutines of their own.
		if strings.Contains(string(debug.Stack()), "(*Store).WriteBack(") && loopReads.Add(1) > 1 {
			panic("clock boom")
		}
		return time.Now()
	}
	s := newRedisStore(t, client, redisstore.WithClock(clock),
		redisstore.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	p := slidelog.Policy{Limit: 100, Window: time.Minute}
	for i, key := range []string{"wb1", "wb2"} {
		s.Keep(slidelog.Request{Namespace: "panic", Key: key, ID: uint64(i + 1), Cost: 1, Policies: []slidelog.Policy{p}}, time.Now())
	}
	client.AddHook(slowHook{delay: 200 * time.Millisecond, inside: &inside})
	func() {
		defer func() {
			require.Equal(t, "clock boom", recover(), "WriteBack with a clock that panics in its loop")
		}()
		s.WriteBack(t.Context())
	}()
	assert.Zero(t, inside.Load(), "writers of WriteBack still running once its panic went on")
}

// panickingHandler is an application's slog handler that panics on the
// records whose message holds on, and keeps the others.
type panickingHandler struct {
	on     string
	panics atomic.Int64
	captured
}

func (h *panickingHandler) Handle(ctx context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.on) {
		h.panics.Add(1)
		panic("handler boom")
	}
	return h.captured.Handle(ctx, r)
}
func (h *panickingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *panickingHandler) WithGroup(string) slog.Handler      { return h }

// A panic of the application's logger on the monitor's goroutine, as it
// logs a stalled node, is recovered: the process goes on, the stalled
// calls still end with ErrStalled, and the monitor judges the next stall
// too (before, the panic ended the process).
func TestLoggerPanicOnMonitorIsRecovered(t *testing.T) {
	srv := redistest.StartServer(t, redistest.ServerConfig{})
	client := redis.NewClient(redisstore.ClientOptions(srv.Addr))
	t.Cleanup(func() { _ = client.Close() })
	h := &panickingHandler{on: "node stalled"}
	s, err := redisstore.New(client, redisstore.WithStallTimeout(200*time.Millisecond), redisstore.WithLogger(slog.New(h)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	req := func(key string) slidelog.Request {
		return slidelog.Request{Namespace: "loggerpanic", Key: key, Cost: 1, ID: uint64(time.Now().UnixNano()),
			Policies: []slidelog.Policy{{Limit: 1000, Window: time.Minute}}}
	}
	for round := 1; round <= 2; round++ {
		require.NoError(t, srv.Signal(syscall.SIGSTOP))
		_, err := s.Take(t.Context(), req("stalled"))
		require.NoError(t, srv.Signal(syscall.SIGCONT))
		require.ErrorIs(t, err, slidelog.ErrStalled, "round %d", round)
		require.Eventually(t, func() bool { return h.panics.Load() >= int64(round) }, 5*time.Second, 10*time.Millisecond,
			"round %d: the verdict logged", round)
		require.Eventually(t, func() bool {
			res, err := s.Take(t.Context(), req("after"))
			return err == nil && res.Allowed
		}, 10*time.Second, 50*time.Millisecond, "round %d: decisions after the stall", round)
	}
}
