package slidelog

import (
	"log/slog"
	"strconv"
	"time"

	"github.com/slidelog/slidelog/core/internal/writeback"
)

// journal keeps the admissions a limiter's fallback made while its store
// was failing, for a store that can record them (Recorder) but does not
// keep them itself (Keeper): they are written into the store's log before
// their key's next decision, and in the background once the store answers
// again, so that the windows after recovery count them instead of opening
// fresh. It is the write-back journal of package writeback, the one a
// Redis store keeps too (see Keeper): bounded to writeback.MaxEntries
// entries (those beyond are dropped), an entry leaves when written back,
// refunded, reset, or when it has left its longest window.
type journal = writeback.Journal[Request]

type journalEntry = writeback.Entry[Request]

// newJournal returns an empty journal, which logs to logger the entries
// it drops (at most every writeback.DropReportEvery).
func newJournal(logger *slog.Logger, limiter string) *journal {
	j := writeback.New[Request]()
	j.OnDrop = func(dropped uint64) {
		logger.Warn("slidelog: write-back journal full: fallback admissions dropped, the store will not count them",
			"limiter", limiter, "dropped", dropped, "max_entries", writeback.MaxEntries)
	}
	return j
}

// journalKey is the journal's name for a key of a namespace.
func journalKey(namespace, key string) string {
	return strconv.Itoa(len(namespace)) + ":" + namespace + key
}

// newJournalEntry is the entry of the fallback admission of req at at.
func newJournalEntry(req Request, at time.Time) journalEntry {
	return journalEntry{Req: req, ID: req.ID, At: at, Expires: at.Add(longestWindow(req.Policies)), Server: writeback.Unwritten}
}

func longestWindow(ps []Policy) time.Duration {
	var w time.Duration
	for _, p := range ps {
		w = max(w, p.Window)
	}
	return w
}
