package e2b

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentctl/agentctl/sandbox"
)

// APIError is a non-2xx answer of the E2B API, turned into a message that
// names the operation and the sandbox and says what to do. It never holds
// the API key.
type APIError struct {
	Op      string
	Sandbox string
	Status  int
	// Message is the server's own (the Error schema's message).
	Message string
	// Attempts is how many times the request was sent.
	Attempts int
}

// Error implements error.
func (e *APIError) Error() string {
	where := e.Op + inSandbox(e.Sandbox)
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	tries := ""
	if e.Attempts > 1 {
		tries = fmt.Sprintf(" after %d attempts", e.Attempts)
	}
	switch {
	case e.Status == http.StatusUnauthorized:
		return fmt.Sprintf("%s: E2B rejected the API key (HTTP 401: %s); set E2B_API_KEY to a valid key from the E2B dashboard", where, msg)
	case e.Status == http.StatusForbidden:
		return fmt.Sprintf("%s: access denied (HTTP 403: %s); the key's team may not use this template or sandbox", where, msg)
	case e.Status == http.StatusNotFound:
		return fmt.Sprintf("%s: not found (HTTP 404: %s); the sandbox was killed or reached its timeout, or the template does not exist", where, msg)
	case e.Status == http.StatusConflict:
		return fmt.Sprintf("%s: conflict (HTTP 409: %s); the sandbox is changing state: run the command again", where, msg)
	case e.Status == http.StatusTooManyRequests:
		return fmt.Sprintf("%s: rate limited by E2B (HTTP 429%s: %s); lower -parallelism or raise your plan's limits", where, tries, msg)
	case e.Status >= 500:
		return fmt.Sprintf("%s: E2B server error (HTTP %d%s: %s); retry later", where, e.Status, tries, msg)
	default:
		return fmt.Sprintf("%s: request rejected (HTTP %d: %s)", where, e.Status, msg)
	}
}

// Unwrap lets errors.Is(err, sandbox.ErrNotFound) recognize a 404.
func (e *APIError) Unwrap() error {
	if e.Status == http.StatusNotFound {
		return sandbox.ErrNotFound
	}
	return nil
}

// IsNotFound reports whether err is a 404 from E2B.
func IsNotFound(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

// statusOf is the HTTP status of an *APIError in err, else 0.
func statusOf(err error) int {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return 0
}

// serverMessage is the message of an Error body ({"code":..,"message":..})
// or the body itself, on one line and bounded.
func serverMessage(body []byte) string {
	var v struct {
		Message string `json:"message"`
	}
	msg := ""
	if json.Unmarshal(body, &v) == nil {
		msg = v.Message
	}
	if msg == "" {
		msg = string(body)
	}
	msg = strings.Join(strings.Fields(msg), " ")
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	return msg
}

// retryAfter parses a Retry-After header (seconds or an HTTP date).
func retryAfter(h string, now time.Time) (time.Duration, bool) {
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
