package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/graph"
	"github.com/agentctl/agentctl/internal/digest"
	"github.com/agentctl/agentctl/internal/vcs"
	"github.com/agentctl/agentctl/providers/registry"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/archive"
	"github.com/agentctl/agentctl/sandbox/manifest"
	"github.com/agentctl/agentctl/state"
)

// applier carries one apply: the state being updated (guarded by mu and
// written after every node) and the open sandboxes.
type applier struct {
	e   *Engine
	p   *Plan
	mu  sync.Mutex
	st  *state.State
	sbs map[string]sandbox.Sandbox // open sandboxes by address
	// used records sandboxes this apply started or used, for on_exit.
	used map[string]bool
	// snapshotted records sandboxes this apply snapshotted (guarded by
	// mu): their snapshot holds their workspace, for on_exit.
	snapshotted map[string]bool
	// snapMu serializes restores and snapshots of each sandbox
	// (lockSandbox): runs sharing a sandbox must not restore it twice,
	// and the snapshot digest recorded must be the file's on disk.
	snapMu map[string]*sync.Mutex
	// commit is the commit of the configuration's git checkout, for
	// every run's provenance (gitCommit): looked up once (a git process),
	// concurrently with the walk, and waited for by the first run that
	// records it.
	commit func() string
	// asking counts the questions to a reviewer under way (asker); no
	// progress lines are printed meanwhile.
	asking atomic.Int32
	// memErrs are memory failures of completed runs: they fail the apply
	// at its end without holding back the runs that depend on them.
	memErrs []error
}

// lineage is the state's lineage, which is set before an applier exists
// and which no update changes (so it is read without mu). Files named
// for it (state.ScopedName) are this state's alone.
func (a *applier) lineage() string { return a.st.Lineage }

// gitCommit is the configuration's git commit ("" outside a checkout, or
// for an applier that looked none up).
func (a *applier) gitCommit() string {
	if a.commit == nil {
		return ""
	}
	return a.commit()
}

// digests is the algorithm of the state's content digests, which is
// fixed when the state is created and changes only once a destroy has
// emptied it (adoptBLAKE3, after every node): read without mu, as
// lineage.
func (a *applier) digests() digest.Algorithm { return a.st.Digests() }

// Apply carries out p against st, writing st after every node. It returns
// the first error; the results of nodes that succeeded are kept.
func (e *Engine) Apply(ctx context.Context, st *state.State, p *Plan) (err error) {
	ctx, span := e.startSpan(ctx, "apply", attrDestroy.Bool(p.Destroy))
	defer func() { endSpan(span, err) }()
	// Whatever the apply did, the mounts of sandboxes it removed go too.
	defer func() { err = errors.Join(err, e.sweepMounts(context.WithoutCancel(ctx), st)) }()
	return e.apply(ctx, st, p)
}

func (e *Engine) apply(ctx context.Context, st *state.State, p *Plan) error {
	if p.Lineage != "" && (p.Lineage != st.Lineage || p.Serial != st.Serial) {
		return fmt.Errorf("saved plan is stale: the state changed since the plan was made (lineage %s serial %d, now lineage %s serial %d); run agentctl plan again", p.Lineage, p.Serial, st.Lineage, st.Serial)
	}
	if p.RefreshOnly {
		return e.applyRefreshOnly(ctx, st, p)
	}
	a := &applier{e: e, p: p, st: st, sbs: map[string]sandbox.Sandbox{}, used: map[string]bool{}, snapshotted: map[string]bool{}, snapMu: map[string]*sync.Mutex{}}
	if p.HasChanges() {
		commit := make(chan string, 1)
		go func() { commit <- vcs.GitCommit(ctx, e.Config.Dir) }()
		a.commit = sync.OnceValue(func() string { return <-commit })
		defer a.commit() // the lookup ends with the apply
	}
	if st.AgentctlVersion == "" || st.AgentctlVersion != e.Version {
		st.AgentctlVersion = e.Version
	}
	if st.Serial == 0 && p.HasChanges() {
		// Providers label what they create with the lineage; persist it
		// before the first create, so a sandbox whose creation a crash
		// interrupts carries a lineage the next apply knows and can clean
		// up, rather than one that was never written.
		if err := a.update(ctx, func(*state.State) {}); err != nil {
			return err
		}
	}
	g := graph.New()
	for _, c := range p.Changes {
		g.AddNode(c.Address)
	}
	if dg, diags := e.Config.DependencyGraph(); !diags.HasErrors() && dg != nil {
		for _, c := range p.Changes {
			for _, d := range dg.DependenciesOf(c.Address) {
				if p.Change(d) != nil {
					g.AddEdge(c.Address, d)
				}
			}
		}
	}
	errs := g.Walk(ctx, e.parallelism(), a.node)
	e.reportWaiting(g, p, errs)
	all := walkErrors(p, errs)
	if err := a.finish(ctx); err != nil {
		all = append(all, err)
	}
	if p.Destroy && len(all) == 0 {
		if err := a.adoptBLAKE3(ctx); err != nil {
			all = append(all, err)
		}
	}
	all = append(all, a.memErrs...)
	return errors.Join(all...)
}

