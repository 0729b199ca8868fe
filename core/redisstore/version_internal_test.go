package redisstore

import (
	"errors"
	"fmt"
	slidelog "github.com/slidelog/slidelog/core"
	"strings"
	"testing"
)

// The script variant for every server family and version the README
// names, and the ones it refuses: only Redis 7.0 runs here, so the
// detection logic is tested on INFO server replies.
func TestScriptVariant(t *testing.T) {
	for _, tc := range []struct {
		give       string // INFO server
		wantLegacy bool
		wantErr    error
	}{
		{give: "# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n"},
		{give: "# Server\r\nredis_version:7.2.4\r\n"},
		{give: "# Server\r\nredis_version:7.4.1\r\n"},
		{give: "# Server\r\nredis_version:8.0.2\r\n"},
		{give: "# Server\r\nredis_version:6.2.14\r\n", wantLegacy: true},
		{give: "# Server\r\nredis_version:6.2.0\r\n", wantLegacy: true},
		{give: "# Server\r\nredis_version:6.0.20\r\n", wantErr: ErrUnsupportedVersion},
		{give: "# Server\r\nredis_version:5.0.14\r\n", wantErr: ErrUnsupportedVersion},
		{give: "# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:7.2.5\r\n"},
		{give: "# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.1.0\r\n"},
		{give: "# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\n"},
		{give: "# Server\r\nredis_version:7.0.0\r\nserver_name:valkey\r\nvalkey_version:7.0.99\r\n", wantErr: ErrUnsupportedVersion},
		{give: "# Server\r\nredis_version:7.2\r\n"},
		{give: "# Server\r\nredis_mode:standalone\r\n", wantErr: slidelog.ErrUnavailable},
		{give: "# Server\r\nredis_version:seven\r\n", wantErr: slidelog.ErrUnavailable},
	} {
		v, err := parseServerVersion(tc.give)
		var legacy bool
		if err == nil {
			legacy, err = scriptVariant(v)
		}
		if tc.wantErr != nil {
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("%q: error %v, want %v", tc.give, err, tc.wantErr)
			}
			continue
		}
		if err != nil || legacy != tc.wantLegacy {
			t.Errorf("%q (%v): legacy %v, error %v; want legacy %v", tc.give, v, legacy, err, tc.wantLegacy)
		}
	}
}

func TestLegacyScriptIsTheScriptAfterItsGuard(t *testing.T) {
	if got := legacyScript.Hash() == script.Hash(); got {
		t.Fatalf("the legacy script has the script's hash: the #!lua line was not removed")
	}
	body, ok := strings.CutPrefix(scriptSource, "#!lua\n")
	if !ok {
		t.Fatalf("script.lua does not start with its #!lua line")
	}
	if strings.HasPrefix(legacySource, "#!") {
		t.Fatalf("legacy.lua starts with a #! line, which Redis 6.2 cannot parse")
	}
	if got, want := legacyScriptSource(), legacySource+body; got != want {
		t.Fatalf("the legacy script is not legacy.lua followed by the script without its #!lua line")
	}
}

func TestCompileErrorTriggersRedetection(t *testing.T) {
	// What Redis 6.2 answers to the #!lua line, as go-redis returns it.
	sixTwo := errors.New("ERR Error compiling script (new function): user_script:1: unexpected symbol near '#' ")
	for _, tc := range []struct {
		give error
		want bool
	}{
		{sixTwo, true},
		{fmt.Errorf("%w: %w", slidelog.ErrUnavailable, sixTwo), true},
		{errors.New("NOSCRIPT No matching script"), false},
		{errors.New("OOM command not allowed when used memory > 'maxmemory'"), false},
		{nil, false},
	} {
		if got := compileError(tc.give); got != tc.want {
			t.Errorf("compileError(%v) = %v, want %v", tc.give, got, tc.want)
		}
	}
}
