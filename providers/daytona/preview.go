package daytona

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// PreviewLink is a port's preview URL with the token private previews
// need in the x-daytona-preview-token header. Never log Token.
type PreviewLink struct {
	URL   string
	Token string
}

// SignedPreviewLink is a preview URL with the token embedded; anyone who
// has it can reach the port until ExpiresAt. Never log it.
type SignedPreviewLink struct {
	SandboxID string
	Port      int
	URL       string
	Token     string
	ExpiresAt time.Time
}

// GetPreviewLink returns the preview URL and access token of a port.
func (s *Sandbox) GetPreviewLink(ctx context.Context, port int) (*PreviewLink, error) {
	var out struct {
		URL   string `json:"url"`
		Token string `json:"token"`
	}
	r := request{method: http.MethodGet, url: s.client.api("/sandbox/" + url.PathEscape(s.ID) + "/ports/" + strconv.Itoa(port) + "/preview-url"),
		op: fmt.Sprintf("get preview URL of port %d", port), sandbox: s.where(), idempotent: true}
	if err := s.client.doJSON(ctx, r, nil, &out); err != nil {
		return nil, err
	}
	return &PreviewLink{URL: out.URL, Token: out.Token}, nil
}

// GetSignedPreviewLink returns a signed preview URL valid for
// expiresInSeconds (the API's default is 60 seconds when 0).
func (s *Sandbox) GetSignedPreviewLink(ctx context.Context, port, expiresInSeconds int) (*SignedPreviewLink, error) {
	var out struct {
		SandboxID string `json:"sandboxId"`
		Port      int    `json:"port"`
		URL       string `json:"url"`
		Token     string `json:"token"`
	}
	q := url.Values{}
	if expiresInSeconds > 0 {
		q.Set("expiresInSeconds", strconv.Itoa(expiresInSeconds))
	}
	now := time.Now()
	r := request{method: http.MethodGet, url: s.client.api("/sandbox/" + url.PathEscape(s.ID) + "/ports/" + strconv.Itoa(port) + "/signed-preview-url"),
		query: q, op: fmt.Sprintf("get signed preview URL of port %d", port), sandbox: s.where(), idempotent: true}
	if err := s.client.doJSON(ctx, r, nil, &out); err != nil {
		return nil, err
	}
	ttl := expiresInSeconds
	if ttl <= 0 {
		ttl = 60
	}
	return &SignedPreviewLink{SandboxID: out.SandboxID, Port: out.Port, URL: out.URL, Token: out.Token, ExpiresAt: now.Add(time.Duration(ttl) * time.Second)}, nil
}