// node applies the change at addr, one node of the walk, and reports it
// (EventApplyStart, then complete, errored or interrupted).
func (a *applier) node(ctx context.Context, addr string) error {
	e := a.e
	c := a.p.Change(addr)
	if c.Action != ActionNoop && e.interrupted() {
		// After an interrupt nothing new starts; the next apply does it.
		return errNotStarted
	}
	var err error
	start := time.Now()
	if c.Action != ActionNoop {
		e.emit(Event{Type: EventApplyStart, Address: addr, Action: c.Action})
	}
	switch c.Kind {
	case KindSandbox:
		err = a.sandboxNode(ctx, c)
	case KindChat:
		err = a.forgetChat(ctx, addr)
	default:
		err = a.tracedRunNode(ctx, c)
	}
	err = e.scrubErr(err)
	if errors.Is(err, errUnchanged) {
		e.emit(Event{Type: EventApplyComplete, Address: addr, Action: ActionNoop, Message: err.Error(), Elapsed: time.Since(start)})
		return nil
	}
	if errors.Is(err, errRunAwaiting) {
		// Reported (EventApprovalRequired) once the state recorded it;
		// the runs that depend on it wait with it.
		return err
	}
	if errors.Is(err, errRunInterrupted) {
		e.emit(Event{Type: EventApplyInterrupted, Address: addr, Action: c.Action, Message: err.Error(), Elapsed: time.Since(start)})
		return err
	}
	if err != nil {
		e.emit(Event{Type: EventApplyErrored, Address: addr, Action: c.Action, Message: err.Error(), Elapsed: time.Since(start)})
		return err
	}
	if c.Action != ActionNoop {
		e.emit(Event{Type: EventApplyComplete, Address: addr, Action: c.Action, Elapsed: time.Since(start)})
	}
	return nil
}

// walkErrors are the errors of the walk that fail the apply, in the
// plan's order: the nodes' own (not those skipped because a dependency
// failed, nor runs awaiting approval), and one naming the nodes an
// interrupt kept from starting.
func walkErrors(p *Plan, errs map[string]error) []error {
	var all []error
	var notStarted []string
	for _, c := range p.Changes {
		err := errs[c.Address]
		switch {
		case errors.Is(err, errNotStarted):
			notStarted = append(notStarted, c.Address)
		case errors.Is(err, errRunAwaiting):
		case err != nil && !errors.Is(err, graph.ErrSkipped):
			all = append(all, err)
		}
	}
	if len(notStarted) > 0 {
		all = append(all, fmt.Errorf("apply interrupted before %s started; run agentctl apply again to carry on", strings.Join(notStarted, ", ")))
	}
	return all
}

// adoptBLAKE3 moves a state that keeps SHA-256 content digests (one
// created before BLAKE3) to BLAKE3 once a destroy has emptied it: with no
// sandbox and no run left, no recorded digest can seem changed. The state
// is written whole (its format becomes 2, as a new state's).
func (a *applier) adoptBLAKE3(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.st.Digests() != digest.SHA256 || len(a.st.Sandboxes) > 0 || len(a.st.Runs) > 0 {
		return nil
	}
	a.st.DigestAlgorithm = digest.BLAKE3
	if err := a.e.State.Write(context.WithoutCancel(ctx), a.st); err != nil {
		a.st.DigestAlgorithm = ""
		return fmt.Errorf("writing the emptied state with BLAKE3 digests: %w", err)
	}
	return nil
}

// update changes the state with fn and records the change durably: fn
// changes the objects refs name and no other (the state log records just
// those; AGENTCTL_STATE_VERIFY=1, set by the tests, checks it). The
// record is made even when ctx is cancelled: an interrupted apply
// records where it stopped.
func (a *applier) update(ctx context.Context, fn func(st *state.State), refs ...state.Ref) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	fn(a.st)
	return a.e.State.Append(context.WithoutCancel(ctx), a.st, refs...)
}

// progress reports "Still ..." every interval until stop is called.
func (a *applier) progress(addr string, action Action) (stop func()) {
	interval := a.e.ProgressInterval
	if interval <= 0 {
		interval = 10 * time.Second
	}
	done := make(chan struct{})
	start := time.Now()
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if a.asking.Load() > 0 {
					continue // a reviewer is answering a question
				}
				a.e.emit(Event{Type: EventApplyProgress, Address: addr, Action: action, Elapsed: time.Since(start).Round(time.Second)})
			}
		}
	}()
	return func() { close(done) }
}

