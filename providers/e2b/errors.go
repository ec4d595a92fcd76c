package e2b

import (
	"github.com/agentctl/agentctl/providers/internal/hosted"
)

// APIError is a non-2xx answer of the E2B API, turned into a message that
// names the operation and the sandbox and says what to do. It never holds
// the API key.
type APIError = hosted.APIError

// hints are E2B's words for the statuses it answers.
var hints = &hosted.Hints{
	Unauthorized: hosted.Hint{Lead: "E2B rejected the API key", Fix: "set E2B_API_KEY to a valid key from the E2B dashboard"},
	Forbidden:    hosted.Hint{Lead: "access denied", Fix: "the key's team may not use this template or sandbox"},
	NotFound:     hosted.Hint{Lead: "not found", Fix: "the sandbox was killed or reached its timeout, or the template does not exist"},
	Conflict:     hosted.Hint{Lead: "conflict", Fix: "the sandbox is changing state: run the command again"},
	RateLimited:  hosted.Hint{Lead: "rate limited by E2B", Fix: "lower -parallelism or raise your plan's limits"},
	ServerError:  hosted.Hint{Lead: "E2B server error", Fix: "retry later"},
}

// apiError is the error of a failed answer to op about sandbox.
func apiError(op, sandbox string, status int, msg string, attempts int) *APIError {
	return &APIError{Op: op, Target: sandbox, Status: status, Message: msg, Attempts: attempts, Hints: hints}
}

// IsNotFound reports whether err is a 404 from E2B.
func IsNotFound(err error) bool { return hosted.IsNotFound(err) }

// statusOf is the HTTP status of an *APIError in err, else 0.
func statusOf(err error) int { return hosted.StatusOf(err) }
