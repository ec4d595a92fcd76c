package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/agentctl/agentctl/addrs"
	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/internal/cassette"
	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/providers/registry"
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
	// recorders record the exchanges of each model provider, by address,
	// under Engine.Record.
	recorders map[string]*cassette.Recorder
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

// model returns the agent's model client and model name in the run block
// named run ("" outside a run). Settings that differ for that run
// (registry.RunScoper) get a model of their own, built once per run
// block.
func (ps *providerSet) model(e *Engine, a *config.Agent, run string) (model.Model, string, error) {
	addr := e.Config.ModelProvider(a)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p, t, err := e.provider(addr)
	if err != nil {
		return nil, "", fmt.Errorf("agent %q: %w", a.Name, err)
	}
	if t.Role != registry.RoleModel {
		return nil, "", fmt.Errorf("agent %q: %s is a %s provider, not a model provider", a.Name, addr, p.Type)
	}
	key := addr
	settings, scoped := runSettings(p.Settings, run)
	if scoped {
		key = addr + " " + addrs.Run(run, nil).String()
	}
	if m, ok := ps.models[key]; ok {
		return m, a.Model, nil
	}
	env, err := ps.modelEnv(e, addr)
	if err != nil {
		return nil, "", err
	}
	m, err := t.NewModel(context.Background(), settings, env)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", addr, err)
	}
	ps.models[key] = m
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

// newSandboxProvider builds the sandbox provider at addr through its
// registry type.
func newSandboxProvider(ctx context.Context, e *Engine, addr string) (sandbox.Provider, error) {
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
	return sp, nil
}

// built reports whether the sandbox provider at addr has been built
// (successfully) by this engine.
func (ps *providerSet) built(addr string) bool {
	ps.mu.Lock()
	ent, ok := ps.sandboxes[addr]
	ps.mu.Unlock()
	if !ok {
		return false
	}
	select {
	case <-ent.ready:
		return ent.err == nil
	default:
		return false
	}
}
