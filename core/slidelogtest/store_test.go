package slidelogtest_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/slidelogtest"
)

// A memory store with one promise broken, the way a store written from
// the Store doc might break it.
type (
	// peekRecords peeks by taking.
	peekRecords struct{ *memstore.Store }
	// bareResult fills only four fields of a decision on one policy.
	bareResult struct{ *memstore.Store }
	// joinedKeys keeps one log per namespace + ":" + key.
	joinedKeys struct{ *memstore.Store }
	// silentWithoutRetries says nothing of itself, so it is remote, but
	// counts a resent Take twice.
	silentWithoutRetries struct{ m *memstore.Store }
	// keyOnlyKeeper keeps admissions by key alone, and writes them into
	// the log of the next decision of that key, whatever its name.
	keyOnlyKeeper struct {
		*memstore.Store
		mu   sync.Mutex
		kept map[string][]keptAt
	}
	keptAt struct {
		req slidelog.Request
		at  time.Time
	}
)

func (s *keyOnlyKeeper) Keep(req slidelog.Request, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kept[req.Key] = append(s.kept[req.Key], keptAt{req, at})
}

func (s *keyOnlyKeeper) Forget(req slidelog.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var left []keptAt
	for _, k := range s.kept[req.Key] {
		if k.req.ID != req.ID {
			left = append(left, k)
		}
	}
	s.kept[req.Key] = left
}

func (s *keyOnlyKeeper) Take(ctx context.Context, req slidelog.Request) (slidelog.Result, error) {
	s.mu.Lock()
	kept := s.kept[req.Key]
	delete(s.kept, req.Key)
	s.mu.Unlock()
	for _, k := range kept {
		k.req.Namespace, k.req.Policies = req.Namespace, req.Policies
		if err := s.Record(ctx, k.req, k.at); err != nil {
			return slidelog.Result{}, err
		}
	}
	return s.Store.Take(ctx, req)
}

func (s *keyOnlyKeeper) Reset(ctx context.Context, req slidelog.Request) error {
	s.mu.Lock()
	delete(s.kept, req.Key)
	s.mu.Unlock()
	return s.Store.Reset(ctx, req)
}

func (s *keyOnlyKeeper) WriteBack(ctx context.Context) (written, left int) {
	s.mu.Lock()
	all := s.kept
	s.kept = map[string][]keptAt{}
	s.mu.Unlock()
	for _, ks := range all {
		for _, k := range ks {
			if s.Record(ctx, k.req, k.at) == nil {
				written++
			}
		}
	}
	return written, 0
}

func (s *keyOnlyKeeper) Unwritten() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, ks := range s.kept {
		n += len(ks)
	}
	return n
}

func (s peekRecords) Peek(ctx context.Context, req slidelog.Request) (slidelog.Result, error) {
	return s.Take(ctx, req)
}

func (s bareResult) Take(ctx context.Context, req slidelog.Request) (slidelog.Result, error) {
	r, err := s.Store.Take(ctx, req)
	if len(req.Policies) > 1 {
		return r, err
	}
	return slidelog.Result{Allowed: r.Allowed, Remaining: r.Remaining, RetryAfter: r.RetryAfter, ResetAfter: r.ResetAfter}, err
}

func joined(req slidelog.Request) slidelog.Request {
	req.Namespace, req.Key = "", req.Namespace+":"+req.Key
	return req
}

func (s joinedKeys) Take(ctx context.Context, req slidelog.Request) (slidelog.Result, error) {
	return s.Store.Take(ctx, joined(req))
}

func (s joinedKeys) Peek(ctx context.Context, req slidelog.Request) (slidelog.Result, error) {
	return s.Store.Peek(ctx, joined(req))
}

func (s joinedKeys) Refund(ctx context.Context, req slidelog.Request) error {
	return s.Store.Refund(ctx, joined(req))
}

func (s joinedKeys) Reset(ctx context.Context, req slidelog.Request) error {
	return s.Store.Reset(ctx, joined(req))
}

func (s joinedKeys) Record(ctx context.Context, req slidelog.Request, at time.Time) error {
	return s.Store.Record(ctx, joined(req), at)
}

