package slidegrpc

import (
	"strconv"
	"time"
)

// RetryAfterSeconds is the retry-after metadata a denial with RetryAfter
// d carries: whole seconds, rounded up.
func RetryAfterSeconds(d time.Duration) string {
	if d <= 0 {
		return "0"
	}
	return strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10)
}
