// Package openai is the "openai" model provider: it implements model.Model
// on github.com/openai/openai-go/v3, with the Responses API by default and
// Chat Completions for OpenAI-compatible servers.
//
// Every turn replays the full input (store=false plus encrypted reasoning
// content) rather than chaining previous_response_id: the conversation the
// runtime checkpoints is then all the state there is, so a run resumes
// from its checkpoint against any server, and nothing is kept on the
// provider side.
package openai

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/agentctl/agentctl/internal/cassette"
	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/providers/registry"
)

// API names.
const (
	APIResponses       = "responses"
	APIChatCompletions = "chat_completions"
)

// Defaults.
const (
	DefaultBaseURL    = "https://api.openai.com/v1"
	DefaultMaxRetries = 3
	DefaultTimeout    = 10 * time.Minute
	// NoRetries is the Config.MaxRetries that disables retries (0 gives
	// DefaultMaxRetries).
	NoRetries = -1
	// maxServerDelay is the longest wait an error status may ask for
	// (Retry-After); one that asks for more gets its error back at once.
	maxServerDelay = 2 * time.Minute
)

// Config configures a Client.
type Config struct {
	// BaseURL defaults to OPENAI_BASE_URL, then DefaultBaseURL.
	BaseURL string
	// APIKey defaults to OPENAI_API_KEY. It is handed to the HTTP client
	// and never kept, logged or put in an error.
	APIKey string
	// Organization and Project default to OPENAI_ORG_ID and
	// OPENAI_PROJECT_ID.
	Organization string
	Project      string
	// API is "responses" (default) or "chat_completions".
	API string
	// Timeout bounds one HTTP request including its streamed body
	// (default 10 minutes); a request that times out is retried.
	Timeout time.Duration
	// MaxRetries is the number of retries after the first attempt: 0
	// gives DefaultMaxRetries, NoRetries (or any negative value) none.
	MaxRetries int
	// HTTPClient replaces the default HTTP client (tests; the engine's
	// record and replay, registry.Env.Transport).
	HTTPClient *http.Client
	// LookupEnv reads the environment (os.LookupEnv in production, a map
	// in tests); nil means no environment.
	LookupEnv func(key string) (string, bool)
	// Replaying says HTTPClient answers every request from a recorded
	// cassette instead of the network: no API key is needed, and a
	// request the cassette does not hold fails the call with its
	// cassette.MissError.
	Replaying bool
	// RetryBaseDelay is the first delay of the exponential backoff
	// between retries (default 500ms). An error status that says how
	// long to wait (Retry-After) is followed instead.
	RetryBaseDelay time.Duration
}

// EnvLookup adapts an os.Environ-style list to Config.LookupEnv
// (registry.LookupEnv).
func EnvLookup(environ []string) func(string) (string, bool) {
	return func(k string) (string, bool) { return registry.LookupEnv(environ, k) }
}

// Client is a configured OpenAI model provider; it is safe for concurrent
// use.
type Client struct {
	api        string
	baseURL    string
	timeout    time.Duration
	maxRetries int
	baseDelay  time.Duration
	responses  responses.ResponseService
	chat       oai.ChatCompletionService
	// noEncrypted holds the models that refused
	// include=["reasoning.encrypted_content"] (non-reasoning models).
	noEncrypted sync.Map
	// redact removes the API key from text that came back from the
	// server, so it cannot leak into an error.
	redact func(string) string
	// replaying says requests are answered from a cassette: a request it
	// does not hold fails the call with the cassette's MissError.
	replaying bool
}

var _ model.Model = (*Client)(nil)