func (s *silentWithoutRetries) Take(ctx context.Context, req slidelog.Request) (slidelog.Result, error) {
	return s.m.Take(ctx, req)
}
func (s *silentWithoutRetries) Refund(ctx context.Context, req slidelog.Request) error {
	return s.m.Refund(ctx, req)
}
func (s *silentWithoutRetries) Reset(ctx context.Context, req slidelog.Request) error {
	return s.m.Reset(ctx, req)
}
func (s *silentWithoutRetries) Close() error { return s.m.Close() }

// backend is what a gatedStore waits on: it answers while its gate is
// open, and stops answering while WithStall holds it shut.
type backend struct {
	mu   sync.Mutex
	open chan struct{} // closed while the backend answers
}

func newBackend() *backend {
	b := &backend{open: make(chan struct{})}
	close(b.open)
	return b
}

// answers is closed while the backend answers.
func (b *backend) answers() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.open
}

// stall is a slidelogtest.StallFunc: it shuts the gate until resume.
func (b *backend) stall(*testing.T) (resume func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.open = make(chan struct{})
	open := b.open
	return func() { close(open) }
}

// gatedStore is a memory store behind a backend that can stall, as a
// remote store is: each call (Take, Refund, Reset, Peek, Record) waits
// until the backend answers or the context ends, and then fails with the
// context's error, unless the store breaks that promise (gateFault). It counts a resent Take once, as
// a store that is not local must.
type gatedStore struct {
	*memstore.Store
	backend *backend
	fault   gateFault

	mu       sync.Mutex
	admitted map[string]slidelog.Result // by namespace, key and ID
}

// gateFault is how a gatedStore breaks the promise to end a call with
// its context.
type gateFault int

const (
	gateKeepsPromise gateFault = iota
	// gateIgnoresContext waits on the backend whatever the context.
	gateIgnoresContext
	// gateForgetsError ends the call with its context but reports no
	// error: a Take an admission of the zero Result, a Refund or Reset
	// done.
	gateForgetsError
)

func newGatedStore(m *memstore.Store, b *backend, fault gateFault) *gatedStore {
	return &gatedStore{Store: m, backend: b, fault: fault, admitted: map[string]slidelog.Result{}}
}

// wait waits until the backend answers; done reports that the call is
// over, with err.
func (s *gatedStore) wait(ctx context.Context) (done bool, err error) {
	if err := ctx.Err(); err != nil {
		return true, err
	}
	if s.fault == gateIgnoresContext {
		<-s.backend.answers()
		return false, nil
	}
	select {
	case <-s.backend.answers():
		return false, nil
	case <-ctx.Done():
		if s.fault == gateForgetsError {
			return true, nil
		}
		return true, ctx.Err()
	}
}

// Describe says what memstore says, but not that the store is local.
func (s *gatedStore) Describe() slidelog.StoreInfo {
	info := s.Store.Describe()
	info.Name, info.Local = "gated", false
	return info
}

func (s *gatedStore) Take(ctx context.Context, req slidelog.Request) (slidelog.Result, error) {
	if done, err := s.wait(ctx); done {
		return slidelog.Result{}, err
	}
	id := fmt.Sprintf("%q %q %d", req.Namespace, req.Key, req.ID)
	s.mu.Lock()
	defer s.mu.Unlock()
	if res, ok := s.admitted[id]; ok {
		return res, nil
	}
	res, err := s.Store.Take(ctx, req)
	if err == nil && res.Allowed {
		s.admitted[id] = res
	}
	return res, err
}

func (s *gatedStore) Refund(ctx context.Context, req slidelog.Request) error {
	if done, err := s.wait(ctx); done {
		return err
	}
	return s.Store.Refund(ctx, req)
}

func (s *gatedStore) Reset(ctx context.Context, req slidelog.Request) error {
	if done, err := s.wait(ctx); done {
		return err
	}
	return s.Store.Reset(ctx, req)
}

