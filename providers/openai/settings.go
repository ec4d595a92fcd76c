package openai

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/providers/registry"
)

// ProviderSettings are the arguments of a provider "openai" block; empty
// ones come from the environment (see Config).
type ProviderSettings struct {
	BaseURL      string
	API          string // APIResponses (default) or APIChatCompletions
	APIKey       string // a credential: scrubbed from every output
	Organization string
	Project      string
	Timeout      time.Duration
	// MaxRetries is the retries after a turn's first attempt: nil gives
	// DefaultMaxRetries, 0 none.
	MaxRetries *int
	// Replay is a directory of recorded cassettes (agentctl apply
	// -record) to answer from instead of the network, relative to the
	// configuration's directory; "" calls the model.
	Replay string
}

var providerSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "base_url"}, {Name: "api"}, {Name: "organization"}, {Name: "project"},
	{Name: "api_key"}, {Name: "timeout"}, {Name: "max_retries"}, {Name: "replay"},
}}

// DecodeProvider decodes a provider "openai" block
// (registry.Type.DecodeProvider).
func DecodeProvider(body hcl.Body) (any, hcl.Diagnostics) {
	s := &ProviderSettings{API: APIResponses}
	content, diags := body.Content(providerSchema)
	attrs := content.Attributes
	registry.Attr(attrs, "base_url", &s.BaseURL, &diags)
	if registry.Attr(attrs, "api", &s.API, &diags) {
		if allowed := []string{APIResponses, APIChatCompletions}; !slices.Contains(allowed, s.API) {
			diags = append(diags, registry.Errorf(attrs["api"].Expr.Range(), "Invalid api", "api must be \"responses\" or \"chat_completions\", not %q.%s", s.API, registry.Suggest(s.API, allowed)))
		}
	}
	registry.Attr(attrs, "organization", &s.Organization, &diags)
	registry.Attr(attrs, "project", &s.Project, &diags)
	registry.Attr(attrs, "api_key", &s.APIKey, &diags)
	s.Timeout, _ = registry.Duration(attrs, "timeout", &diags)
	var retries int
	if registry.Attr(attrs, "max_retries", &retries, &diags) {
		if retries < 0 {
			diags = append(diags, registry.Errorf(attrs["max_retries"].Expr.Range(), "Invalid max_retries", "max_retries must be 0 or more, got %d: it counts the retries after a failed model call, 0 disables them, and leaving it out gives %d.", retries, DefaultMaxRetries))
		} else {
			s.MaxRetries = &retries
		}
	}
	if registry.Attr(attrs, "replay", &s.Replay, &diags) && s.Replay == "" {
		diags = append(diags, registry.Errorf(attrs["replay"].Expr.Range(), "Invalid replay", "replay names the directory of cassettes recorded with agentctl apply -record DIR, like replay = \"cassettes\"; it can't be empty. Leave replay out to call the model."))
	}
	return s, diags
}

// Config is the client configuration of these settings; settings left
// empty come from the environment through lookupEnv.
func (s *ProviderSettings) Config(lookupEnv func(string) (string, bool)) Config {
	retries := 0 // the default
	if s.MaxRetries != nil {
		retries = *s.MaxRetries
		if retries == 0 {
			retries = NoRetries
		}
	}
	return Config{
		BaseURL: s.BaseURL, API: s.API, APIKey: s.APIKey, Organization: s.Organization, Project: s.Project,
		Timeout: s.Timeout, MaxRetries: retries, LookupEnv: lookupEnv,
	}
}

var _ registry.SettingsSupport = (*ProviderSettings)(nil)

// Secrets implements registry.Secrets.
func (s *ProviderSettings) Secrets() []string { return []string{s.APIKey} }

// Fingerprint implements registry.Fingerprinter: the endpoint and API
// decide the answers; credentials, transport settings and replay (a
// replay answers as the recording did) don't.
func (s *ProviderSettings) Fingerprint(string) map[string]any {
	return map[string]any{"base_url": s.BaseURL, "api": s.API}
}

// Type is the openai provider type.
func Type() *registry.Type {
	return &registry.Type{
		Name: "openai", Role: registry.RoleModel, DecodeProvider: DecodeProvider, DecodeHostedTool: DecodeHostedTool,
		NewModel: func(_ context.Context, settings any, env registry.Env) (model.Model, error) {
			s, ok := settings.(*ProviderSettings)
			if !ok {
				return nil, fmt.Errorf("openai: provider settings are %T, not *openai.ProviderSettings", settings)
			}
			cfg := s.Config(EnvLookup(env.Environ))
			if err := transport(&cfg, s, env); err != nil {
				return nil, err
			}
			return New(cfg)
		},
	}
}

// transport builds the client's transport through env.Transport, the
// engine's record and replay (docs/openai-provider.md, "Record and
// replay"), handing it the provider's replay setting resolved against
// the configuration's directory.
func transport(cfg *Config, s *ProviderSettings, env registry.Env) error {
	dir := s.Replay
	if dir != "" && !filepath.IsAbs(dir) && env.Dir != "" {
		dir = filepath.Join(env.Dir, dir)
	}
	if env.Transport == nil {
		if dir != "" {
			return errors.New("replay: this provider was built without record and replay (registry.Env.Transport), so it cannot replay")
		}
		return nil
	}
	rt, replaying, err := env.Transport(nil, dir)
	if err != nil {
		return err
	}
	cfg.HTTPClient = &http.Client{Transport: rt}
	cfg.Replaying = replaying
	return nil
}
