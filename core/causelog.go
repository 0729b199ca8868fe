package slidelog

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/slidelog/slidelog/core/internal/ratelog"
)

// causeLogEvery is how often, at most, a limiter logs that one store node's
// decisions go to the failure mode: once when an episode starts, then once
// per interval with the count of decisions since, however many there are.
const causeLogEvery = 10 * time.Second

// causeLogMaxNodes bounds the nodes a causeLog remembers; past it, it
// forgets them all (the nodes of a store are its masters, a handful).
const causeLogMaxNodes = 1024

// causeLog remembers, per store node, the latest error of a store call and
// when the limiter last logged that the node's decisions went to the
// failure mode, so that the breaker's and the failure mode's log records
// say why, without one record per decision. It takes no lock on a
// decision's path: a failing node's decisions (all of them go to the
// failure mode) must not queue on one another.
type causeLog struct {
	nodes sync.Map // node -> *nodeCause
	count atomic.Int64
}

type nodeCause struct {
	last atomic.Pointer[noted] // the latest telling store error on the node
	log  ratelog.Every         // the node's failovers, and when they were last logged
}

type noted struct {
	err error
	at  time.Time
}

func newCauseLog() *causeLog { return &causeLog{} }

func (c *causeLog) node(n string) *nodeCause {
	if nc, ok := c.nodes.Load(n); ok {
		return nc.(*nodeCause)
	}
	if c.count.Add(1) > causeLogMaxNodes {
		c.nodes.Clear()
		c.count.Store(1)
	}
	nc, _ := c.nodes.LoadOrStore(n, &nodeCause{})
	return nc.(*nodeCause)
}

// keep records err as the node's cause, unless it says less than a recent
// one: a client that fails to authenticate answers WRONGPASS once, then
// errors that name no cause ("redis: unexpected type=<nil> for Slice").
func (nc *nodeCause) keep(err error, now time.Time) {
	if last := nc.last.Load(); last != nil && causeKind(err) == "error" && causeKind(last.err) != "error" && now.Sub(last.at) < causeLogEvery {
		return
	}
	nc.last.Store(&noted{err, now})
}

// note records err, a store call's error on node, as its latest cause.
// A nil causeLog (a Local store) does nothing.
func (c *causeLog) note(node string, err error) {
	if c == nil || err == nil {
		return
	}
	c.node(node).keep(err, time.Now())
}

// cause returns the latest store error on node, or nil.
func (c *causeLog) cause(node string) error {
	if c == nil {
		return nil
	}
	if nc, ok := c.nodes.Load(node); ok {
		if last := nc.(*nodeCause).last.Load(); last != nil {
			return last.err
		}
	}
	return nil
}

// logFailover logs, at most once per causeLogEvery per node, that a
// decision on node went to the failure mode, for reason, because of err
// (for an open breaker, the store error that opened it), with the number
// of decisions that did since the last such record.
func (l *Limiter) logFailover(node, reason string, err error) {
	c := l.causes
	if c == nil {
		return
	}
	now := time.Now()
	nc := c.node(node)
	if !isBreakerOpen(err) {
		nc.keep(err, now)
	}
	failures, ok := nc.log.Note(now, causeLogEvery)
	if !ok {
		return
	}
	var cause error
	if last := nc.last.Load(); last != nil {
		cause = last.err
	}
	l.logger.LogAttrs(context.Background(), slog.LevelWarn, "slidelog: store decisions go to the failure mode",
		slog.String("limiter", l.name), slog.String("node", nodeLabel(node)), slog.String("mode", l.mode.String()),
		slog.String("reason", reason), slog.String("cause", causeKind(cause)), slog.Any("error", cause),
		slog.Int64("decisions", failures))
}

// noDecision counts err, returned instead of a decision, in the metrics.
// The errors of reason "other" (a policy func that failed or chose
// invalid policies, a cost out of range), which no other record explains,
// it logs at most once per causeLogEvery, with how many there were since
// the previous record.
func (l *Limiter) noDecision(err error) {
	reason := errorReason(err)
	l.metrics.error(reason)
	if reason != "other" {
		return
	}
	errs, ok := l.errLog.Note(time.Now(), causeLogEvery)
	if !ok {
		return
	}
	l.logger.LogAttrs(context.Background(), slog.LevelWarn, "slidelog: calls answered with an error instead of a decision",
		slog.String("limiter", l.name), slog.String("reason", reason), slog.Any("error", err),
		slog.Int64("errors", errs))
}

// breakerCause returns the attributes that say why node's breaker opened.
func (l *Limiter) breakerCause(node string) []any {
	err := l.causes.cause(node)
	if err == nil {
		return nil
	}
	return []any{"cause", causeKind(err), "error", err}
}

// isBreakerOpen reports whether err is a breaker's refusal (open, or
// half-open with its probes out), which says nothing of the store.
func isBreakerOpen(err error) bool {
	return errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests)
}

// causeKind names the kind of a store error for log records: "stalled"
// (no reply for the stall timeout), "dial" (no connection: refused,
// unreachable, unresolved), "timeout", "readonly" (a replica, or a master
// being failed over: READONLY), "auth" (WRONGPASS, NOAUTH), "oom" (Redis
// out of memory: OOM), "busy" (a script running too long: BUSY),
// "loading", "cluster" (MOVED, ASK, CLUSTERDOWN, CROSSSLOT, TRYAGAIN),
// "closed", or "error".
func causeKind(err error) string {
	if err == nil {
		return "unknown"
	}
	if errors.Is(err, ErrStalled) {
		return "stalled"
	}
	if errors.Is(err, ErrClosed) || errors.Is(err, net.ErrClosed) {
		return "closed"
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return "dial"
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return "dial"
	}
	msg := err.Error()
	for _, k := range []struct{ prefix, kind string }{
		{"READONLY", "readonly"}, {"WRONGPASS", "auth"}, {"NOAUTH", "auth"}, {"OOM", "oom"},
		{"BUSY", "busy"}, {"LOADING", "loading"}, {"MOVED", "cluster"}, {"ASK", "cluster"},
		{"CLUSTERDOWN", "cluster"}, {"CROSSSLOT", "cluster"}, {"TRYAGAIN", "cluster"},
	} {
		// A Redis error reply, possibly wrapped: "slidelog: store
		// unavailable: READONLY You can't write against a read only replica."
		if strings.HasPrefix(msg, k.prefix+" ") || strings.Contains(msg, ": "+k.prefix+" ") {
			return k.kind
		}
	}
	if strings.Contains(msg, "dial ") || strings.Contains(msg, "connection refused") || strings.Contains(msg, "no such host") {
		return "dial"
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout"
	}
	return "error"
}
