package daytona

import (
	"github.com/agentctl/agentctl/providers/internal/hosted"
)

// APIError is a non-2xx answer from the Daytona API or a sandbox's toolbox,
// already turned into a message that names the sandbox and the operation
// and says how to fix it. It never contains the API key or a preview token.
type APIError = hosted.APIError

// hints are Daytona's words for the statuses it answers.
var hints = &hosted.Hints{
	Unauthorized: hosted.Hint{Lead: "the Daytona API rejected the credentials", Fix: "set DAYTONA_API_KEY to a valid API key (or DAYTONA_JWT_TOKEN together with DAYTONA_ORGANIZATION_ID), or check api_url/DAYTONA_API_URL"},
	Forbidden:    hosted.Hint{Lead: "access denied", Fix: "the key lacks permission for this organization or resource: check its scopes, DAYTONA_ORGANIZATION_ID and your quota"},
	NotFound:     hosted.Hint{Lead: "not found", Fix: "the sandbox or path no longer exists (a gone sandbox is restored from its snapshot by the next apply)"},
	Conflict:     hosted.Hint{Lead: "conflict", Fix: "the sandbox is busy changing state or the name is taken: wait for it to settle and run the command again"},
	RateLimited:  hosted.Hint{Lead: "rate limited by Daytona", Fix: "wait a little, lower -parallelism, or raise your plan's limits"},
	ServerError:  hosted.Hint{Lead: "Daytona server error", Fix: "the service may be degraded: retry later"},
}

// apiError is the error of a failed answer to op about sandbox.
func apiError(op, sandbox string, status int, msg string, attempts int) *APIError {
	return &APIError{Op: op, Target: sandbox, Status: status, Message: msg, Attempts: attempts, Hints: hints}
}

// IsNotFound reports whether err is a 404 from Daytona.
func IsNotFound(err error) bool { return hosted.IsNotFound(err) }

// statusOf returns the HTTP status of an APIError, or 0.
func statusOf(err error) int { return hosted.StatusOf(err) }