func (a *applier) sandboxNode(ctx context.Context, c *Change) error {
	defer a.progress(c.Address, c.Action)()
	switch c.Action {
	case ActionNoop:
		return nil
	case ActionDelete:
		return a.deleteSandbox(ctx, c.Address)
	case ActionReplace:
		if err := a.deleteSandbox(ctx, c.Address); err != nil {
			return err
		}
		return a.createSandbox(ctx, c.Address, false)
	case ActionCreate:
		return a.createSandbox(ctx, c.Address, false)
	case ActionImport:
		return a.importSandbox(ctx, c)
	case ActionRestore:
		return a.restoreSandbox(ctx, c.Address)
	case ActionUpdate:
		sb, err := a.open(ctx, c.Address)
		if err != nil {
			return fmt.Errorf("%s: %w", c.Address, err)
		}
		return a.materialize(ctx, c.Address, sb)
	}
	return fmt.Errorf("%s: unknown action %s", c.Address, c.Action)
}

func (a *applier) open(ctx context.Context, addr string) (sandbox.Sandbox, error) {
	a.mu.Lock()
	if sb, ok := a.sbs[addr]; ok {
		a.mu.Unlock()
		return sb, nil
	}
	a.mu.Unlock()
	sb, err := a.e.openSandbox(ctx, a.st, addr)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	a.sbs[addr] = sb
	a.mu.Unlock()
	return sb, nil
}

// restoreSandbox recreates a sandbox from its latest snapshot. A sandbox
// whose previous restore did not finish is deleted first (its workspace
// holds an unknown part of the snapshot) and restored from scratch.
func (a *applier) restoreSandbox(ctx context.Context, addr string) error {
	a.mu.Lock()
	ss := a.st.Sandboxes[addr]
	var prev state.Sandbox
	if ss != nil {
		prev = *ss
	}
	a.mu.Unlock()
	if ss == nil {
		return a.createSandbox(ctx, addr, true)
	}
	if err := a.e.checkSnapshot(ctx, addr, &prev); err != nil {
		return err
	}
	if prev.RestorePending != nil && prev.Status != statusDeleted {
		sb, err := a.open(ctx, addr)
		if err != nil && !errors.Is(err, sandbox.ErrNotFound) {
			return fmt.Errorf("%s: removing the sandbox whose restore did not finish: %w", addr, err)
		}
		if sb != nil {
			if err := sb.Delete(ctx); err != nil {
				return fmt.Errorf("%s: removing the sandbox whose restore did not finish: %w", addr, err)
			}
		}
		a.mu.Lock()
		delete(a.sbs, addr)
		a.mu.Unlock()
	}
	return a.createSandbox(ctx, addr, true)
}

// restoreSource is what a restore of addr starts from: the sandbox as
// the state records it and, when it has a snapshot (checked to be there),
// the restore that is pending until the snapshot is unpacked and the
// manifest materialized. Nothing is created when there is nothing to
// restore from.
func (a *applier) restoreSource(ctx context.Context, addr string) (*state.Sandbox, *state.RestorePending, error) {
	a.mu.Lock()
	var prev *state.Sandbox
	if ss := a.st.Sandboxes[addr]; ss != nil {
		c := *ss
		prev = &c
	}
	a.mu.Unlock()
	if prev == nil || prev.Snapshot == "" {
		return prev, nil, nil
	}
	if err := a.e.checkSnapshot(ctx, addr, prev); err != nil {
		return nil, nil, err
	}
	pending := &state.RestorePending{ManifestDigest: prev.ManifestDigest, EntryDigests: prev.EntryDigests, StartedAt: time.Now().UTC()}
	if p := prev.RestorePending; p != nil {
		pending.ManifestDigest, pending.EntryDigests = p.ManifestDigest, p.EntryDigests
	}
	return prev, pending, nil
}

// unpackSnapshot fetches prev's snapshot and unpacks it into sb.
func (a *applier) unpackSnapshot(ctx context.Context, addr string, sb sandbox.Sandbox, prev *state.Sandbox) error {
	if err := a.e.State.FetchSnapshot(ctx, prev.Snapshot); err != nil {
		return fmt.Errorf("%s: fetching snapshot %s: %w", addr, prev.Snapshot, err)
	}
	if err := archive.RestoreSnapshotWith(ctx, sb, a.e.State.Abs(prev.Snapshot), prev.SnapshotDigest, state.EncryptionOf(a.e.State).Key()); err != nil {
		return fmt.Errorf("%s: restoring snapshot %s: %w", addr, a.e.State.Abs(prev.Snapshot), err)
	}
	return nil
}

