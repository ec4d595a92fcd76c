package engine

import (
	"context"
	"errors"
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
// plan that touches no Docker sandbox never dials Docker. mu guards the
// maps only: a sandbox provider is built (Docker is dialed) outside it,
// so a slow or dead daemon holds up only the callers that need that
// provider.
type providerSet struct {
	mu        sync.Mutex
	models    map[string]model.Model
	sandboxes map[string]*sandboxEntry
}

// sandboxEntry is a sandbox provider being built; ready is closed once p
// or err is set. An entry whose build failed is removed, so a later call
// tries again.
type sandboxEntry struct {
	ready chan struct{}
	p     sandbox.Provider
	err   error
}

func (e *Engine) provs() *providerSet {
	e.provOnce.Do(func() {
		e.providers = &providerSet{models: map[string]model.Model{}, sandboxes: map[string]*sandboxEntry{}}
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

// sandboxProvider returns the sandbox provider at addr, building it on
// first use. Callers asking for a provider another caller is building
// wait for it, or for their own ctx; when that build ends with the
// builder's context, they try again themselves.
func (ps *providerSet) sandboxProvider(ctx context.Context, e *Engine, addr string) (sandbox.Provider, error) {
	ps.mu.Lock()
	for {
		ent, ok := ps.sandboxes[addr]
		if !ok {
			break
		}
		ps.mu.Unlock()
		select {
		case <-ent.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if ent.err == nil || !(errors.Is(ent.err, context.Canceled) || errors.Is(ent.err, context.DeadlineExceeded)) {
			return ent.p, ent.err
		}
		ps.mu.Lock()
	}
	ent := &sandboxEntry{ready: make(chan struct{})}
	ps.sandboxes[addr] = ent
	ps.mu.Unlock()
	ent.p, ent.err = newSandboxProvider(ctx, e, addr)
	if ent.err != nil {
		ps.mu.Lock()
		delete(ps.sandboxes, addr)
		ps.mu.Unlock()
	}
	close(ent.ready)
	return ent.p, ent.err
}

// newSandboxProvider builds the sandbox provider at addr.
func newSandboxProvider(ctx context.Context, e *Engine, addr string) (sandbox.Provider, error) {
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
	switch {
	case p.Local != nil:
		return local.New(local.Options{Isolation: p.Local.Isolation}), nil
	case p.Docker != nil:
		d, err := docker.New(ctx, docker.Options{Host: p.Docker.Host, Environ: e.Environ, Progress: func(line string) {
			// Image pulls can take minutes: show their progress.
			e.emit(Event{Type: EventApplyProgress, Address: addr, Message: line})
		}})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", addr, err)
		}
		return d, nil
	case p.Daytona != nil:
		d, err := daytona.New(daytona.Options{
			APIKey: p.Daytona.APIKey, JWTToken: p.Daytona.JWTToken, OrganizationID: p.Daytona.OrganizationID,
			APIURL: p.Daytona.APIURL, Target: p.Daytona.Target, Environ: e.Environ,
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", addr, err)
		}
		return d, nil
	default:
		return nil, fmt.Errorf("%s is a %s provider, not a sandbox provider", addr, p.Type)
	}
}
