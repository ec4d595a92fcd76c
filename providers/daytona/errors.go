package daytona

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

// APIError is a non-2xx answer from the Daytona API or a sandbox's toolbox,
// already turned into a message that names the sandbox and the operation
// and says how to fix it. It never contains the API key or a preview token.
type APIError struct {
	// Op is the operation, e.g. "create sandbox" or "upload file".
	Op string
	// Sandbox is the sandbox's configuration address when known, else its id.
	Sandbox string
	// Status is the HTTP status code.
	Status int
	// Message is the server's own message (scrubbed).
	Message string
	// Attempts is how many times the request was sent.
	Attempts int
}

// Error implements error.
func (e *APIError) Error() string {
	where := e.Op
	if e.Sandbox != "" {
		where += " (" + e.Sandbox + ")"
	}
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
		return fmt.Sprintf("%s: the Daytona API rejected the credentials (HTTP 401: %s); set DAYTONA_API_KEY to a valid API key (or DAYTONA_JWT_TOKEN together with DAYTONA_ORGANIZATION_ID), or check api_url/DAYTONA_API_URL", where, msg)
	case e.Status == http.StatusForbidden:
		return fmt.Sprintf("%s: access denied (HTTP 403: %s); the key lacks permission for this organization or resource: check its scopes, DAYTONA_ORGANIZATION_ID and your quota", where, msg)
	case e.Status == http.StatusNotFound:
		return fmt.Sprintf("%s: not found (HTTP 404: %s); the sandbox or path no longer exists (a gone sandbox is restored from its snapshot by the next apply)", where, msg)
	case e.Status == http.StatusConflict:
		return fmt.Sprintf("%s: conflict (HTTP 409: %s); the sandbox is busy changing state or the name is taken: wait for it to settle and run the command again", where, msg)
	case e.Status == http.StatusTooManyRequests:
		return fmt.Sprintf("%s: rate limited by Daytona (HTTP 429%s: %s); wait a little, lower -parallelism, or raise your plan's limits", where, tries, msg)
	case e.Status >= 500:
		return fmt.Sprintf("%s: Daytona server error (HTTP %d%s: %s); the service may be degraded: retry later", where, e.Status, tries, msg)
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

// IsNotFound reports whether err is a 404 from Daytona.
func IsNotFound(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

// statusOf returns the HTTP status of an APIError, or 0.
func statusOf(err error) int {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return 0
}

// serverMessage extracts the human part of an error body: Daytona answers
// {"statusCode":..,"message":..,"error":..}; the toolbox answers
// {"message":..} or plain text. The result is bounded and single-line.
func serverMessage(body []byte) string {
	var v struct {
		Message any    `json:"message"`
		Error   string `json:"error"`
	}
	msg := ""
	if json.Unmarshal(body, &v) == nil {
		switch m := v.Message.(type) {
		case string:
			msg = m
		case []any:
			parts := make([]string, 0, len(m))
			for _, p := range m {
				parts = append(parts, fmt.Sprint(p))
			}
			msg = strings.Join(parts, "; ")
		}
		if msg == "" {
			msg = v.Error
		}
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
		d := t.Sub(now)
		if d < 0 {
			d = 0
		}
		return d, true
	}
	return 0, false
}
