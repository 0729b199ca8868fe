package redisstore

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every command the scripts call has a probe in New's check, and the ACL
// lines of docs/operations.md allow every probed command (PEXPIRETIME
// only on the servers that have it).
func TestProbesCoverScriptsAndDocs(t *testing.T) {
	require.Contains(t, scriptCommands, "ZREMRANGEBYSCORE", "commands read from the scripts")
	probed := []string{waitProbe.name}
	for _, p := range probes {
		probed = append(probed, p.name)
	}
	for _, c := range scriptCommands {
		assert.Contains(t, probed, c, "the scripts call %s, which New does not probe: add it to probes", c)
	}
	doc, err := os.ReadFile("../../docs/operations.md")
	require.NoError(t, err)
	lines := 0
	for _, line := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(line, "ACL SETUSER limiter ") {
			continue
		}
		lines++
		words := strings.Fields(line)
		for _, c := range probed {
			if c == "PEXPIRETIME" && !slices.Contains(words, "+pexpiretime") {
				continue // the Redis 6.2 line
			}
			assert.Contains(t, words, "+"+strings.ToLower(c), "%s", line)
		}
	}
	assert.Equal(t, 2, lines, "ACL lines in docs/operations.md")
}
