package slidelog

import (
	"log/slog"
	"time"
)

// panicSite is where a limiter recovers a panic of code it was given (an
// observer, its store) that runs where no caller of the limiter's waits
// to receive it (see Observer).
type panicSite uint8

const (
	panicObserver  panicSite = iota // a LimiterObserver's BreakerState or StoreEvent
	panicTimer                      // a breaker's open timer, outside the observers
	panicWriteBack                  // the store writing back the fallback's admissions (Route, Record, WriteBack)
	numPanicSites
)

// panicSites are the sites' names, the "in" of their records.
var panicSites = [numPanicSites]string{"observer", "breaker_timer", "write_back"}

// panicLogEvery is how often, at most, a limiter logs the panics it
// recovers at one site: the interval of its other records of a recurring
// problem.
const panicLogEvery = causeLogEvery

// recovered, deferred, recovers a panic at site and logs it (logPanic).
func (l *Limiter) recovered(site panicSite) {
	if p := recover(); p != nil {
		l.logPanic(site, p)
	}
}

// logPanic logs p, a panic recovered at site, at ERROR with its value and
// the stack that panicked (logPanic runs in the deferred call that
// recovered it): once for the first, then at most once per panicLogEvery
// per site, with the number of panics since the previous record. It never
// panics: a logger that panics loses the record.
func (l *Limiter) logPanic(site panicSite, p any) {
	l.panicLog[site].LogPanic(time.Now(), panicLogEvery, l.logger, "slidelog: recovered a panic; the limiter goes on", p,
		func(n int64) []slog.Attr {
			return []slog.Attr{slog.String("limiter", l.name), slog.String("in", panicSites[site]), slog.Int64("panics", n)}
		})
}
