package redisstore

import "github.com/redis/go-redis/v9"

// UseLegacyScript makes s run the script variant for Redis 6.2 (no #!lua
// line) for good, whatever New finds, so that the store suite can run it
// on the test servers.
func UseLegacyScript(s *Store) {
	s.legacy.Store(true)
	s.pinned = true
}

// SetLegacyScript sets the variant s runs until the servers' version is
// next read.
func SetLegacyScript(s *Store, legacy bool) { s.legacy.Store(legacy) }

// UsesLegacyScript reports whether s runs the variant for Redis 6.2.
func UsesLegacyScript(s *Store) bool { return s.legacy.Load() }

// NewUnchecked is New without its checks of the servers.
func NewUnchecked(client redis.UniversalClient, opts ...Option) (*Store, error) {
	s, _, err := newStore(client, opts)
	return s, err
}

// Check runs New's checks of the servers on s.
func Check(s *Store, opts ...Option) error {
	_, cfg, err := newStore(s.client, opts)
	if err != nil {
		return err
	}
	return s.check(cfg)
}
