package httplimit

import (
	"time"

	slidelog "github.com/slidelog/slidelog/core"
)

// NewRequest returns src as a Request with the default client-IP settings
// (socket address only, IPv6 by /64), for testing key functions.
func NewRequest(src Incoming) *Request { return &Request{Incoming: src} }

// RetryAfterSeconds is retryAfterSeconds.
func RetryAfterSeconds(d time.Duration) string { return retryAfterSeconds(d) }

// RateLimitHeaders returns the rate-limit header fields of style for res.
func RateLimitHeaders(style HeaderStyle, res slidelog.Result) []HeaderField {
	return appendRateLimitHeaders(nil, style, res, nil, nil)
}
