package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/hashicorp/hcl/v2"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/agentctl/agentctl/cmd/agentctl/internal/views"
	"github.com/agentctl/agentctl/engine"
	"github.com/agentctl/agentctl/internal/seal"
	"github.com/agentctl/agentctl/internal/termtext"
	"github.com/agentctl/agentctl/sandbox/archive"
	"github.com/agentctl/agentctl/sandbox/hostfs"
	"github.com/agentctl/agentctl/state"
	"github.com/agentctl/agentctl/state/local"
	"github.com/agentctl/agentctl/state/statefile"
)

func applyCommand() *command {
	return &command{
		Name:       "apply",
		ShortUsage: "agentctl apply [options] [PATH | PLANFILE]",
		ShortHelp:  "Create sandboxes and execute the runs that are new, changed or interrupted.",
		LongHelp: "  Plans, asks for approval (unless -auto-approve), then creates and\n" +
			"  updates sandboxes and executes runs, checkpointing every step. Given a\n" +
			"  saved plan file, applies exactly that plan without asking.",
		Run: leaf(arguments.ParseApply, (*meta).apply),
	}
}

func destroyCommand() *command {
	return &command{
		Name:       "destroy",
		ShortUsage: "agentctl destroy [options] [PATH]",
		ShortHelp:  "Delete every sandbox, snapshot and run record of the configuration.",
		Run:        leaf(arguments.ParseDestroy, (*meta).apply),
	}
}

// readSavedPlan reads the saved plan at path: nil when path is a
// configuration rather than a saved plan. The plan is read with the
// encryption setting of the configuration it was made from (an
// encrypted plan needs its key; an unencrypted one is refused when the
// configuration encrypts).
func (m *meta) readSavedPlan(path string, vars arguments.Vars) (*statefile.PlanFile, error) {
	fi, err := os.Stat(path)
	if err != nil || fi.IsDir() || strings.HasSuffix(path, ".hcl") {
		return nil, nil
	}
	head, ok := statefile.ReadPlanHead(path)
	if !ok {
		return nil, nil
	}
	var keys *seal.Keys
	// The encryption block is decoded before variables, so the plan's
	// own (inside it) are not needed to find the key.
	if cfg, _ := m.loadConfig(head.ConfigDir, vars); cfg != nil {
		keys = cfg.Settings.Encryption.Keys()
	}
	return statefile.ReadPlanFile(path, keys)
}