// createSandbox creates the sandbox, records it in state at once (so it is
// never left untracked), then restores its snapshot (restore) and
// materializes its manifest. A restore is marked in the state
// (RestorePending) until the snapshot is unpacked and the manifest
// materialized; only then does the sandbox get the snapshot's digests.
func (a *applier) createSandbox(ctx context.Context, addr string, restore bool) (err error) {
	cfg := a.e.Config
	sbc := cfg.SandboxInstances[addr]
	name := "create_sandbox"
	if restore {
		name = "restore_sandbox"
	}
	ctx, span := a.e.startSpan(ctx, name, attrAddress.String(addr), attrProvider.String(sbc.Provider))
	defer func() { endSpan(span, err) }()
	prov, err := a.e.provs().sandboxProvider(ctx, a.e, sbc.Provider)
	if err != nil {
		return fmt.Errorf("%s: %w", addr, err)
	}
	spec := a.e.sandboxSpec(sbc, a.lineage())
	var prev *state.Sandbox
	var pending *state.RestorePending
	if restore {
		if prev, pending, err = a.restoreSource(ctx, addr); err != nil {
			return err
		}
	}
	image := ""
	if restore {
		// A whole-sandbox snapshot image (commit_snapshot) brings back the
		// files outside the workspace too; the workspace snapshot is
		// still unpacked below, over the same files.
		if image, err = a.restoreImage(ctx, addr, prov); err != nil {
			return err
		}
		if image != "" {
			spec.Image = image
		}
	}
	mounts, unmount, err := a.e.mountForCreate(ctx, a.lineage(), addr)
	if err != nil {
		return err
	}
	spec.Mounts = mounts
	sb, err := prov.Create(ctx, spec)
	if err != nil {
		unmount()
		// Provider errors say what failed without naming the provider.
		return fmt.Errorf("%s: %s: %w", addr, sbc.Provider, err)
	}
	if err := a.update(ctx, func(st *state.State) {
		ns := &state.Sandbox{
			Address:      addr,
			Provider:     sbc.Provider,
			Kind:         prov.Kind(),
			Session:      sb.Session(),
			Status:       statusRunning,
			ConfigDigest: sandboxConfigDigest(cfg, sbc),
			Attributes:   sandboxAttributes(cfg, sbc, a.e.scrubber()),
			CreatedAt:    time.Now().UTC(),
			UpdatedAt:    time.Now().UTC(),
		}
		if restore && prev != nil {
			// The snapshot stays recorded; its digests become the
			// sandbox's only once the restore finished (materialize).
			ns.Snapshot, ns.SnapshotDigest = prev.Snapshot, prev.SnapshotDigest
			ns.SnapshotImage = image
			ns.RestorePending = pending
		}
		st.Sandboxes[addr] = ns
		a.sbs[addr] = sb
		a.used[addr] = true
	}, state.SandboxRef(addr)); err != nil {
		return err
	}
	if pending != nil {
		if err := a.unpackSnapshot(ctx, addr, sb, prev); err != nil {
			return a.restoreFailed(ctx, addr, err)
		}
	}
	if err := a.materialize(ctx, addr, sb); err != nil {
		if pending != nil {
			return a.restoreFailed(ctx, addr, err)
		}
		return err
	}
	if err := a.recordURLs(ctx, addr, sb); err != nil {
		return err
	}
	a.mu.Lock()
	ss := a.st.Sandboxes[addr]
	a.mu.Unlock()
	return a.e.sandboxPostconditions(ss)
}

// restoreFailed records why a restore did not finish in the state (the
// sandbox stays marked as needing one) and returns err with what to do.
func (a *applier) restoreFailed(ctx context.Context, addr string, err error) error {
	if uerr := a.update(ctx, func(st *state.State) {
		if ss := st.Sandboxes[addr]; ss != nil && ss.RestorePending != nil {
			ss.RestorePending.Error = err.Error()
		}
	}, state.SandboxRef(addr)); uerr != nil {
		return errors.Join(err, uerr)
	}
	return fmt.Errorf("%w; the sandbox stays marked as needing a restore and its snapshot is kept: apply again once the cause is fixed, or apply -replace=%s to recreate it from its manifest without the files the runs left in it", err, addr)
}

// checkSnapshot returns an error when the snapshot file a sandbox would be
// restored from is missing or not a regular file, saying what is lost and
// how to go on.
func (e *Engine) checkSnapshot(ctx context.Context, addr string, ss *state.Sandbox) error {
	if err := e.snapshotFileError(ctx, addr, ss); err != nil {
		return fmt.Errorf("%s: cannot restore: %w", addr, err)
	}
	return nil
}

// snapshotFileError checks the snapshot file of ss (when it has one)
// without reading it; the error names the file, what is lost and how to
// go on.
func (e *Engine) snapshotFileError(ctx context.Context, addr string, ss *state.Sandbox) error {
	if ss.Snapshot == "" {
		return nil
	}
	if err := e.State.CheckSnapshot(ctx, ss.Snapshot); err != nil {
		return fmt.Errorf("%w: the files the runs left in its workspace are lost with it; "+
			"put the file back and apply again, or apply -replace=%s to recreate the sandbox from its manifest without them "+
			"(the runs' recorded outputs are kept; -replace=run.NAME runs one again)", err, addr)
	}
	return nil
}

