package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/agentctl/agentctl/cmd/agentctl/internal/views"
	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/engine"
	"github.com/agentctl/agentctl/internal/termtext"
	"github.com/agentctl/agentctl/sandbox/archive"
	"github.com/agentctl/agentctl/sandbox/hostfs"
	"github.com/agentctl/agentctl/state"
)

func applyCommand(m *meta) *ffcli.Command {
	args, fs := arguments.NewOperation("apply", m.Stderr)
	return &ffcli.Command{
		Name:       "apply",
		ShortUsage: "agentctl apply [options] [PATH | PLANFILE]",
		ShortHelp:  "Create sandboxes and execute the runs that are new, changed or interrupted.",
		LongHelp: "  Plans, asks for approval (unless -auto-approve), then creates and\n" +
			"  updates sandboxes and executes runs, checkpointing every step. Given a\n" +
			"  saved plan file, applies exactly that plan without asking.",
		FlagSet: fs,
		Exec: func(ctx context.Context, rest []string) error {
			if err := args.Finish(fs, rest); err != nil {
				return err
			}
			m.noColor = args.NoColor
			return m.apply(ctx, args, false)
		},
	}
}

func destroyCommand(m *meta) *ffcli.Command {
	args, fs := arguments.NewOperation("destroy", m.Stderr)
	return &ffcli.Command{
		Name:       "destroy",
		ShortUsage: "agentctl destroy [options] [PATH]",
		ShortHelp:  "Delete every sandbox, snapshot and run record of the configuration.",
		FlagSet:    fs,
		Exec: func(ctx context.Context, rest []string) error {
			if err := args.Finish(fs, rest); err != nil {
				return err
			}
			m.noColor = args.NoColor
			args.Destroy = true
			return m.apply(ctx, args, true)
		},
	}
}

// isPlanFile reports whether path is a saved plan rather than a
// configuration.
func isPlanFile(path string) (*state.PlanFile, bool) {
	fi, err := os.Stat(path)
	if err != nil || fi.IsDir() || strings.HasSuffix(path, ".hcl") {
		return nil, false
	}
	pf, err := state.ReadPlanFile(path)
	if err != nil {
		return nil, false
	}
	return pf, true
}

func (m *meta) apply(ctx context.Context, args *arguments.Operation, destroy bool) error {
	var saved *state.PlanFile
	if !destroy {
		if pf, ok := isPlanFile(args.Path); ok {
			saved = pf
			args.Path = pf.ConfigDir
			args.Vars.Vars = append(planVars(pf), args.Vars.Vars...)
			args.AutoApprove = true
		}
	}
	b, err := m.openBackend(args.Path, args.Vars, args.State)
	if err != nil {
		return err
	}
	op := "apply"
	if destroy {
		op = "destroy"
	}
	if err := b.takeLock(ctx, args.State, op); err != nil {
		return err
	}
	defer b.unlock()
	if b.lock != nil {
		m.removeSnapshotTemps(b.dir)
	}
	st, err := b.dir.Read()
	if err != nil {
		return err
	}

	var jv *views.JSON
	var hv *views.Apply
	var events func(engine.Event)
	if args.JSON {
		jv = views.NewJSON(m.Stdout, config.Version)
		events = jv.Event
	} else {
		hv = views.NewApply(m.Stdout, m.colors(args.NoColor))
		events = hv.Event
	}
	// The summary counts what was done (events), not what was planned: a
	// run found unchanged once its upstream runs finished is not counted.
	var doneMu sync.Mutex
	var done engine.Summary
	view := events
	events = func(ev engine.Event) {
		doneMu.Lock()
		done.Count(ev)
		doneMu.Unlock()
		view(ev)
	}
	ctx, interrupt, stop := interrupts(ctx, func() {
		fmt.Fprintln(m.Stderr, "\nInterrupt received: stopping model calls in flight (they are made again on resume), letting tool calls in flight finish, and checkpointing. Press Ctrl-C again to stop at once.")
	})
	defer stop()
	e := b.engine(args.Parallelism, events, interrupt)

	var p *engine.Plan
	if saved != nil {
		if err := saved.CheckFresh(st); err != nil {
			return err
		}
		if saved.ConfigDigest != e.ConfigDigest() {
			return fmt.Errorf("saved plan is stale: the configuration in %s changed since the plan was made; run agentctl plan again", saved.ConfigDir)
		}
		p = &engine.Plan{}
		if err := json.Unmarshal(saved.Plan, p); err != nil {
			return fmt.Errorf("reading the saved plan: %w", err)
		}
	} else {
		p, err = e.Plan(ctx, st, engine.PlanOptions{Destroy: destroy, Refresh: args.Refresh, Targets: args.Targets, Replace: args.Replace})
		if err != nil {
			m.printErr(err, b.cfg)
			return errDiagnostics
		}
		if jv != nil {
			jv.PlanJSON(p)
		} else {
			views.Plan(m.Stdout, p, m.colors(args.NoColor))
		}
		if !p.HasChanges() {
			if !destroy && e.RefreshOutputs(st) {
				if err := b.dir.Write(st); err != nil {
					return err
				}
			}
			if jv == nil {
				m.printOutputs(st)
			}
			return nil
		}
		if !args.AutoApprove {
			if !m.confirm(destroy) {
				fmt.Fprintf(m.Stderr, "\n%s cancelled.\n", capitalizeWord(op))
				return exitCode(exitError)
			}
		}
	}
	if jv == nil {
		fmt.Fprintln(m.Stdout)
	}
	applyErr := e.Apply(ctx, st, p)
	if (destroy || p.Destroy) && applyErr == nil && len(st.Sandboxes) == 0 && len(st.Runs) == 0 {
		// Only a destroy that left nothing (not one limited by -target)
		// removes the leftovers of every object.
		applyErr = cleanStateDir(b.dir)
	}
	doneMu.Lock()
	msg := done.ApplyMessage(destroy || p.Destroy)
	doneMu.Unlock()
	if jv != nil {
		if applyErr != nil {
			jv.Emit(map[string]any{"type": "diagnostic", "severity": "error", "summary": applyErr.Error()})
		} else {
			jv.Emit(map[string]any{"type": "apply_summary", "message": msg, "changes": done.Counts()})
			jv.Emit(map[string]any{"type": "outputs", "outputs": st.Outputs})
		}
	}
	if applyErr != nil {
		m.printErr(applyErr, b.cfg)
		return errDiagnostics
	}
	if jv == nil {
		fmt.Fprintf(m.Stdout, "\n%s\n", msg)
		if !destroy && !p.Destroy {
			m.printOutputs(st)
		}
	}
	return nil
}