// apply runs agentctl apply, or agentctl destroy when args.Destroy.
func (m *meta) apply(ctx context.Context, args *arguments.Apply) error {
	m.noColor = args.NoColor
	destroy := args.Destroy
	path, vars, autoApprove := args.Path, args.Vars, args.AutoApprove
	var saved *statefile.PlanFile
	if !destroy {
		pf, err := m.readSavedPlan(path, vars)
		if err != nil {
			return err
		}
		if pf != nil && args.RefreshOnly {
			return fmt.Errorf("-refresh-only cannot be used with a saved plan (%s): the plan says what it records; make it with agentctl plan -refresh-only -out=FILE", path)
		}
		if pf != nil {
			saved = pf
			path = pf.ConfigDir
			vars.Vars = append(planVars(pf), vars.Vars...)
			autoApprove = true
		}
	}
	approved, err := m.approvalBeforePlan(args, autoApprove, views.IsTerminal(os.Stdin))
	if err != nil {
		return err
	}
	b, err := m.openBackend(path, vars, args.State)
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
	defer b.unlock(ctx)
	if b.lock != nil {
		m.removeSnapshotTemps(b.dir)
	}
	st, err := b.store.Read(ctx)
	if err != nil {
		return err
	}

	view := views.NewApply(args.ViewType, m.view())
	// The summary counts what was done (events), not what was planned: a
	// run found unchanged once its upstream runs finished is not counted.
	var doneMu sync.Mutex
	var done engine.Summary
	events := func(ev engine.Event) {
		doneMu.Lock()
		done.Count(ev)
		doneMu.Unlock()
		view.Event(ev)
	}
	ctx, interrupt, stop := interrupts(ctx, func() {
		fmt.Fprintln(m.Stderr, "\nInterrupt received: stopping model calls in flight (they are made again on resume), letting tool calls in flight finish, and checkpointing. Press Ctrl-C again to stop at once.")
	})
	defer stop()
	e := b.engine(args.Parallelism, events, interrupt)
	e.Record = args.Record
	if args.Input && args.ViewType != arguments.ViewJSON && views.IsTerminal(os.Stdin) {
		e.Approver = &terminalApprover{m: m}
	}

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
		p, err = e.Plan(ctx, st, engine.PlanOptions{Destroy: destroy, Refresh: args.Refresh, Targets: args.Targets, Excludes: args.Excludes, Replace: args.Replace, Apply: true, RefreshOnly: args.RefreshOnly})
		if err != nil {
			m.printErr(err, b.cfg)
			return errDiagnostics
		}
		view.Plan(p)
		if !p.HasChanges() {
			conv := pendingConversion(ctx, b.store)
			if !destroy && (e.RefreshOutputs(st) || conv != "") {
				if err := b.store.Write(ctx, st); err != nil {
					return err
				}
			}
			if conv != "" {
				m.view().Diagnostics(hcl.Diagnostics{{Severity: hcl.DiagWarning, Summary: "The state was converted",
					Detail: fmt.Sprintf("The state, its journals and its snapshots were written again, as the configuration's encryption says (the write %s them); nothing else changed.", conv)}}, nil)
			}
			view.Unchanged(st.Outputs)
			return nil
		}
		if !approved && !m.confirm(destroy, p.RefreshOnly) {
			fmt.Fprintf(m.Stderr, "\n%s cancelled.\n", capitalizeWord(op))
			return exitCode(exitError)
		}
	}
	view.Applying()
	applyErr := e.Apply(ctx, st, p)
	destroyed := destroy || p.Destroy
	if destroyed && applyErr == nil && len(st.Sandboxes) == 0 && len(st.Runs) == 0 && len(st.Chats) == 0 {
		// Only a destroy that left nothing (not one limited by -target)
		// removes the leftovers of every object.
		applyErr = cleanStateDir(b.dir, st.Lineage)
	}
	if !destroyed {
		m.warnOrphans(ctx, e, st, view)
	}
	if applyErr != nil {
		view.Failed(applyErr)
		m.printErr(applyErr, b.cfg)
		return errDiagnostics
	}
	doneMu.Lock()
	defer doneMu.Unlock()
	view.Applied(done, destroyed, st.Outputs)
	return nil
}