// materialize applies the manifest entries whose digest changed.
func (a *applier) materialize(ctx context.Context, addr string, sb sandbox.Sandbox) error {
	cfg := a.e.Config
	m := sandboxManifest(cfg, cfg.SandboxInstances[addr])
	m.DigestCache = a.e.digestCache()
	m.Digests = a.digests()
	a.mu.Lock()
	prev := a.st.Sandboxes[addr].EntryDigests
	if p := a.st.Sandboxes[addr].RestorePending; p != nil {
		// The workspace holds the snapshot just unpacked: only the entries
		// that changed since it was taken are materialized.
		prev = p.EntryDigests
	}
	a.mu.Unlock()
	res, err := manifest.Materialize(ctx, sb, m, prev, a.e.parallelism())
	if err != nil {
		return fmt.Errorf("%s: materializing the manifest: %w", addr, err)
	}
	return a.update(ctx, func(st *state.State) {
		ss := st.Sandboxes[addr]
		ss.EntryDigests = res.Digests
		ss.ManifestDigest = manifest.Digest(m, res.Digests)
		// The manifest's environment is recorded as it is materialized.
		ss.Attributes = sandboxAttributes(cfg, cfg.SandboxInstances[addr], a.e.scrubber())
		ss.RestorePending = nil // a restore in progress is complete
		ss.UpdatedAt = time.Now().UTC()
	}, state.SandboxRef(addr))
}

func (a *applier) recordURLs(ctx context.Context, addr string, sb sandbox.Sandbox) error {
	sbc := a.e.Config.SandboxInstances[addr]
	if len(sbc.Ports) == 0 {
		return nil
	}
	urls := map[string]string{}
	for _, port := range sbc.Ports {
		u, err := sb.PortURL(ctx, port)
		if err != nil {
			return fmt.Errorf("%s: port %d: %w", addr, port, err)
		}
		urls[fmt.Sprint(port)] = u
	}
	return a.update(ctx, func(st *state.State) { st.Sandboxes[addr].URLs = urls }, state.SandboxRef(addr))
}

func (a *applier) deleteSandbox(ctx context.Context, addr string) (err error) {
	ctx, span := a.e.startSpan(ctx, "delete_sandbox", attrAddress.String(addr))
	defer func() { endSpan(span, err) }()
	a.mu.Lock()
	ss := a.st.Sandboxes[addr]
	a.mu.Unlock()
	if ss == nil {
		return nil
	}
	if ss.Status != statusDeleted {
		sb, err := a.open(ctx, addr)
		if err != nil && !errors.Is(err, sandbox.ErrNotFound) {
			return fmt.Errorf("%s: %w", addr, err)
		}
		if sb != nil {
			if err := sb.Delete(ctx); err != nil {
				return fmt.Errorf("%s: deleting sandbox: %w", addr, err)
			}
		}
	}
	// Its snapshot, and any of this state's that a crash left between
	// recording a snapshot and removing the one before it.
	if err := a.e.State.RemoveSnapshots(ctx, state.ScopedName(a.lineage(), addr), "", ss.Snapshot); err != nil {
		return fmt.Errorf("%s: %w", addr, err)
	}
	if err := a.removeSnapshotImage(ctx, addr, ss.Provider, ss.SnapshotImage); err != nil {
		return err
	}
	return a.update(ctx, func(st *state.State) {
		delete(st.Sandboxes, addr)
		delete(a.sbs, addr)
		delete(a.used, addr)
	}, state.SandboxRef(addr))
}

// ensureRunning returns the sandbox at addr ready for tools: started if
// stopped, restored from its snapshot if deleted or gone, or if its last
// restore did not finish. A restore that fails fails the caller: nothing
// runs on a workspace that is not the snapshot's.
func (a *applier) ensureRunning(ctx context.Context, addr string) (sandbox.Sandbox, error) {
	sb, err := a.startSandbox(ctx, addr)
	if err != nil {
		return nil, err
	}
	// A sandbox kept after its postcondition failed is checked again
	// whenever a run needs it: nothing runs on it until it passes.
	a.mu.Lock()
	ss := a.st.Sandboxes[addr]
	a.mu.Unlock()
	if err := a.e.sandboxPostconditions(ss); err != nil {
		return nil, err
	}
	return sb, nil
}