func (s *gatedStore) Peek(ctx context.Context, req slidelog.Request) (slidelog.Result, error) {
	if done, err := s.wait(ctx); done {
		return slidelog.Result{}, err
	}
	return s.Store.Peek(ctx, req)
}

func (s *gatedStore) Record(ctx context.Context, req slidelog.Request, at time.Time) error {
	if done, err := s.wait(ctx); done {
		return err
	}
	return s.Store.Record(ctx, req, at)
}

// A store whose calls wait on a backend that can stall, and end with
// their context, passes the suite, the Stalled cases included.
func TestStoreSuiteOnGatedStore(t *testing.T) {
	b := newBackend()
	slidelogtest.RunStoreSuite(t, func(t *testing.T, clock func() time.Time) slidelog.Store {
		return newGatedStore(memstore.New(memstore.WithClock(clock)), b, gateKeepsPromise)
	}, slidelogtest.WithStall(b.stall))
}

// brokenStores are the broken stores, each with the check that must
// refuse it; a store with a backend is run WithStall. The store that
// ignores the context does so in every method: it is run once for each
// of the Stalled cases of Take, Peek and Record, each of which must
// refuse it.
var brokenStores = map[string]struct {
	check string
	new   func(*memstore.Store, *backend) slidelog.Store
}{
	"gateIgnoresContext": {"Stalled/ContextEndsTake", func(m *memstore.Store, b *backend) slidelog.Store { return newGatedStore(m, b, gateIgnoresContext) }},
	"gateIgnoresContextInPeek": {"Stalled/ContextEndsPeek", func(m *memstore.Store, b *backend) slidelog.Store {
		return newGatedStore(m, b, gateIgnoresContext)
	}},
	"gateIgnoresContextInRecord": {"Stalled/ContextEndsRecord", func(m *memstore.Store, b *backend) slidelog.Store {
		return newGatedStore(m, b, gateIgnoresContext)
	}},
	"gateForgetsError":     {"Stalled/ContextEndsReset", func(m *memstore.Store, b *backend) slidelog.Store { return newGatedStore(m, b, gateForgetsError) }},
	"peekRecords":          {"Peek/IsTakeRecordingNothing", func(m *memstore.Store, _ *backend) slidelog.Store { return &peekRecords{m} }},
	"bareResult":           {"LimitReachedExactly", func(m *memstore.Store, _ *backend) slidelog.Store { return &bareResult{m} }},
	"joinedKeys":           {"NamesAndKeysDoNotCollide", func(m *memstore.Store, _ *backend) slidelog.Store { return &joinedKeys{m} }},
	"silentWithoutRetries": {"RetriedCallIsCountedOnce", func(m *memstore.Store, _ *backend) slidelog.Store { return &silentWithoutRetries{m} }},
	"keyOnlyKeeper": {"KeptAdmissionsKeepTheirName", func(m *memstore.Store, _ *backend) slidelog.Store {
		return &keyOnlyKeeper{Store: m, kept: map[string][]keptAt{}}
	}},
}

// The store suite refuses a broken store: each runs the check that must
// refuse it in a process of its own, which must fail.
func TestStoreSuiteRefusesBrokenStores(t *testing.T) {
	if name := os.Getenv("SLIDELOGTEST_BROKEN_STORE"); name != "" {
		b := newBackend()
		slidelogtest.RunStoreSuite(t, func(t *testing.T, clock func() time.Time) slidelog.Store {
			return brokenStores[name].new(memstore.New(memstore.WithClock(clock)), b)
		}, slidelogtest.WithStall(b.stall))
		return
	}
	for name, b := range brokenStores {
		t.Run(name, func(t *testing.T) {
			run := "^" + t.Name()[:strings.IndexByte(t.Name(), '/')] + "$/^" + strings.ReplaceAll(b.check, "/", "$/^") + "$"
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run="+run, "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), "SLIDELOGTEST_BROKEN_STORE="+name)
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), "--- FAIL: TestStoreSuiteRefusesBrokenStores/"+b.check) {
				t.Fatalf("the store suite on %s: %v, and its check %s did not fail; output:\n%s", name, err, b.check, out)
			}
		})
	}
}
