package redisstore

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/slidelog/slidelog/core/internal/ratelog"
)

// panicSite is where a store recovers a panic of code the application
// gave it, which runs there on goroutines of the store's own, or on
// goroutines the store chose: the Redis client (its hooks, the
// connections of its dialer) and WithClock's clock.
type panicSite uint8

const (
	panicRoundTrip panicSite = iota // the client, sending a batch of calls
	panicConn                       // a connection's SetDeadline, breaking it off
	panicWriteBack                  // WriteBack's writers
	panicCanary                     // a reading of the canaries, and the functions given to Notify
	panicMonitor                    // the monitor's goroutine: the logger, logging a stalled node
	numPanicSites
)

// panicSites are the sites' names, the "in" of their records.
var panicSites = [numPanicSites]string{"round_trip", "connection", "write_back", "canary", "monitor"}

// panicLogEvery is how often, at most, a store logs the panics it
// recovers at one site.
const panicLogEvery = 10 * time.Second

// panicLog logs the panics a store recovers.
type panicLog struct {
	logger *slog.Logger
	every  [numPanicSites]ratelog.Every
}

// log logs p, a panic recovered at site, at ERROR with its value and the
// stack that panicked (log runs in the deferred call that recovered it):
// once for the first, then at most once per panicLogEvery per site, with
// the number of panics since the previous record. It never panics: a
// logger that panics loses the record.
func (l *panicLog) log(site panicSite, p any) {
	if l == nil {
		return
	}
	l.every[site].LogPanic(time.Now(), panicLogEvery, l.logger, "redisstore: recovered a panic; the store goes on", p,
		func(n int64) []slog.Attr {
			return []slog.Attr{slog.String("in", panicSites[site]), slog.Int64("panics", n)}
		})
}

// errPanicked is the error of a call whose round trip, or write-back,
// panicked.
var errPanicked = errors.New("redisstore: panic")

// panicked is the error of a call that a panic, recovered at site, ended.
type panicked struct {
	site  panicSite
	value any // the panic's
}

func (e *panicked) Error() string {
	return fmt.Sprintf("%v in %s: %v", errPanicked, panicSites[e.site], e.value)
}

func (e *panicked) Unwrap() error { return errPanicked }

// panicError returns the error of a call that p, a panic recovered at
// site, ended.
func panicError(site panicSite, p any) error {
	return &panicked{site: site, value: p}
}

// panicAgain panics, on the goroutine of a call's caller, with the panic
// of the client's that ended the call's round trip, if one did (err is
// the call's error): the round trip may have run on another goroutine,
// where it was recovered (recoverRoundTrip). It is no reply of the
// store's and no fault of its node, so it must not reach a limiter as an
// error, which its failure mode would decide (FailOpen admitting) and
// its breaker would count against the node.
func panicAgain(err error) {
	if pe := (*panicked)(nil); errors.As(err, &pe) && pe.site == panicRoundTrip {
		panic(pe.value)
	}
}