// startSandbox is ensureRunning without the postconditions.
func (a *applier) startSandbox(ctx context.Context, addr string) (sandbox.Sandbox, error) {
	defer a.lockSandbox(addr)()
	a.mu.Lock()
	ss := a.st.Sandboxes[addr]
	pending := ss != nil && ss.RestorePending != nil
	a.mu.Unlock()
	if ss == nil {
		return nil, fmt.Errorf("%s is not in the state; apply it first (is it excluded by -target?)", addr)
	}
	if pending {
		if err := a.restoreSandbox(ctx, addr); err != nil {
			return nil, fmt.Errorf("not started: the last restore of %s did not finish and restoring it again failed (nothing runs on an incomplete workspace): %w", addr, err)
		}
	} else if ss.Status == statusDeleted {
		if err := a.createSandbox(ctx, addr, true); err != nil {
			return nil, err
		}
	}
	sb, err := a.open(ctx, addr)
	if errors.Is(err, sandbox.ErrNotFound) {
		if ee, ok := errors.AsType[*sandbox.ElsewhereError](err); ok {
			// Planned without a refresh, or it moved since the plan.
			a.e.emit(Event{Type: EventApplyProgress, Address: addr, Message: "it lives in " + ee.Where + ": restoring it here from its latest snapshot; this working directory becomes its owner"})
		}
		if err := a.createSandbox(ctx, addr, true); err != nil {
			return nil, err
		}
		sb, err = a.open(ctx, addr)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", addr, err)
	}
	status, err := sb.Refresh(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", addr, err)
	}
	switch status {
	case sandbox.StatusMissing:
		if err := a.createSandbox(ctx, addr, true); err != nil {
			return nil, err
		}
		return a.open(ctx, addr)
	case sandbox.StatusStopped:
		if err := sb.Start(ctx); err != nil {
			return nil, fmt.Errorf("%s: starting sandbox: %w", addr, err)
		}
	}
	// A start may change what the provider reports (docker picks new host
	// ports) and a Daytona preview URL expires: record the session and the
	// port URLs again.
	if err := a.recordURLs(ctx, addr, sb); err != nil {
		return nil, err
	}
	if err := a.update(ctx, func(st *state.State) {
		st.Sandboxes[addr].Session = sb.Session()
		st.Sandboxes[addr].Status = statusRunning
		a.used[addr] = true
	}, state.SandboxRef(addr)); err != nil {
		return nil, err
	}
	return sb, nil
}

// errNotStarted is a node not started because of an interrupt.
var errNotStarted = errors.New("not started: interrupted")

// interrupted reports whether Interrupt has been closed.
func (e *Engine) interrupted() bool {
	if e.Interrupt == nil {
		return false
	}
	select {
	case <-e.Interrupt:
		return true
	default:
		return false
	}
}

// errUnchanged is a run planned to execute because an upstream run
// executed first (or a sandbox it uses was created, whose manifest's
// digest the copy computed), found unchanged once that was done (the
// same output, the same manifest as before): nothing to do.
var errUnchanged = errors.New("inputs unchanged once its upstream runs and sandboxes were applied: nothing to do")

// errRunInterrupted marks a run stopped by an interrupt.
var errRunInterrupted = errors.New("interrupted")

// lockSandbox serializes the work on one sandbox that runs sharing it
// could otherwise do twice at once (restoring it, snapshotting it).
func (a *applier) lockSandbox(addr string) (unlock func()) {
	a.mu.Lock()
	m := a.snapMu[addr]
	if m == nil {
		m = &sync.Mutex{}
		a.snapMu[addr] = m
	}
	a.mu.Unlock()
	m.Lock()
	return m.Unlock
}

// snapshot saves the sandbox's workspace under the state directory.
// Each snapshot is a file of its own: the state points to it once it is
// complete, and only then are the sandbox's earlier snapshot files
// removed, so a crash at any point leaves the state's snapshot intact.
// A sandbox whose restore did not finish is not snapshotted: its
// workspace is not the snapshot's, and the last good snapshot must not be
// replaced by a worse one.
func (a *applier) snapshot(ctx context.Context, addr string, sb sandbox.Sandbox) (err error) {
	ctx, span := a.e.startSpan(ctx, "snapshot_sandbox", attrAddress.String(addr))
	defer func() { endSpan(span, err) }()
	defer a.lockSandbox(addr)()
	a.mu.Lock()
	var restoring *state.RestorePending
	last := ""
	if ss := a.st.Sandboxes[addr]; ss != nil {
		restoring, last = ss.RestorePending, ss.Snapshot
	}
	a.mu.Unlock()
	if restoring != nil {
		return fmt.Errorf("%s: not snapshotted: its restore from %s did not finish, so its workspace is incomplete; the last good snapshot is kept (apply again to restore it)", addr, last)
	}
	base := state.ScopedName(a.lineage(), addr)
	name := archive.SnapshotFileName(base)
	rel := filepath.Join("snapshots", name)
	if err := os.MkdirAll(a.e.State.Abs("snapshots"), 0o700); err != nil {
		return err
	}
	var exclude []string
	if sbc := a.e.Config.SandboxInstances[addr]; sbc != nil {
		exclude = snapshotExclude(a.e.Config, sbc)
	}
	info, err := archive.SnapshotWith(ctx, sb, "", a.e.State.Abs(rel), archive.SnapshotOptions{Exclude: exclude, Key: state.EncryptionOf(a.e.State).WriteKey(), Digest: a.digests()})
	if err != nil {
		return fmt.Errorf("%s: snapshot: %w", addr, err)
	}
	a.reportSensitiveFiles(ctx, addr, info.Path)
	if err := a.e.State.PutSnapshot(ctx, rel); err != nil {
		return fmt.Errorf("%s: storing the snapshot: %w", addr, err)
	}
	if err := a.update(ctx, func(st *state.State) {
		st.Sandboxes[addr].Snapshot = rel
		st.Sandboxes[addr].SnapshotDigest = info.Digest
		a.snapshotted[addr] = true
	}, state.SandboxRef(addr)); err != nil {
		return err
	}
	// The snapshot before (whatever its name's form) and any of this
	// state's that a crash left between recording a snapshot and removing
	// the one before it; never another state's.
	if err := a.e.State.RemoveSnapshots(ctx, base, name, last); err != nil {
		a.e.emit(Event{Type: EventApplyProgress, Address: addr, Message: "warning: " + err.Error()})
	}
	return a.commitImage(ctx, addr, sb)
}