// New validates cfg and returns a Client. Its errors do not name the
// provider: the caller prefixes the provider's address (provider.openai),
// as the engine does, so messages read "provider.openai: no API key: ...".
func New(cfg Config) (*Client, error) {
	env := cfg.LookupEnv
	if env == nil {
		env = func(string) (string, bool) { return "", false }
	}
	fromEnv := func(v, key string) string {
		if v != "" {
			return v
		}
		s, _ := env(key)
		return strings.TrimSpace(s)
	}
	key := fromEnv(cfg.APIKey, "OPENAI_API_KEY")
	if key == "" && cfg.Replaying {
		// Nothing reaches a server: no key is needed or sent anywhere.
		key = "replay"
	}
	if key == "" {
		return nil, errors.New(`no API key: set OPENAI_API_KEY in the environment (for a local OpenAI-compatible server that needs none, set it to any placeholder such as "none")`)
	}
	baseURL := strings.TrimRight(fromEnv(cfg.BaseURL, "OPENAI_BASE_URL"), "/")
	if baseURL == "" {
		baseURL = DefaultBaseURL
	}
	if !strings.HasPrefix(baseURL, "http://") && !strings.HasPrefix(baseURL, "https://") {
		return nil, fmt.Errorf("base URL %q must start with http:// or https:// (set base_url or OPENAI_BASE_URL)", baseURL)
	}
	api := cfg.API
	switch api {
	case "":
		api = APIResponses
	case APIResponses, APIChatCompletions:
	default:
		return nil, fmt.Errorf("api %q is not supported: use %q (default) or %q", api, APIResponses, APIChatCompletions)
	}
	c := &Client{
		api:        api,
		baseURL:    baseURL,
		timeout:    cfg.Timeout,
		maxRetries: cfg.MaxRetries,
		baseDelay:  cfg.RetryBaseDelay,
		redact:     redactor(key),
		replaying:  cfg.Replaying,
	}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	switch {
	case c.maxRetries == 0:
		c.maxRetries = DefaultMaxRetries
	case c.maxRetries < 0:
		c.maxRetries = 0
	}
	if c.baseDelay <= 0 {
		c.baseDelay = 500 * time.Millisecond
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	// The services are built directly (not through openai.NewClient) so
	// that no ambient OPENAI_* variable is read behind LookupEnv's back.
	// Respond makes every retry itself, so it can say what it waits for.
	opts := []option.RequestOption{
		option.WithBaseURL(baseURL + "/"),
		option.WithAPIKey(key),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0),
		option.WithRequestTimeout(c.timeout),
		option.WithMiddleware(countAttempts),
	}
	if org := fromEnv(cfg.Organization, "OPENAI_ORG_ID"); org != "" {
		opts = append(opts, option.WithOrganization(org))
	}
	if proj := fromEnv(cfg.Project, "OPENAI_PROJECT_ID"); proj != "" {
		opts = append(opts, option.WithProject(proj))
	}
	c.responses = responses.NewResponseService(opts...)
	c.chat = oai.NewChatCompletionService(opts...)
	return c, nil
}

// API reports which API the client speaks.
func (c *Client) API() string { return c.api }

// CompactsServerSide implements model.ServerCompactor: the Responses API
// compacts the context itself; Chat Completions has no compaction, so the
// agent loop compacts client-side.
func (c *Client) CompactsServerSide() bool { return c.api == APIResponses }

// Respond runs one turn. HTTP error statuses 408, 409, 429 and 5xx,
// connection errors, a request that times out and a stream that breaks
// off before the response completed are retried (nothing of an attempt
// is committed before it completes), up to MaxRetries times, after the
// wait the server asks for (retry-after-ms, Retry-After) or an
// exponential backoff. Each wait is announced to sink first
// (model.EventRetry).
func (c *Client) Respond(ctx context.Context, req *model.Request, sink func(model.Event)) (*model.Response, error) {
	if req == nil {
		return nil, errors.New("nil model request")
	}
	if req.Model == "" {
		return nil, errors.New("no model name: set model in the agent block")
	}
	if sink == nil {
		sink = func(model.Event) {}
	}
	tally := &attemptTally{}
	ctx = context.WithValue(ctx, tallyKey{}, tally)
	missed := func() error { return nil }
	if c.replaying {
		ctx, missed = cassette.WithMissSlot(ctx)
	}
	for attempt := 0; ; attempt++ {
		var resp *model.Response
		var err error
		tally.opened.Store(false)
		if c.api == APIChatCompletions {
			resp, err = c.chatOnce(ctx, req, sink)
		} else {
			resp, err = c.responsesOnce(ctx, req, sink)
		}
		if err == nil {
			return resp, nil
		}
		if miss := missed(); miss != nil {
			return nil, miss
		}
		if ctx.Err() != nil {
			return nil, c.wrap(req, tally, ctx.Err())
		}
		after, ok := retryable(err, tally)
		var delay time.Duration
		if ok {
			delay, ok = c.retryDelay(err, attempt)
		}
		if !ok || attempt >= c.maxRetries {
			return nil, c.wrap(req, tally, err)
		}
		sink(model.Event{Type: model.EventRetry, Delay: delay, After: after})
		if err := sleep(ctx, delay); err != nil {
			return nil, c.wrap(req, tally, err)
		}
	}
}

