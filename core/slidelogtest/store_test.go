package slidelogtest_test

import (
	"context"
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

// brokenStores are the broken stores, each with the check that must
// refuse it.
var brokenStores = map[string]struct {
	check string
	new   func(*memstore.Store) slidelog.Store
}{
	"peekRecords":          {"Peek/IsTakeRecordingNothing", func(m *memstore.Store) slidelog.Store { return &peekRecords{m} }},
	"bareResult":           {"LimitReachedExactly", func(m *memstore.Store) slidelog.Store { return &bareResult{m} }},
	"joinedKeys":           {"NamesAndKeysDoNotCollide", func(m *memstore.Store) slidelog.Store { return &joinedKeys{m} }},
	"silentWithoutRetries": {"RetriedCallIsCountedOnce", func(m *memstore.Store) slidelog.Store { return &silentWithoutRetries{m} }},
	"keyOnlyKeeper": {"KeptAdmissionsKeepTheirName", func(m *memstore.Store) slidelog.Store {
		return &keyOnlyKeeper{Store: m, kept: map[string][]keptAt{}}
	}},
}

// The store suite refuses a broken store: each runs the check that must
// refuse it in a process of its own, which must fail.
func TestStoreSuiteRefusesBrokenStores(t *testing.T) {
	if name := os.Getenv("SLIDELOGTEST_BROKEN_STORE"); name != "" {
		slidelogtest.RunStoreSuite(t, func(t *testing.T, clock func() time.Time) slidelog.Store {
			return brokenStores[name].new(memstore.New(memstore.WithClock(clock)))
		})
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
