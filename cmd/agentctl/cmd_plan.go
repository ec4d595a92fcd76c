package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"

	"github.com/hashicorp/hcl/v2"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/agentctl/agentctl/cmd/agentctl/internal/views"
	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/engine"
	"github.com/agentctl/agentctl/internal/seal"
	"github.com/agentctl/agentctl/state"
	"github.com/agentctl/agentctl/state/statefile"
)

// exitChanges is -detailed-exitcode's "there are changes".
const exitChanges = 2

func planCommand() *command {
	return &command{
		Name:       "plan",
		ShortUsage: "agentctl plan [options] [PATH]",
		ShortHelp:  "Show what apply would change: sandboxes to create, runs to execute.",
		LongHelp: "  Compares the configuration in PATH with the state, after asking the\n" +
			"  providers whether the sandboxes still exist, and shows what apply would\n" +
			"  do and why. Nothing is changed.",
		Run: leaf(arguments.ParsePlan, (*meta).plan),
	}
}

func (m *meta) plan(ctx context.Context, args *arguments.Plan) error {
	m.noColor = args.NoColor
	b, err := m.openBackend(args.Path, args.Vars, args.State)
	if err != nil {
		return err
	}
	if err := b.takeLock(ctx, args.State, "plan"); err != nil {
		return err
	}
	defer b.unlock(ctx)
	st, err := b.store.Read(ctx)
	if err != nil {
		return err
	}
	view := views.NewPlan(args.ViewType, m.view())
	e := b.engine(args.Parallelism, nil, nil)
	p, err := e.Plan(ctx, st, engine.PlanOptions{Destroy: args.Destroy, Refresh: args.Refresh, Targets: args.Targets, Excludes: args.Excludes, Replace: args.Replace, RefreshOnly: args.RefreshOnly})
	if err != nil {
		m.printErr(err, b.cfg)
		return errDiagnostics
	}
	view.Plan(p)
	if conv := pendingConversion(ctx, b.store); conv != "" {
		m.view().Diagnostics(hcl.Diagnostics{{Severity: hcl.DiagWarning, Summary: "The state is not stored as the configuration's encryption says",
			Detail: fmt.Sprintf("The next apply %s the state, its journals and its snapshots, even when nothing else changes.", conv)}}, nil)
	}
	if args.Out != "" {
		if err := writePlanFile(args.Out, args.Path, b.cfg, e, p, state.EncryptionOf(b.store)); err != nil {
			return err
		}
		view.Saved(args.Out)
	}
	if args.DetailedExitcode && p.HasChanges() {
		return exitCode(exitChanges)
	}
	return nil
}

// writePlanFile saves p with the state's lineage and serial and the
// non-sensitive variable values, so apply can reload the same
// configuration and refuse the plan once the state moved on; encrypted
// with keys when they encrypt the state, as the plan shows what the
// state holds.
func writePlanFile(out, cfgPath string, cfg *config.Config, e *engine.Engine, p *engine.Plan, keys *seal.Keys) error {
	body, err := json.Marshal(p)
	if err != nil {
		return err
	}
	abs, err := filepath.Abs(cfgPath)
	if err != nil {
		return err
	}
	vars := map[string]json.RawMessage{}
	for name, v := range cfg.Variables {
		if v.Sensitive || v.Value.IsMarked() || !v.Value.IsWhollyKnown() {
			continue
		}
		b, err := ctyjson.Marshal(v.Value, v.Value.Type())
		if err != nil {
			continue
		}
		vars[name] = b
	}
	return statefile.WritePlanFile(out, statefile.PlanFile{
		AgentctlVersion: config.Version,
		Lineage:         p.Lineage,
		Serial:          p.Serial,
		ConfigDir:       abs,
		ConfigDigest:    e.ConfigDigest(),
		Vars:            vars,
		Plan:            body,
	}, keys)
}

// planVars turns a saved plan's variables back into -var arguments.
func planVars(pf *statefile.PlanFile) []string {
	names := make([]string, 0, len(pf.Vars))
	for n := range pf.Vars {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []string
	for _, n := range names {
		raw := pf.Vars[n]
		var s string
		if json.Unmarshal(raw, &s) == nil {
			out = append(out, n+"="+s)
		} else {
			out = append(out, n+"="+string(raw))
		}
	}
	return out
}

// pendingConversion is what the next write does to the stored state's
// encryption (state.EncodingReporter), or "" when nothing, or when the
// store cannot say.
func pendingConversion(ctx context.Context, store state.Store) string {
	r, ok := store.(state.EncodingReporter)
	if !ok {
		return ""
	}
	conv, err := r.PendingConversion(ctx)
	if err != nil {
		return ""
	}
	return conv
}
