package hosted

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// FirstBackoff and MaxBackoff bound the exponential backoff between
// attempts; MaxRetryAfter bounds how long a Retry-After header may make a
// client wait.
const (
	FirstBackoff  = 500 * time.Millisecond
	MaxBackoff    = 20 * time.Second
	MaxRetryAfter = 2 * time.Minute
)

// RetryWait says whether a failed answer is sent again and after how long:
// 429 and 503 always (the service did nothing), 500, 502 and 504 only for
// requests safe to repeat. A Retry-After header is honoured up to
// MaxRetryAfter; otherwise the wait is backoff with jitter.
func RetryWait(status int, h http.Header, idempotent bool, backoff time.Duration) (time.Duration, bool) {
	retry := false
	switch status {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		retry = true
	case http.StatusInternalServerError, http.StatusBadGateway, http.StatusGatewayTimeout:
		retry = idempotent
	}
	if !retry {
		return 0, false
	}
	if d, ok := RetryAfter(h.Get("Retry-After"), time.Now()); ok {
		return min(d, MaxRetryAfter), true
	}
	return Jitter(backoff), true
}

// NextBackoff doubles d up to MaxBackoff.
func NextBackoff(d time.Duration) time.Duration {
	return min(d*2, MaxBackoff)
}

// RetryAfter parses a Retry-After header (seconds or an HTTP date).
func RetryAfter(h string, now time.Time) (time.Duration, bool) {
	h = strings.TrimSpace(h)
	if h == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(h, 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(h); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// Jitter is a random duration between d/2 and d.
func Jitter(d time.Duration) time.Duration {
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}

// Sleep waits d or until ctx ends, whichever is first.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
