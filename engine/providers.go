package engine

import (
	"context"
	"fmt"
	"sync"

	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/providers/daytona"
	"github.com/agentctl/agentctl/providers/docker"
	"github.com/agentctl/agentctl/providers/local"
	"github.com/agentctl/agentctl/providers/openai"
	"github.com/agentctl/agentctl/providers/scripted"
	"github.com/agentctl/agentctl/sandbox"
)

// providerSet builds each configured provider once, on first use, so a
// plan that touches no Docker sandbox never dials Docker.
type providerSet struct {
	mu        sync.Mutex
	models    map[string]model.Model
	sandboxes map[string]sandbox.Provider
}

func (e *Engine) provs() *providerSet {
	e.provOnce.Do(func() {
		e.providers = &providerSet{models: map[string]model.Model{}, sandboxes: map[string]sandbox.Provider{}}
	})
	return e.providers
}

// model returns the agent's model client and model name.
func (ps *providerSet) model(e *Engine, a *config.Agent) (model.Model, string, error) {
	addr := e.Config.ModelProvider(a)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if m, ok := ps.models[addr]; ok {
		return m, a.Model, nil
	}
	p := e.Config.Providers[providerKey(addr)]
	if p == nil {
		if addr == "provider.openai" {
			p = &config.Provider{Type: "openai", Addr: addr, OpenAI: &config.OpenAIProvider{}}
		} else {
			return nil, "", fmt.Errorf("agent %q: %s is not declared", a.Name, addr)
		}
	}
	var m model.Model
	switch {
	case p.Scripted != nil:
		scripts := map[string][]scripted.Reply{}
		for agent, replies := range p.Scripted.Scripts {
			for _, r := range replies {
				sr := scripted.Reply{Text: r.Text}
				for _, c := range r.Calls {
					sr.Calls = append(sr.Calls, scripted.Call{Name: c.Name, Arguments: c.Arguments})
				}
				scripts[agent] = append(scripts[agent], sr)
			}
		}
		m = scripted.New(scripts)
	case p.OpenAI != nil:
		c, err := openai.New(openai.Config{
			BaseURL:      p.OpenAI.BaseURL,
			APIKey:       p.OpenAI.APIKey,
			Organization: p.OpenAI.Organization,
			Project:      p.OpenAI.Project,
			API:          p.OpenAI.API,
			Timeout:      p.OpenAI.Timeout,
			MaxRetries:   p.OpenAI.MaxRetries,
			LookupEnv:    openai.EnvLookup(e.Environ),
		})
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", addr, err)
		}
		m = c
	default:
		return nil, "", fmt.Errorf("agent %q: %s is a %s provider, not a model provider", a.Name, addr, p.Type)
	}
	ps.models[addr] = m
	return m, a.Model, nil
}

// sandboxProvider returns the sandbox provider at addr.
func (ps *providerSet) sandboxProvider(ctx context.Context, e *Engine, addr string) (sandbox.Provider, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if p, ok := ps.sandboxes[addr]; ok {
		return p, nil
	}
	p := e.Config.Providers[providerKey(addr)]
	if p == nil {
		switch addr {
		case "provider.local":
			p = &config.Provider{Type: "local", Addr: addr, Local: &config.LocalProvider{}}
		case "provider.docker":
			p = &config.Provider{Type: "docker", Addr: addr, Docker: &config.DockerProvider{}}
		case "provider.daytona":
			p = &config.Provider{Type: "daytona", Addr: addr, Daytona: &config.DaytonaProvider{}}
		default:
			return nil, fmt.Errorf("%s is not declared", addr)
		}
	}
	var sp sandbox.Provider
	switch {
	case p.Local != nil:
		sp = local.New(local.Options{Isolation: p.Local.Isolation})
	case p.Docker != nil:
		d, err := docker.New(ctx, docker.Options{Host: p.Docker.Host, Environ: e.Environ, Progress: func(line string) {
			// Image pulls can take minutes: show their progress.
			e.emit(Event{Type: EventApplyProgress, Address: addr, Message: line})
		}})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", addr, err)
		}
		sp = d
	case p.Daytona != nil:
		d, err := daytona.New(daytona.Options{
			APIKey: p.Daytona.APIKey, JWTToken: p.Daytona.JWTToken, OrganizationID: p.Daytona.OrganizationID,
			APIURL: p.Daytona.APIURL, Target: p.Daytona.Target, Environ: e.Environ,
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", addr, err)
		}
		sp = d
	default:
		return nil, fmt.Errorf("%s is a %s provider, not a sandbox provider", addr, p.Type)
	}
	ps.sandboxes[addr] = sp
	return sp, nil
}