// reportSensitiveFiles warns, naming the files (never the value), when
// the snapshot at path holds a sensitive value or one of its encodings in
// a file's name or content. The snapshot is kept: failing the run would
// lose its work, and the snapshot stays in the state directory; the
// warning says how to keep such files out (snapshot_exclude).
func (a *applier) reportSensitiveFiles(ctx context.Context, addr, path string) {
	files, err := archive.SensitiveMembersWith(ctx, path, state.EncryptionOf(a.e.State).Key(), a.e.scrubber())
	if err != nil {
		a.e.emit(Event{Type: EventApplyProgress, Address: addr, Message: fmt.Sprintf("warning: could not check the snapshot for sensitive values: %v", err)})
		return
	}
	if len(files) == 0 {
		return
	}
	const show = 10
	list := strings.Join(files[:min(len(files), show)], ", ")
	if len(files) > show {
		list += fmt.Sprintf(" and %d more", len(files)-show)
	}
	a.e.emit(Event{Type: EventApplyProgress, Address: addr, Message: fmt.Sprintf(
		"warning: the snapshot of %s holds a sensitive value (or an encoding of one) in %d file(s): %s; add them to the sandbox's snapshot_exclude to keep them out of snapshots", addr, len(files), list)})
}

// commitImage saves the whole sandbox as a local image when the sandbox
// setting commit_snapshot is true and the sandbox can (sandbox.Committer),
// recording it as the sandbox's SnapshotImage.
func (a *applier) commitImage(ctx context.Context, addr string, sb sandbox.Sandbox) error {
	c, ok := sb.(sandbox.Committer)
	sbc := a.e.Config.SandboxInstances[addr]
	if !ok || sbc == nil {
		return nil
	}
	if c, ok := sbc.Settings.(registry.SnapshotCommitter); !ok || !c.CommitSnapshot() {
		return nil
	}
	ref := sandbox.SnapshotImageRef(a.lineage(), addr)
	if _, err := c.Commit(ctx, ref); err != nil {
		return fmt.Errorf("%s: whole-sandbox snapshot: %w", addr, err)
	}
	var old, prov string
	if err := a.update(ctx, func(st *state.State) {
		ss := st.Sandboxes[addr]
		old, prov = ss.SnapshotImage, ss.Provider
		ss.SnapshotImage = ref
	}, state.SandboxRef(addr)); err != nil {
		return err
	}
	if old != "" && old != ref {
		return a.removeSnapshotImage(ctx, addr, prov, old)
	}
	return nil
}

// restoreImage returns the snapshot image a restored sandbox is created
// from: the state's SnapshotImage if the provider still has it, "" (with a
// notice) when it is gone, so that it is never pulled from a registry.
func (a *applier) restoreImage(ctx context.Context, addr string, prov sandbox.Provider) (string, error) {
	a.mu.Lock()
	ref := ""
	if ss := a.st.Sandboxes[addr]; ss != nil {
		ref = ss.SnapshotImage
	}
	a.mu.Unlock()
	l, ok := prov.(sandbox.ImageLooker)
	if ref == "" || !ok {
		return "", nil
	}
	if _, err := l.ImageID(ctx, ref); err != nil {
		if !errors.Is(err, sandbox.ErrNotFound) {
			return "", fmt.Errorf("%s: snapshot image %s: %w", addr, ref, err)
		}
		a.e.emit(Event{Type: EventApplyProgress, Address: addr, Message: fmt.Sprintf("snapshot image %s is gone: restoring only the workspace snapshot, into the configured image", ref)})
		return "", nil
	}
	return ref, nil
}

// removeSnapshotImage removes a sandbox's snapshot image through its
// provider (sandbox.ImageRemover); an image already gone is fine.
func (a *applier) removeSnapshotImage(ctx context.Context, addr, provAddr, ref string) error {
	if ref == "" {
		return nil
	}
	prov, err := a.e.provs().sandboxProvider(ctx, a.e, provAddr)
	if err != nil {
		return fmt.Errorf("%s: removing snapshot image %s: %w", addr, ref, err)
	}
	if r, ok := prov.(sandbox.ImageRemover); ok {
		if err := r.RemoveImage(ctx, ref); err != nil {
			return fmt.Errorf("%s: removing snapshot image %s: %w", addr, ref, err)
		}
	}
	return nil
}

