// Package hosted holds what the clients of hosted sandbox services (Daytona,
// E2B, Runloop) share: how a non-2xx answer becomes an error that names the
// operation and says what to do, and which answers are retried and when.
package hosted

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/agentctl/agentctl/sandbox"
)

// Hint is a service's words for one kind of failed answer: Lead says what
// happened ("access denied"), Fix, when set, what to do about it.
type Hint struct{ Lead, Fix string }

// Hints are a service's words for the statuses it explains; a status whose
// Hint has no Lead is reported as "request rejected".
type Hints struct {
	Unauthorized, Forbidden, NotFound, Conflict, RateLimited, ServerError Hint
}

// APIError is a non-2xx answer of a hosted service, turned into a message
// that names the operation and the sandbox and says what to do. It never
// holds credentials: Message is scrubbed by the client.
type APIError struct {
	// Op is the operation, e.g. "create sandbox".
	Op string
	// Target names the sandbox in messages ("sbx-1", "devbox dbx_1"); empty
	// when the call is about no one sandbox.
	Target string
	// Status is the HTTP status code.
	Status int
	// Message is the server's own message.
	Message string
	// Attempts is how many times the request was sent.
	Attempts int
	// Hints are the service's words; nil reports every status as rejected.
	Hints *Hints
}

// Error implements error.
func (e *APIError) Error() string {
	where := e.Op
	if e.Target != "" {
		where += " (" + e.Target + ")"
	}
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	tries := ""
	if e.Attempts > 1 {
		tries = fmt.Sprintf(" after %d attempts", e.Attempts)
	}
	h, counted := e.hint()
	if h.Lead == "" {
		h, counted = Hint{Lead: "request rejected"}, false
	}
	if !counted {
		tries = ""
	}
	fix := ""
	if h.Fix != "" {
		fix = "; " + h.Fix
	}
	return fmt.Sprintf("%s: %s (HTTP %d%s: %s)%s", where, h.Lead, e.Status, tries, msg, fix)
}

// hint is the Hint for e's status and whether its message counts attempts
// (only retried statuses do).
func (e *APIError) hint() (Hint, bool) {
	if e.Hints == nil {
		return Hint{}, false
	}
	switch {
	case e.Status == http.StatusUnauthorized:
		return e.Hints.Unauthorized, false
	case e.Status == http.StatusForbidden:
		return e.Hints.Forbidden, false
	case e.Status == http.StatusNotFound:
		return e.Hints.NotFound, false
	case e.Status == http.StatusConflict:
		return e.Hints.Conflict, false
	case e.Status == http.StatusTooManyRequests:
		return e.Hints.RateLimited, true
	case e.Status >= 500:
		return e.Hints.ServerError, true
	}
	return Hint{}, false
}

// Unwrap lets errors.Is(err, sandbox.ErrNotFound) recognize a 404.
func (e *APIError) Unwrap() error {
	if e.Status == http.StatusNotFound {
		return sandbox.ErrNotFound
	}
	return nil
}

// IsNotFound reports whether err holds a 404 answer.
func IsNotFound(err error) bool {
	return StatusOf(err) == http.StatusNotFound
}

// StatusOf is the HTTP status of an *APIError in err, else 0.
func StatusOf(err error) int {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return 0
}

// ServerMessage extracts the human part of an error body: {"message":..}
// (a string or a list of strings), {"error":..}, or the body as text. The
// result is on one line and at most 300 bytes long.
func ServerMessage(body []byte) string {
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

// Scrub replaces secret in s; secrets shorter than 4 bytes are left alone
// (replacing them would garble the message and reveal little).
func Scrub(s, secret string) string {
	if len(secret) >= 4 {
		s = strings.ReplaceAll(s, secret, "(sensitive)")
	}
	return s
}
