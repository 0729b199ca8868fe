package slidegrpc

// RetryAfterSeconds is retryAfterSeconds.
var RetryAfterSeconds = retryAfterSeconds
