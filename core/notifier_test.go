package slidelog_test

import (
	"log/slog"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/internal/logbuf"
	"github.com/slidelog/slidelog/core/memstore"
)

// notifyingStore is a memory store that is also a Notifier, as a stranger
// would write one from slidelog.Notifier's doc.
type notifyingStore struct {
	*memstore.Store
	mu  sync.Mutex
	fns map[*func(string, slidelog.StoreEvent)]bool
}

func (s *notifyingStore) Notify(fn func(node string, event slidelog.StoreEvent)) (stop func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := &fn
	s.fns[p] = true
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.fns, p)
	}
}

// emit tells every function given to Notify of event at node, as the
// store's own goroutine would, and returns how many it told.
func (s *notifyingStore) emit(node string, event slidelog.StoreEvent) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for fn := range s.fns {
		(*fn)(node, event)
	}
	return len(s.fns)
}

// eventObserver is a recordingObserver that also records store events.
type eventObserver struct {
	recordingObserver
	panics bool
}

func (o *eventObserver) Bind(limiter string, gauges func() slidelog.Gauges) (slidelog.LimiterObserver, error) {
	if _, err := o.recordingObserver.Bind(limiter, gauges); err != nil {
		return nil, err
	}
	return o, nil
}

func (o *eventObserver) StoreEvent(node string, event slidelog.StoreEvent) {
	if o.panics {
		panic("observer panic in StoreEvent")
	}
	o.add("event " + node + " " + string(event))
}

// A store's own events (Notifier) reach every StoreEventObserver of the
// limiters on it, from the store's goroutine: a node of "" as "store", a
// panic of one observer recovered and logged with the others told all
// the same; Close stops them; a limiter with no StoreEventObserver asks
// the store for none.
func TestStoreEventsReachObservers(t *testing.T) {
	store := &notifyingStore{Store: newMemoryStore(t), fns: map[*func(string, slidelog.StoreEvent)]bool{}}
	var buf logbuf.Buffer
	bad, good, plain := &eventObserver{panics: true}, &eventObserver{}, &recordingObserver{}
	l, err := slidelog.New(store, slidelog.PerMinute(10), slidelog.WithName("events"),
		slidelog.WithObserver(bad), slidelog.WithObserver(plain), slidelog.WithObserver(good),
		slidelog.WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	require.NoError(t, err)

	require.Equal(t, 1, store.emit("10.0.0.7:6379", slidelog.EventDataLost), "one limiter listens")
	require.Equal(t, 1, store.emit("", slidelog.EventDataLost))
	assert.Equal(t, []string{"bind events", "event 10.0.0.7:6379 data_lost", "event store data_lost"}, good.events)
	assert.Equal(t, []string{"bind events"}, plain.events, "an observer without StoreEvent")
	requirePanicRecord(t, &buf, "events", "observer", "observer panic in StoreEvent", "StoreEvent")

	require.NoError(t, l.Close())
	assert.Zero(t, store.emit("10.0.0.7:6379", slidelog.EventDataLost), "a closed limiter still listens")

	l2, err := slidelog.New(store, slidelog.PerMinute(10), slidelog.WithName("plain"), slidelog.WithObserver(&recordingObserver{}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l2.Close() })
	assert.Zero(t, store.emit("n", slidelog.EventDataLost), "a limiter with no StoreEventObserver listens")
}

// panickingNotifier is a store whose Notify panics.
type panickingNotifier struct{ *memstore.Store }

func (panickingNotifier) Notify(func(string, slidelog.StoreEvent)) func() {
	panic("notify boom")
}

// A panic of the store's Notify goes on to New's caller with the limiter
// undone: its observers unbound and its name released, as after a panic
// of Bind.
func TestNotifyPanicUndoesNew(t *testing.T) {
	store := panickingNotifier{newMemoryStore(t)}
	obs := &eventObserver{}
	require.PanicsWithValue(t, "notify boom", func() {
		_, _ = slidelog.New(store, slidelog.PerMinute(10), slidelog.WithName("boom"), slidelog.WithObserver(obs))
	})
	assert.Equal(t, 1, obs.unbound, "the observer bound by New is unbound")
	l, err := slidelog.New(store, slidelog.PerMinute(10), slidelog.WithName("boom"))
	require.NoError(t, err, "the name is free again")
	require.NoError(t, l.Close())
}