// finish applies on_exit to the sandboxes this apply used and records the
// outputs.
func (a *applier) finish(ctx context.Context) error {
	var errs []error
	if err := a.memoryFinish(ctx); err != nil {
		errs = append(errs, err)
	}
	cfg := a.e.Config
	for _, addr := range slices.Sorted(maps.Keys(a.used)) {
		sbc := cfg.SandboxInstances[addr]
		sb := a.sbs[addr]
		if sbc == nil || sb == nil {
			continue
		}
		// on_exit runs after an interrupt too, each sandbox within a
		// bounded time.
		cctx, cancel := sandbox.CleanupContext(ctx)
		a.onExit(cctx, addr, sbc, sb, &errs)
		cancel()
	}
	if err := a.update(ctx, func(st *state.State) { a.e.recordOutputs(st) }, state.OutputsRef()); err != nil {
		errs = append(errs, err)
	}
	if err := a.reportRecording(); err != nil {
		errs = append(errs, err)
	}
	if err := a.e.digestCache().Save(); err != nil {
		errs = append(errs, fmt.Errorf("saving the digest cache %s (the next plan reads unchanged local_dir sources again): %w", a.e.State.Abs(digestCacheFile), err))
	}
	return errors.Join(errs...)
}

// onExit stops, deletes or keeps one sandbox the apply used, as its
// on_exit says, and records the result in the state.
func (a *applier) onExit(ctx context.Context, addr string, sbc *config.SandboxInstance, sb sandbox.Sandbox, errs *[]error) {
	record := func(status string) {
		if err := a.update(ctx, func(st *state.State) { st.Sandboxes[addr].Status = status }, state.SandboxRef(addr)); err != nil {
			*errs = append(*errs, fmt.Errorf("%s: recording on_exit: %w", addr, err))
		}
	}
	switch sbc.OnExit {
	case "keep":
	case "delete":
		if a.st.Sandboxes[addr].Snapshot == "" {
			// Nothing to restore from: deleting would lose the workspace.
			*errs = append(*errs, fmt.Errorf("%s: on_exit = \"delete\" but no run has snapshotted it yet; it is stopped instead", addr))
			if err := sb.Stop(ctx); err != nil {
				*errs = append(*errs, fmt.Errorf("%s: on_exit stop: %w", addr, err))
				return
			}
			record(statusStopped)
			return
		}
		if err := sb.Delete(ctx); err != nil {
			*errs = append(*errs, fmt.Errorf("%s: on_exit delete: %w", addr, err))
			return
		}
		record(statusDeleted)
	default:
		if d, ok := sb.(sandbox.StopDiscarder); ok && d.StopDiscardsWorkspace() {
			// Stopping it loses the workspace: the snapshot must hold it
			// first (the runs of this apply snapshotted it; a sandbox
			// only created or updated is snapshotted now).
			a.mu.Lock()
			current := a.snapshotted[addr]
			a.mu.Unlock()
			if !current {
				if err := a.snapshot(ctx, addr, sb); err != nil {
					*errs = append(*errs, fmt.Errorf("%s: on_exit stop: it keeps running, since stopping it would lose its workspace and it could not be snapshotted: %w", addr, err))
					return
				}
			}
			if err := sb.Stop(ctx); err != nil {
				*errs = append(*errs, fmt.Errorf("%s: on_exit stop: %w", addr, err))
				return
			}
			record(statusDeleted)
			return
		}
		if err := sb.Stop(ctx); err != nil {
			*errs = append(*errs, fmt.Errorf("%s: on_exit stop: %w", addr, err))
			return
		}
		record(statusStopped)
	}
}

// RefreshOutputs re-evaluates the root outputs against st (after a plan
// with no changes, so outputs added to or edited in the configuration are
// recorded as terraform apply records them) and reports whether they
// changed.
func (e *Engine) RefreshOutputs(st *state.State) bool {
	before, _ := json.Marshal(st.Outputs)
	e.recordOutputs(st)
	after, _ := json.Marshal(st.Outputs)
	return string(before) != string(after)
}

// recordOutputs evaluates the outputs whose runs have completed and stores
// them; sensitive outputs are recorded as sensitive without their value.
func (e *Engine) recordOutputs(st *state.State) {
	vals, err := e.Outputs(st)
	if err != nil {
		return
	}
	st.Outputs = map[string]*state.Output{}
	for name, ov := range vals {
		if !ov.Value.IsWhollyKnown() {
			continue
		}
		if ov.Sensitive {
			st.Outputs[name] = &state.Output{Sensitive: true}
			continue
		}
		b, err := ctyJSON(ov.Value)
		if err != nil {
			continue
		}
		st.Outputs[name] = &state.Output{Value: scrubJSON(e.scrubber(), b)}
	}
}
