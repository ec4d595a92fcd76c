package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/providers/registry"
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

// errNoRegistry is a programming error: the engine builds providers only
// through a registry, its own or the configuration's.
var errNoRegistry = errors.New("the engine has no provider registry")

// provider returns the configuration of the provider at addr with its
// type: the declared one, else the type's defaults for an unaliased
// address that was never declared.
func (e *Engine) provider(addr string) (*config.Provider, *registry.Type, error) {
	reg := e.Registry
	if reg == nil {
		reg = e.Config.Registry()
	}
	if reg == nil {
		return nil, nil, errNoRegistry
	}
	p := e.Config.Providers[providerKey(addr)]
	if p == nil {
		typ := providerKey(addr)
		if _, ok := reg.Lookup(typ); !ok {
			return nil, nil, fmt.Errorf("%s is not declared", addr)
		}
		settings, err := reg.Default(typ)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", addr, err)
		}
		p = &config.Provider{Type: typ, Addr: addr, Settings: settings}
	}
	t, ok := reg.Lookup(p.Type)
	if !ok {
		return nil, nil, fmt.Errorf("%s: there is no provider type %q", addr, p.Type)
	}
	return p, t, nil
}

// model returns the agent's model client and model name.
func (ps *providerSet) model(e *Engine, a *config.Agent) (model.Model, string, error) {
	addr := e.Config.ModelProvider(a)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if m, ok := ps.models[addr]; ok {
		return m, a.Model, nil
	}
	p, t, err := e.provider(addr)
	if err != nil {
		return nil, "", fmt.Errorf("agent %q: %w", a.Name, err)
	}
	if t.Role != registry.RoleModel {
		return nil, "", fmt.Errorf("agent %q: %s is a %s provider, not a model provider", a.Name, addr, p.Type)
	}
	m, err := t.NewModel(context.Background(), p.Settings, registry.Env{Environ: e.Environ})
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", addr, err)
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
	p, t, err := e.provider(addr)
	if err != nil {
		return nil, err
	}
	if t.Role != registry.RoleSandbox {
		return nil, fmt.Errorf("%s is a %s provider, not a sandbox provider", addr, p.Type)
	}
	sp, err := t.NewSandbox(ctx, p.Settings, registry.Env{Environ: e.Environ, Progress: func(line string) {
		// Image pulls can take minutes: show their progress.
		e.emit(Event{Type: EventApplyProgress, Address: addr, Message: line})
	}})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", addr, err)
	}
	ps.sandboxes[addr] = sp
	return sp, nil
}