// permanentError marks failures that retrying cannot fix (bad requests we
// built, undecodable replies).
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

func permanent(err error) error { return &permanentError{err} }

// errIncomplete is a stream that ended before response.completed.
var errIncomplete = errors.New("the response stream ended before the response completed")

// errFailed is a response the server reported failed in its stream.
var errFailed = errors.New("the response failed")

// retryable reports whether err may go away on a retry, and what failed
// in the words of a retry notice: the HTTP status ("429"), "a timeout",
// "a connection error", "a broken stream" (an accepted request's stream
// ended early) or "a failed response" (the server's error event). A bad request we built, an undecodable reply and an error status
// that retrying cannot fix are not retried.
func retryable(err error, tally *attemptTally) (string, bool) {
	var apiErr *oai.Error
	var p *permanentError
	var urlErr *url.Error
	switch {
	case errors.As(err, &p):
		return "", false
	case errors.As(err, &apiErr):
		return strconv.Itoa(apiErr.StatusCode), retryableStatus(apiErr)
	case errors.Is(err, errFailed):
		return "a failed response", true
	case errors.Is(err, context.DeadlineExceeded):
		return "a timeout", true
	case tally.opened.Load():
		return "a broken stream", true
	case errors.As(err, &urlErr):
		return "a connection error", true
	}
	return "", false
}

// retryableStatus reports whether an error status may go away: 408, 409,
// 429 and 5xx, unless the server says otherwise (x-should-retry).
func retryableStatus(e *oai.Error) bool {
	if e.Response != nil {
		switch e.Response.Header.Get("x-should-retry") {
		case "true":
			return true
		case "false":
			return false
		}
	}
	s := e.StatusCode
	return s == http.StatusRequestTimeout || s == http.StatusConflict || s == http.StatusTooManyRequests || s >= 500
}

// retryDelay is how long to wait before retrying after err: what an
// error status asks for (retry-after-ms, then Retry-After in seconds or
// as an HTTP date), else the backoff of attempt. A status asking for more
// than maxServerDelay is not retried.
func (c *Client) retryDelay(err error, attempt int) (time.Duration, bool) {
	var apiErr *oai.Error
	if errors.As(err, &apiErr) && apiErr.Response != nil {
		if d, ok := serverDelay(apiErr.Response.Header, time.Now()); ok {
			return d, d <= maxServerDelay
		}
	}
	return c.backoff(attempt), true
}