func capitalizeWord(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// approvalBeforePlan settles, before anything is planned or locked, how
// an apply or destroy gets its "yes": -auto-approve or a saved plan
// approve it. With -json (the question would land in the JSON stream) or
// -input=false (which asks nothing) it is refused, as Terraform does. On
// a terminal, the question follows the plan (approved false). Off one (a
// pipe, a file, /dev/null) nobody would see a question, so none is
// printed: the answer is read now, "yes" approves, another answer
// cancels, and no answer is an error saying what to add.
func (m *meta) approvalBeforePlan(args *arguments.Apply, autoApprove, terminal bool) (approved bool, err error) {
	if autoApprove {
		return true, nil
	}
	cmd, fix := "apply", "add -auto-approve, or apply a saved plan (agentctl plan -out=FILE, then agentctl apply FILE)"
	if args.Destroy {
		cmd, fix = "destroy", "add -auto-approve"
	}
	switch {
	case args.ViewType == arguments.ViewJSON:
		return false, fmt.Errorf("%s -json cannot ask for approval: %s", cmd, fix)
	case !args.Destroy && !args.Input:
		return false, fmt.Errorf("%s -input=false cannot ask for approval: %s", cmd, fix)
	case terminal:
		return false, nil
	}
	line, err := m.stdinReader().ReadString('\n')
	answer := strings.TrimSpace(line)
	switch {
	case err != nil && !errors.Is(err, io.EOF):
		return false, fmt.Errorf("reading the %s's approval from standard input: %w", cmd, err)
	case answer == "yes":
		return true, nil
	case answer == "":
		return false, fmt.Errorf("%s cannot ask for approval: standard input is not a terminal (a pipe, a file or /dev/null) and gave no answer; %s", cmd, fix)
	}
	fmt.Fprintf(m.Stderr, "\n%s cancelled: standard input answered %q; only \"yes\" approves.\n", capitalizeWord(cmd), answer)
	return false, exitCode(exitError)
}

// confirm asks for "yes" on standard input, as Terraform does.
func (m *meta) confirm(destroy, refreshOnly bool) bool {
	switch {
	case refreshOnly:
		fmt.Fprint(m.Stdout, "\nWould you like to update the agentctl state to reflect these detected changes?\n  agentctl will write these changes to the state without changing any sandbox or executing any run.\n  There is no undo. Only 'yes' will be accepted to confirm.\n\n  Enter a value: ")
	case destroy:
		fmt.Fprint(m.Stdout, "\nDo you really want to destroy all sandboxes and runs?\n  agentctl will delete every sandbox and snapshot of this configuration.\n  There is no undo. Only 'yes' will be accepted to confirm.\n\n  Enter a value: ")
	default:
		fmt.Fprint(m.Stdout, "\nDo you want to perform these actions?\n  agentctl will perform the actions described above.\n  Only 'yes' will be accepted to approve.\n\n  Enter a value: ")
	}
	line, err := m.stdinReader().ReadString('\n')
	if err != nil && line == "" {
		fmt.Fprintln(m.Stdout)
		return false
	}
	return strings.TrimSpace(line) == "yes"
}

// removeSnapshotTemps removes the temporary files of snapshots that a
// crash interrupted. The caller holds the state lock, so no snapshot is
// being written.
func (m *meta) removeSnapshotTemps(dir *local.Dir) {
	removed, err := archive.RemoveSnapshotTemps(dir.Abs("snapshots"))
	if len(removed) > 0 {
		m.log.Debug("removed the temporary files of interrupted snapshots", "files", removed)
	}
	if err != nil {
		fmt.Fprintf(m.Stderr, "Warning: %s\n", termtext.Printable(err.Error()))
	}
}

// cleanStateDir removes, after a destroy that left nothing, what a crash
// may have left of the state of lineage in the state directory: the
// journals and snapshots named for its lineage (state.ScopedName), however
// deep; then the journals, snapshots and sandboxes directories if nothing
// else is in them. Other state files given with -state share the
// directory: their files, their sandboxes' directories, and files named
// before names carried the lineage, stay.
func cleanStateDir(dir *local.Dir, lineage string) error {
	var errs []error
	for _, sub := range []string{"journals", "snapshots"} {
		ents, err := os.ReadDir(dir.Abs(sub))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
		for _, e := range ents {
			if !state.ScopedTo(e.Name(), lineage) {
				continue
			}
			if err := hostfs.RemoveAll(filepath.Join(dir.Abs(sub), e.Name())); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, sub := range []string{"journals", "snapshots", "sandboxes"} {
		if err := os.Remove(dir.Abs(sub)); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EEXIST) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// warnOrphans warns, once per apply, about the orphans of the state's
// lineage that the providers this apply used can list cheaply (on this
// machine: local, Docker): sandboxes created for this configuration
// that no state records. Remote providers are not asked (agentctl query
// asks every provider).
func (m *meta) warnOrphans(ctx context.Context, e *engine.Engine, st *state.State, view views.Apply) {
	res, err := e.Query(ctx, []*state.State{st}, engine.QueryOptions{CheapOnly: true})
	if err != nil {
		view.Warning(fmt.Sprintf("Could not look for orphaned sandboxes: %v; agentctl query asks again.", err))
		return
	}
	if orphans := res.Orphans(); len(orphans) > 0 {
		view.Warning(fmt.Sprintf("%d %s of this configuration that no state records (an apply stopped while creating %s, or %s record was removed); agentctl query lists %s, agentctl query -reap deletes %s.",
			len(orphans), plural(len(orphans), "sandbox was found", "sandboxes were found"), plural(len(orphans), "it", "them"), plural(len(orphans), "its", "their"), plural(len(orphans), "it", "them"), plural(len(orphans), "it", "them")))
	}
}
