package redisstore_test

import (
	"context"
	"log/slog"
	"net"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/internal/logbuf"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
	"github.com/stretchr/testify/require"
)

// holdReplies is a go-redis hook that, once armed, holds each reply to a
// script for hold after the client has read it: a process that has taken
// the node's answer off the socket and not yet run the goroutine it is
// for.
type holdReplies struct {
	armed atomic.Bool
	hold  atomic.Int64 // a time.Duration
}

func (h *holdReplies) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *holdReplies) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if h.armed.Load() && cmd.Name() != "ping" {
			time.Sleep(time.Duration(h.hold.Load()))
		}
		return err
	}
}

func (h *holdReplies) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if h.armed.Load() && len(cmds) > 0 && cmds[0].Name() != "ping" {
			time.Sleep(time.Duration(h.hold.Load()))
		}
		return err
	}
}

// A node whose silence is counted in alive time (here a client used
// before New, on a real redis-server) is not judged stalled while it
// answers this process on other connections: the store asks the kernel,
// before a verdict, when the node's bytes last arrived on this process's
// connections to it. The call's reply is held for four stall timeouts
// after the client read it, while PINGs on the same client are answered
// every few milliseconds: the call must get Redis's decision, and no
// verdict be logged. Without the kernel's record (the PINGs stopped) the
// same held reply is judged stalled after the stall timeout, as alive
// time alone judges it.
func TestAliveTimeHearsTheNodesOtherAnswers(t *testing.T) {
	const stall = redisstore.DefaultStallTimeout
	client := redistest.RedisClient(t)
	hold := &holdReplies{}
	hold.hold.Store(int64(4 * stall))
	client.AddHook(hold)
	require.NoError(t, client.Ping(t.Context()).Err(), "PING before New: the store cannot track these connections")
	var logs logbuf.Buffer
	store, err := redisstore.New(client, redisstore.WithKeyPrefix(redistest.KeyPrefix(t, client)),
		redisstore.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	require.Contains(t, logs.String(), "connections to this node before New", "the case judges in alive time only if the store found the client used")
	host, _, err := net.SplitHostPort(client.Options().Addr)
	require.NoError(t, err)
	require.NotNil(t, net.ParseIP(host), "the node is named by its IP address, which the kernel's table has")

	req := slidelog.Request{Key: "k", Policies: []slidelog.Policy{{Name: "p", Limit: 1000, Window: time.Hour}}, Cost: 1}
	_, err = store.Take(t.Context(), req)
	require.NoError(t, err)

	// The node answers PINGs on other connections of this process's
	// while the script's reply is held. On a busy machine the PINGs'
	// goroutine may itself not run for a stall timeout: a verdict is then
	// right (the kernel's last byte is as old), and the attempt is made
	// again. A verdict while the kernel dated the node's bytes more
	// recently than the stall timeout is the failure this test is for.
	decided := false
	for attempt := 1; attempt <= 5 && !decided; attempt++ {
		stop := make(chan struct{})
		var pings sync.WaitGroup
		for range 4 {
			pings.Go(func() {
				for {
					select {
					case <-stop:
						return
					case <-time.After(2 * time.Millisecond):
						_ = client.Ping(context.Background()).Err()
					}
				}
			})
		}
		time.Sleep(20 * time.Millisecond)
		before := logs.Count("node stalled")
		hold.armed.Store(true)
		start := time.Now()
		res, err := store.Take(t.Context(), req)
		took := time.Since(start)
		hold.armed.Store(false)
		close(stop)
		pings.Wait()
		if err == nil {
			require.Equal(t, redisstore.Source, res.Source)
			require.GreaterOrEqual(t, took, 4*stall, "the reply was held")
			require.Equal(t, before, logs.Count("node stalled"), "a verdict logged for a call that got Redis's decision")
			decided = true
			break
		}
		require.ErrorIs(t, err, slidelog.ErrStalled, "attempt %d", attempt)
		require.Eventually(t, func() bool { return logs.Count("node stalled") > before }, time.Second, 10*time.Millisecond)
		lines := logs.Lines("node stalled")
		m := regexp.MustCompile(`kernel_last_byte=(\S+)`).FindStringSubmatch(lines[len(lines)-1])
		require.NotNil(t, m, "the verdict's line says what the kernel recorded: %s", lines[len(lines)-1])
		ago, perr := time.ParseDuration(m[1])
		require.NoError(t, perr, "the kernel dated the node's PING replies: %s", lines[len(lines)-1])
		require.GreaterOrEqual(t, ago, stall, "judged stalled after %v while the kernel dated the node's bytes %v ago: %s", took, ago, lines[len(lines)-1])
		t.Logf("attempt %d: the PINGs did not run for %v (a busy machine), and the verdict was right; again", attempt, ago)
	}
	require.True(t, decided, "in 5 attempts the PINGs never kept the node heard through a held reply")

	// Nothing else from the node: the held reply is silence by both
	// measures, and the verdict comes by the stall timeout, long before
	// the reply is let go, saying what the kernel recorded.
	hold.hold.Store(int64(20 * stall))
	before := logs.Count("node stalled")
	hold.armed.Store(true)
	start := time.Now()
	_, err = store.Take(t.Context(), req)
	took := time.Since(start)
	require.ErrorIs(t, err, slidelog.ErrStalled, "after %v", took)
	require.Less(t, took, 20*stall, "judged by the stall timeout, not after the held reply")
	require.Eventually(t, func() bool { return logs.Count("node stalled") > before }, time.Second, 10*time.Millisecond)
	lines := logs.Lines("node stalled")
	require.Contains(t, lines[len(lines)-1], `evidence="alive time"`)
	require.Regexp(t, `kernel_last_byte=\d+(\.\d+)?m?s`, lines[len(lines)-1], "the verdict's line dates the node's last bytes")
	hold.armed.Store(false)
}