// serverDelay is the wait h asks for, if it says one.
func serverDelay(h http.Header, now time.Time) (time.Duration, bool) {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 && !math.IsInf(ms, 0) {
			return time.Duration(min(ms, float64(time.Hour/time.Millisecond)) * float64(time.Millisecond)), true
		}
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0, false
	}
	if sec, err := strconv.ParseFloat(v, 64); err == nil && sec >= 0 && !math.IsInf(sec, 0) {
		return time.Duration(min(sec, float64(time.Hour/time.Second)) * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

func (c *Client) backoff(attempt int) time.Duration {
	d := c.baseDelay << min(attempt, 6)
	if d > 8*time.Second {
		d = 8 * time.Second
	}
	return d - time.Duration(rand.Int64N(int64(d)/4+1))
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Error is a model API failure that survived the retries. It carries no
// request or headers, so it cannot leak the API key.
type Error struct {
	API      string
	Model    string
	Attempts int
	// StatusCode, RequestID, Type, Code and Message are set when the
	// server answered with an error status.
	StatusCode int
	RequestID  string
	Type       string
	Code       string
	Message    string
	// Err is the underlying transport or context error, if any.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "openai %s API, model %q: ", strings.ReplaceAll(e.API, "_", " "), e.Model)
	if e.StatusCode != 0 {
		fmt.Fprintf(&b, "HTTP %d %s", e.StatusCode, http.StatusText(e.StatusCode))
		if e.RequestID != "" {
			fmt.Fprintf(&b, " (request id %s)", e.RequestID)
		}
		if e.Message != "" {
			fmt.Fprintf(&b, ": %s", e.Message)
		}
	} else if e.Err != nil {
		b.WriteString(e.Err.Error())
	}
	fmt.Fprintf(&b, " (after %d attempt%s)", e.Attempts, plural(e.Attempts))
	if hint := e.hint(); hint != "" {
		b.WriteString("; " + hint)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Temporary reports whether a later retry (a resumed run) may succeed.
func (e *Error) Temporary() bool {
	if e.StatusCode != 0 {
		return e.StatusCode == 408 || e.StatusCode == 409 || e.StatusCode == 429 || e.StatusCode >= 500
	}
	var p *permanentError
	return !errors.As(e.Err, &p)
}

// ModelUnavailable implements model.Unavailable: after this error an
// agent's model_fallback tries its next model. The set
// (docs/openai-provider.md, "Model fallback"): the model does not exist
// (HTTP 404, or the error code model_not_found), rate limits and quota
// (HTTP 429), server errors and overload (HTTP 5xx), and a response the
// server failed in its stream with a server error or rate limit; each
// after this provider's own retries, for the statuses it retries. Bad
// requests, credentials, timeouts and connection errors are not: another
// model would fare no better.
func (e *Error) ModelUnavailable() bool {
	switch {
	case e.Code == "model_not_found":
		return true
	case e.StatusCode != 0:
		return e.StatusCode == http.StatusNotFound || e.StatusCode == http.StatusTooManyRequests || e.StatusCode >= 500
	case errors.Is(e.Err, errFailed):
		var p *permanentError
		return !errors.As(e.Err, &p)
	}
	return false
}

var _ model.Unavailable = (*Error)(nil)

func (e *Error) hint() string {
	switch {
	case e.StatusCode == 401:
		return "check OPENAI_API_KEY"
	case e.StatusCode == 403:
		return "check the key's organization and project access to this model"
	case e.StatusCode == 404:
		return "check the model name and base URL"
	case e.StatusCode == 429:
		return "rate limited or out of quota; resume the run later"
	case e.StatusCode >= 500 || (e.StatusCode == 0 && e.Temporary()):
		return "the run can be resumed once the service recovers"
	}
	return ""
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// attemptTally counts the HTTP requests of one Respond call and notes whether the current
// attempt got a successful answer (so that a later failure happened
// mid-stream).
type attemptTally struct {
	n      atomic.Int32
	opened atomic.Bool
}

type tallyKey struct{}

func countAttempts(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	t, ok := req.Context().Value(tallyKey{}).(*attemptTally)
	if ok {
		t.n.Add(1)
	}
	resp, err := next(req)
	if ok && err == nil && resp != nil && resp.StatusCode < 300 {
		t.opened.Store(true)
	}
	return resp, err
}

// wrap turns err into an *Error with no trace of the key.
func (c *Client) wrap(req *model.Request, tally *attemptTally, err error) error {
	e := &Error{API: c.api, Model: req.Model, Attempts: int(tally.n.Load())}
	var apiErr *oai.Error
	if errors.As(err, &apiErr) {
		e.StatusCode = apiErr.StatusCode
		e.Type = apiErr.Type
		e.Code = apiErr.Code
		e.Message = c.redact(apiErr.Message)
		if apiErr.Response != nil {
			e.RequestID = apiErr.Response.Header.Get("x-request-id")
		}
		// The openai-go error holds the request (with its Authorization
		// header), so it is not wrapped.
		return e
	}
	e.Err = &redactedError{msg: c.redact(err.Error()), err: err}
	return e
}

// redactedError is an error whose message was scrubbed of the key; it
// still unwraps to the original for errors.Is (context.DeadlineExceeded).
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

var keyLike = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\bsk-[A-Za-z0-9_*\-]{4,}`) })

// redactor returns a function that removes key, and anything shaped like
// an OpenAI key (servers echo masked keys in 401 messages), from s.
func redactor(key string) func(string) string {
	return func(s string) string {
		if key != "" {
			s = strings.ReplaceAll(s, key, "[redacted]")
		}
		return keyLike().ReplaceAllString(s, "sk-[redacted]")
	}
}