func capitalizeWord(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// confirm asks for "yes" on standard input, as Terraform does.
func (m *meta) confirm(destroy bool) bool {
	if destroy {
		fmt.Fprint(m.Stdout, "\nDo you really want to destroy all sandboxes and runs?\n  agentctl will delete every sandbox and snapshot of this configuration.\n  There is no undo. Only 'yes' will be accepted to confirm.\n\n  Enter a value: ")
	} else {
		fmt.Fprint(m.Stdout, "\nDo you want to perform these actions?\n  agentctl will perform the actions described above.\n  Only 'yes' will be accepted to approve.\n\n  Enter a value: ")
	}
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil && line == "" {
		fmt.Fprintln(m.Stdout)
		return false
	}
	return strings.TrimSpace(line) == "yes"
}

// printOutputs prints the root outputs after an apply.
func (m *meta) printOutputs(st *state.State) {
	if len(st.Outputs) == 0 {
		return
	}
	fmt.Fprintln(m.Stdout, "\nOutputs:")
	names := make([]string, 0, len(st.Outputs))
	for n := range st.Outputs {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(m.Stdout)
	for _, n := range names {
		o := st.Outputs[n]
		if o.Sensitive {
			fmt.Fprintf(m.Stdout, "%s = <sensitive>\n", n)
			continue
		}
		fmt.Fprintf(m.Stdout, "%s = %s\n", n, renderJSONValue(o.Value))
	}
}

// renderJSONValue renders a value for a person: a string as an HCL-style
// string (heredoc when it has several lines), anything else as indented
// JSON, with control and format characters shown escaped (the value may
// hold model or tool output). Programs read -raw and -json instead.
func renderJSONValue(raw json.RawMessage) string {
	return termtext.Printable(jsonValueText(raw))
}

func jsonValueText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if strings.Contains(strings.TrimRight(s, "\n"), "\n") {
			return "<<EOT\n" + strings.TrimRight(s, "\n") + "\nEOT"
		}
		b, _ := json.Marshal(s)
		return string(b)
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

// removeSnapshotTemps removes the temporary files of snapshots that a
// crash interrupted. The caller holds the state lock, so no snapshot is
// being written.
func (m *meta) removeSnapshotTemps(dir *state.Dir) {
	removed, err := archive.RemoveSnapshotTemps(dir.Abs("snapshots"))
	if len(removed) > 0 {
		m.log.Debug("removed the temporary files of interrupted snapshots", "files", removed)
	}
	if err != nil {
		fmt.Fprintf(m.Stderr, "Warning: %s\n", termtext.Printable(err.Error()))
	}
}

// cleanStateDir removes the journals and snapshots left after a destroy,
// however deep the trees in them.
func cleanStateDir(dir *state.Dir) error {
	var errs []error
	for _, sub := range []string{"journals", "snapshots", "sandboxes"} {
		if err := hostfs.RemoveAll(dir.Abs(sub)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
