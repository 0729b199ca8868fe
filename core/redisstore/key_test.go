package redisstore_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/slidelog/slidelog/core/redisstore"
)

// hashTag returns the part of key Redis Cluster hashes: the text between
// the first '{' and the next '}', when non-empty.
func hashTag(key string) (string, bool) {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return "", false
	}
	end := strings.IndexByte(key[open+1:], '}')
	if end <= 0 {
		return "", false
	}
	return key[open+1 : open+1+end], true
}

// offlineClient is a client that never connects: enough for key tests.
func offlineClient(tb testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// offline lets New start on offlineClient, without logging about it.
func offline(opts ...redisstore.Option) []redisstore.Option {
	return append(opts, redisstore.WithStartUnreachable(), redisstore.WithLogger(slog.New(slog.DiscardHandler)))
}

func checkKeyShape(t *testing.T, store *redisstore.Store, prefix, namespace, identity string) string {
	t.Helper()
	key := store.LogKey(namespace, identity)
	if !strings.HasPrefix(key, prefix) {
		t.Fatalf("Key(%q) = %q, want prefix %q", identity, key, prefix)
	}
	tag, ok := hashTag(key)
	if !ok || len(tag) != 22 || strings.Count(key, "{") != 1 || strings.Count(key, "}") != 1 || !strings.HasSuffix(key, "}") {
		t.Fatalf("Key(%q) = %q, want %s{<22 base64url characters>}", identity, key, prefix)
	}
	for _, r := range tag {
		if (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') && r != '-' && r != '_' {
			t.Fatalf("Key(%q) tag %q has %q, want base64url only", identity, tag, r)
		}
	}
	return key
}

func FuzzRedisKey(f *testing.F) {
	for _, seed := range [][4]string{
		{"", "a", "", "b"}, {"", "{a}", "", "a"}, {"", "a:b", "", "a}:{b"}, {"", "", "", "\x00"}, {"", "\xff\xfe", "", "ключ"},
		{"", strings.Repeat("{", 300), "", strings.Repeat("}", 300)}, {"", "user:1", "", "user:1 "},
		{"ns", "x", "n", "sx"}, {"a\x00", "b", "a", "\x00b"}, {"p~", "k", "p~", "k"},
	} {
		f.Add(seed[0], seed[1], seed[2], seed[3])
	}
	const prefix = "app:rl:"
	store, err := redisstore.New(offlineClient(f), offline(redisstore.WithKeyPrefix(prefix), redisstore.WithKeySecret([]byte("fuzz")))...)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, nsA, a, nsB, b string) {
		ka := checkKeyShape(t, store, prefix, nsA, a)
		kb := checkKeyShape(t, store, prefix, nsB, b)
		if (ka == kb) != (nsA == nsB && a == b) {
			t.Fatalf("Key(%q, %q) = %q and Key(%q, %q) = %q: equal keys must mean equal namespaces and identities", nsA, a, ka, nsB, b, kb)
		}
		if store.LogKey(nsA, a) != ka {
			t.Fatalf("Key(%q, %q) is not stable", nsA, a)
		}
	})
}

func TestKeySecretChangesTheSlot(t *testing.T) {
	plain, err := redisstore.New(offlineClient(t), offline()...)
	if err != nil {
		t.Fatal(err)
	}
	secret, err := redisstore.New(offlineClient(t), offline(redisstore.WithKeySecret([]byte("s3cret")))...)
	if err != nil {
		t.Fatal(err)
	}
	if plain.LogKey("", "client") == secret.LogKey("", "client") {
		t.Fatalf("the key secret did not change the key of %q", "client")
	}
}

func TestNewValidation(t *testing.T) {
	if _, err := redisstore.New(nil); err != redisstore.ErrNilClient {
		t.Errorf("New(nil) error = %v, want ErrNilClient", err)
	}
	for _, give := range []string{"a{", "}", "{x}:"} {
		if _, err := redisstore.New(offlineClient(t), redisstore.WithKeyPrefix(give)); err == nil {
			t.Errorf("WithKeyPrefix(%q): no error, want ErrInvalidOption", give)
		}
	}
}
