package httplimit_test

import (
	"net/http"
	"testing"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/httplimit"
	"github.com/slidelog/slidelog/core/slidelogtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// slidelogtest.ParseRateLimitHeaders reads what the engine writes, in
// both styles. (It lives here, where the engine's header writer is
// reachable through export_test.go.)
func TestParseRateLimitHeadersEngineOutput(t *testing.T) {
	minute := slidelog.Policy{Name: "per-minute", Limit: 10, Window: time.Minute}
	hour := slidelog.Policy{Name: `a "quoted", name`, Limit: 1000, Window: time.Hour}
	res := slidelog.Result{
		Allowed: true, Limit: 10, Remaining: 3, ResetAfter: 1500 * time.Millisecond,
		Policies: []slidelog.PolicyResult{
			{Policy: minute, Remaining: 3, ResetAfter: 1500 * time.Millisecond},
			{Policy: hour, Remaining: 990, ResetAfter: 59 * time.Minute},
		},
	}
	header := func(style httplimit.HeaderStyle, res slidelog.Result) http.Header {
		h := http.Header{}
		for _, f := range httplimit.RateLimitHeaders(style, res) {
			h.Add(f.Name, f.Value)
		}
		return h
	}

	got, err := slidelogtest.ParseRateLimitHeaders(header(httplimit.HeadersIETF, res))
	require.NoError(t, err)
	assert.Equal(t, []slidelogtest.PolicyHeaders{
		{Name: "per-minute", Limit: 10, Window: time.Minute, Known: true, Remaining: 3, Reset: 2 * time.Second},
		{Name: `a "quoted", name`, Limit: 1000, Window: time.Hour, Known: true, Remaining: 990, Reset: 59 * time.Minute},
	}, got.Policies)
	remaining, ok := got.Remaining()
	assert.True(t, ok)
	assert.Equal(t, 3, remaining)

	got, err = slidelogtest.ParseRateLimitHeaders(header(httplimit.HeadersLegacy, res))
	require.NoError(t, err)
	assert.Equal(t, []slidelogtest.PolicyHeaders{{Limit: 10, Known: true, Remaining: 3, Reset: 2 * time.Second}}, got.Policies)

	open := res
	open.Source = slidelog.SourceFailOpen
	got, err = slidelogtest.ParseRateLimitHeaders(header(httplimit.HeadersIETF, open))
	require.NoError(t, err)
	require.Len(t, got.Policies, 2)
	assert.False(t, got.Policies[0].Known || got.Policies[1].Known, "fail-open admission: got a known state, want none")
	_, ok = got.Remaining()
	assert.False(t, ok, "Remaining of a fail-open admission")

	got, err = slidelogtest.ParseRateLimitHeaders(http.Header{})
	require.NoError(t, err)
	assert.Equal(t, slidelogtest.RateLimitHeaders{}, got)
}
