package slidelog

// UseLegacyScript makes s run the script variant for Redis 6.2 (no #!lua
// line) for good, whatever New finds, so that the store suite can run it
// on the test servers.
func UseLegacyScript(s *RedisStore) {
	s.legacy.Store(true)
	s.pinned = true
}

// SetLegacyScript sets the variant s runs until New next reads the
// servers' version.
func SetLegacyScript(s *RedisStore, legacy bool) { s.legacy.Store(legacy) }

// UsesLegacyScript reports whether s runs the variant for Redis 6.2.
func UsesLegacyScript(s *RedisStore) bool { return s.legacy.Load() }
