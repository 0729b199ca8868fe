package slidelogtest

import (
	"cmp"
	"slices"
	"time"
)

// Admission is one admitted request, as CheckWindows sees it.
type Admission struct {
	// Key groups admissions: one identity's (or one Redis key's).
	Key string
	// Start and End bound the instant the admission was decided: a call's
	// start and end, or the deciding clock's time in both (End zero
	// means Start).
	Start, End time.Time
	// Cost is how many units it took; 0 counts as 1.
	Cost int
	// Epoch separates what a loss forgot: admissions of one key in
	// different epochs (before and after its log was deleted or evicted)
	// are never counted in one window.
	Epoch int
}

// Window is the fullest window of one key (and epoch) that CheckWindows
// found.
type Window struct {
	Key   string
	Epoch int
	// From is the start of the window: the earliest Start of its
	// admissions.
	From time.Time
	// Units is the cost of the admissions in it.
	Units int
}

// CheckWindows is an independent checker of a sliding-window limit: it
// trusts nothing but the times of the admissions. For every key (every
// epoch of a key apart) it finds the window of length window holding the
// most units that certainly lie in one window: admissions whose Start
// and End both fall in [s, s+window) for one admission's Start s. It
// never overstates a window; with End after Start it may understate one
// by the calls' durations. fullest holds every key's fullest window,
// sorted by key and epoch; over those among them that hold more than
// limit units.
func CheckWindows(admitted []Admission, limit int, window time.Duration) (fullest, over []Window) {
	type group struct {
		key   string
		epoch int
	}
	groups := make(map[group][]Admission)
	for _, a := range admitted {
		if a.End.IsZero() {
			a.End = a.Start
		}
		if a.Cost == 0 {
			a.Cost = 1
		}
		g := group{a.Key, a.Epoch}
		groups[g] = append(groups[g], a)
	}
	for g, as := range groups {
		slices.SortFunc(as, func(a, b Admission) int { return a.Start.Compare(b.Start) })
		best := Window{Key: g.key, Epoch: g.epoch}
		for j := range as {
			end := as[j].Start.Add(window)
			units := 0
			for k := j; k < len(as) && as[k].Start.Before(end); k++ {
				if as[k].End.Before(end) {
					units += as[k].Cost
				}
			}
			if units > best.Units {
				best.Units, best.From = units, as[j].Start
			}
		}
		fullest = append(fullest, best)
		if best.Units > limit {
			over = append(over, best)
		}
	}
	byKey := func(a, b Window) int { return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Epoch, b.Epoch)) }
	slices.SortFunc(fullest, byKey)
	slices.SortFunc(over, byKey)
	return fullest, over
}
