package engine

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/agentctl/agentctl/providers/registry"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/state"
)

// findImport finds the existing sandbox id through the provider of the
// sandbox at addr and checks it against the configuration
// (sandbox.Importer); it changes nothing. Manifest users and groups and
// storage mounts, which agentctl sets up only in a sandbox it creates,
// cannot be imported.
func (e *Engine) findImport(ctx context.Context, lineage, addr, id string) (sandbox.Sandbox, sandbox.Provider, error) {
	sbc := e.Config.SandboxInstances[addr]
	if sbc == nil {
		return nil, nil, fmt.Errorf("%s is not a sandbox of the configuration: declare its sandbox block first.%s", addr, registry.Suggest(addr, slices.Sorted(maps.Keys(e.Config.SandboxInstances))))
	}
	if !sandboxAccounts(e.Config, sbc).Empty() {
		return nil, nil, fmt.Errorf("%s: cannot import %q: manifest.%s declares users and groups, which agentctl creates only in a sandbox it creates; let apply create the sandbox, or remove them", addr, id, sbc.Manifest)
	}
	if len(sandboxMounts(e.Config, sbc)) > 0 {
		return nil, nil, fmt.Errorf("%s: cannot import %q: its manifest mounts storage, which agentctl binds only into a sandbox it creates; let apply create the sandbox, or remove the mounts", addr, id)
	}
	prov, err := e.provs().sandboxProvider(ctx, e, sbc.Provider)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", addr, err)
	}
	imp, ok := prov.(sandbox.Importer)
	if !ok {
		return nil, nil, fmt.Errorf("%s: cannot import %q: %s (type %s) cannot adopt existing sandboxes", addr, id, sbc.Provider, prov.Kind())
	}
	sb, err := imp.Import(ctx, e.sandboxSpec(sbc, lineage), id)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: cannot import %q: %s: %w", addr, id, sbc.Provider, err)
	}
	return sb, prov, nil
}

// managedAs is the address under which st records the sandbox of kind
// with the provider's id, "" when none does.
func managedAs(st *state.State, kind, id string) string {
	for _, addr := range slices.Sorted(maps.Keys(st.Sandboxes)) {
		if ss := st.Sandboxes[addr]; ss.Kind == kind && ss.Session.ID == id && ss.Status != statusDeleted {
			return addr
		}
	}
	return ""
}

// planImport makes c the import of the existing sandbox id, after
// checking that it matches the configuration and that no sandbox of the
// state is it already.
func (e *Engine) planImport(ctx context.Context, st *state.State, c *Change, id string) error {
	sb, prov, err := e.findImport(ctx, st.Lineage, c.Address, id)
	if err != nil {
		return err
	}
	if other := managedAs(st, prov.Kind(), sb.ID()); other != "" {
		return fmt.Errorf("%s: cannot import %q: the state already manages it as %s", c.Address, id, other)
	}
	c.Action = ActionImport
	c.Attributes["id"] = sb.ID()
	c.Reasons = []string{fmt.Sprintf("adopts the existing sandbox %q; the manifest is written into it", id)}
	return nil
}

// Import adopts the existing sandbox id as the sandbox at addr, as
// agentctl import does: it checks it as plan does for an import block,
// records it in st with its session and writes the manifest into it.
func (e *Engine) Import(ctx context.Context, st *state.State, addr, id string) error {
	if ss := st.Sandboxes[addr]; ss != nil && ss.Status != statusDeleted {
		return fmt.Errorf("%s is already in the state (%s %s): agentctl state rm %s first to import another sandbox in its place", addr, ss.Kind, ss.Session.ID, addr)
	}
	sbc := e.Config.SandboxInstances[addr]
	c := &Change{Address: addr, Kind: KindSandbox, Attributes: map[string]string{}}
	if sbc != nil {
		c.Attributes["provider"] = sbc.Provider
	}
	if err := e.planImport(ctx, st, c, id); err != nil {
		return err
	}
	return e.Apply(ctx, st, &Plan{Changes: []*Change{c}, Lineage: st.Lineage, Serial: st.Serial})
}

// importSandbox adopts the sandbox the import change c names: checked
// again (the plan may have been saved), recorded in the state at once,
// started when it is stopped, then its manifest materialized.
func (a *applier) importSandbox(ctx context.Context, c *Change) (err error) {
	addr, id := c.Address, c.Attributes["id"]
	ctx, span := a.e.startSpan(ctx, "import_sandbox", attrAddress.String(addr))
	defer func() { endSpan(span, err) }()
	sb, prov, err := a.e.findImport(ctx, a.lineage(), addr, id)
	if err != nil {
		return err
	}
	a.mu.Lock()
	other := managedAs(a.st, prov.Kind(), sb.ID())
	a.mu.Unlock()
	if other != "" {
		return fmt.Errorf("%s: cannot import %q: the state already manages it as %s", addr, id, other)
	}
	status, err := sb.Refresh(ctx)
	if err != nil {
		return fmt.Errorf("%s: importing %q: %w", addr, id, err)
	}
	if status != sandbox.StatusRunning {
		if err := sb.Start(ctx); err != nil {
			return fmt.Errorf("%s: starting the imported sandbox %q: %w", addr, id, err)
		}
	}
	cfg := a.e.Config
	sbc := cfg.SandboxInstances[addr]
	if err := a.update(ctx, func(st *state.State) {
		now := time.Now().UTC()
		st.Sandboxes[addr] = &state.Sandbox{
			Address: addr, Provider: sbc.Provider, Kind: prov.Kind(), Session: sb.Session(), Status: statusRunning,
			ConfigDigest: sandboxConfigDigest(cfg, sbc), Attributes: sandboxAttributes(cfg, sbc, a.e.scrubber()),
			CreatedAt: now, UpdatedAt: now,
		}
		a.sbs[addr] = sb
		a.used[addr] = true
	}, state.SandboxRef(addr)); err != nil {
		return err
	}
	if err := a.materialize(ctx, addr, sb); err != nil {
		return err
	}
	return a.recordURLs(ctx, addr, sb)
}
