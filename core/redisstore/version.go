package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	slidelog "github.com/slidelog/slidelog/core"
)

// serverVersion is what INFO server says a server is.
type serverVersion struct {
	valkey              bool
	major, minor, patch int
}

func (v serverVersion) String() string {
	name := "redis"
	if v.valkey {
		name = "valkey"
	}
	return fmt.Sprintf("%s %d.%d.%d", name, v.major, v.minor, v.patch)
}

func (v serverVersion) atLeast(major, minor int) bool {
	return v.major > major || v.major == major && v.minor >= minor
}

// parseServerVersion reads the reply of INFO server. Valkey reports
// valkey_version (and, for compatibility, redis_version 7.2.4).
func parseServerVersion(info string) (serverVersion, error) {
	fields := map[string]string{}
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	var v serverVersion
	raw, ok := fields["valkey_version"]
	if ok || fields["server_name"] == "valkey" {
		v.valkey = true
		if !ok {
			raw = fields["redis_version"]
		}
	} else if raw, ok = fields["redis_version"]; !ok {
		return v, fmt.Errorf("%w: INFO server names no version", slidelog.ErrUnavailable)
	}
	parts := strings.SplitN(raw, ".", 3)
	nums := [3]int{}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil {
			return v, fmt.Errorf("%w: server version %q: %w", slidelog.ErrUnavailable, raw, err)
		}
		nums[i] = n
	}
	v.major, v.minor, v.patch = nums[0], nums[1], nums[2]
	return v, nil
}

// scriptVariant says which script a server runs: legacy (without the
// #!lua line) for Redis 6.2, ErrUnsupportedVersion for Redis before 6.2 and
// Valkey before 7.2.
func scriptVariant(v serverVersion) (legacy bool, err error) {
	switch {
	case v.valkey && !v.atLeast(7, 2):
		return false, fmt.Errorf("%w: %v, want valkey 7.2 or later", ErrUnsupportedVersion, v)
	case v.valkey:
		return false, nil
	case !v.atLeast(6, 2):
		return false, fmt.Errorf("%w: %v, want redis 6.2 or later", ErrUnsupportedVersion, v)
	case !v.atLeast(7, 0):
		return true, nil
	default:
		return false, nil
	}
}

// checkVersion reads the version of every master (those of masters, see
// eachOf) and picks the script
// variant they all run: the legacy one when any of them is Redis 6.2.
func (s *Store) checkVersion(ctx context.Context, masters []*redis.Client) error {
	if s.pinned {
		return nil
	}
	legacy, err := serverVariant(ctx, s.client, masters)
	if err != nil {
		return err
	}
	s.legacy.Store(legacy)
	return nil
}

// serverVariant reads the version of every master of client and reports
// whether they need the legacy script variant: any of them is Redis 6.2.
func serverVariant(ctx context.Context, client redis.UniversalClient, masters []*redis.Client) (bool, error) {
	var mu sync.Mutex
	legacy := false
	check := func(ctx context.Context, c redis.UniversalClient) error {
		info, err := c.Info(ctx, "server").Result()
		if err != nil {
			return err
		}
		v, err := parseServerVersion(info)
		if err != nil {
			return err
		}
		l, err := scriptVariant(v)
		if err != nil {
			return err
		}
		mu.Lock()
		legacy = legacy || l
		mu.Unlock()
		return nil
	}
	err := eachOf(ctx, client, masters, func(ctx context.Context, node *redis.Client) error { return check(ctx, node) })
	if err == errClientKind {
		err = check(ctx, client)
	}
	return legacy, err
}

// compileError reports whether err is a server's failure to compile the
// script: what Redis 6.2 answers to the #!lua line.
func compileError(err error) bool {
	return err != nil && strings.Contains(err.Error(), "Error compiling script")
}

// redetect reads the servers' version again, at most once a second,
// after a script failed to compile: New may not have reached them, or a
// master was replaced by an older server since. It runs within the
// failed call's context, which bounds it.
func (s *Store) redetect(ctx context.Context) {
	now := time.Now().UnixNano()
	last := s.detected.Load()
	if s.pinned || now-last < int64(time.Second) || !s.detected.CompareAndSwap(last, now) {
		return
	}
	_ = s.checkVersion(ctx, nil)
}
