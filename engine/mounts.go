package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/mount"
	"github.com/agentctl/agentctl/state"
)

// Storage mounts (docs/mounts.md): a manifest's s3, r2, s3_files, gcs,
// azure_blob and box entries are mounted on this machine before the
// provider creates the sandbox, which binds them into its workspace
// (sandbox.Spec.Mounts).
// Each is recorded under the state directory's mounts/ before it is
// made; a mount whose sandbox is gone from the state is cleared at the
// end of every apply and destroy, and one a killed agentctl left is
// cleared before its sandbox is made again.

// mountsDir is the directory, relative to the state directory, that
// holds the mount records and mount points.
const mountsDir = "mounts"

func (e *Engine) mounter() *mount.Mounter {
	return &mount.Mounter{Dir: e.State.Abs(mountsDir), Environ: e.Environ}
}

// sandboxMounts are the mounts of a sandbox instance's manifest.
func sandboxMounts(cfg *config.Config, sb *config.SandboxInstance) []*config.Mount {
	if sb == nil {
		return nil
	}
	if m := cfg.Manifests[sb.Manifest]; m != nil {
		return m.Mounts
	}
	return nil
}

func mountDef(m *config.Mount) mount.Def {
	return mount.Def{
		Kind: m.Kind, Path: m.Path, Account: m.Account, Bucket: m.Bucket, Prefix: m.Prefix, Endpoint: m.Endpoint, Region: m.Region, ReadOnly: m.ReadOnly,
		Secrets: mount.Secrets{
			AccessKeyID: m.AccessKeyID, SecretAccessKey: m.SecretAccessKey, SessionToken: m.SessionToken, CredentialsJSON: m.CredentialsJSON,
			AccountKey: m.AccountKey, SASToken: m.SASToken, AccessToken: m.AccessToken,
		},
	}
}

// mountDigestData is what the sandbox's configuration digest covers of
// its mounts: their definitions, never their credentials nor the
// buckets' contents. Nil when there are none, so that the digests of
// sandboxes without mounts stay as they were.
func mountDigestData(cfg *config.Config, sb *config.SandboxInstance) any {
	ms := sandboxMounts(cfg, sb)
	if len(ms) == 0 {
		return nil
	}
	out := make([]map[string]any, 0, len(ms))
	for _, m := range ms {
		d := map[string]any{
			"kind": m.Kind, "path": m.Path, "bucket": m.Bucket, "prefix": m.Prefix,
			"endpoint": m.Endpoint, "region": m.Region, "read_only": m.ReadOnly,
		}
		if m.Account != "" { // azure_blob only: the other kinds' digests stay as they were
			d["account"] = m.Account
		}
		out = append(out, d)
	}
	return out
}

// mountSummary is how plans, the state and show describe a mount: its
// source and whether it is read-only.
func mountSummary(m *config.Mount) string {
	s := m.Kind + " " + m.Source()
	if m.ReadOnly {
		return s + ", read-only"
	}
	return s + ", read-write"
}

// setMountAttributes adds one "mount.PATH" attribute per mount.
func setMountAttributes(cfg *config.Config, sb *config.SandboxInstance, set func(path string, v string)) {
	for _, m := range sandboxMounts(cfg, sb) {
		set("mount."+m.Path, mountSummary(m))
	}
}

// mountExcludes are the snapshot exclusions of the mounted paths: a
// snapshot holds the workspace, not the buckets mounted into it.
func mountExcludes(cfg *config.Config, sb *config.SandboxInstance) []string {
	var out []string
	for _, m := range sandboxMounts(cfg, sb) {
		out = append(out, "/"+m.Path+"/")
	}
	return out
}

// snapshotExclude is a sandbox's snapshot_exclude and its mounted paths.
func snapshotExclude(cfg *config.Config, sb *config.SandboxInstance) []string {
	if sb == nil {
		return nil
	}
	return append(slices.Clone(sb.SnapshotExclude), mountExcludes(cfg, sb)...)
}

// mountForCreate clears what a killed agentctl left of addr's mounts and
// mounts the manifest's anew, for a sandbox about to be created. It
// returns them for the spec, and a function that clears them when the
// sandbox's creation fails.
func (e *Engine) mountForCreate(ctx context.Context, lineage, addr string) ([]sandbox.Mount, func(), error) {
	mr := e.mounter()
	o := mount.Owner{Lineage: lineage, Address: addr}
	if err := mr.Clear(ctx, o); err != nil {
		return nil, nil, fmt.Errorf("%s: clearing the mounts an interrupted apply left: %w", addr, err)
	}
	ms := sandboxMounts(e.Config, e.Config.SandboxInstances[addr])
	undo := func() { mr.Clear(context.WithoutCancel(ctx), o) }
	var out []sandbox.Mount
	for _, m := range ms {
		dir, err := mr.Mount(ctx, o, mountDef(m))
		if err != nil {
			undo()
			return nil, nil, fmt.Errorf("%s: mounting %s at %s (%s): %w", addr, m.Kind, m.Path, m.DeclRange.String(), err)
		}
		out = append(out, sandbox.Mount{Path: m.Path, HostDir: dir, ReadOnly: m.ReadOnly})
	}
	return out, undo, nil
}

// mountForOpen returns the mounts of a sandbox being opened, mounting
// again any that is down (rclone ended, or the machine restarted) so
// that the provider binds it anew.
func (e *Engine) mountForOpen(ctx context.Context, lineage, addr string) ([]sandbox.Mount, error) {
	ms := sandboxMounts(e.Config, e.Config.SandboxInstances[addr])
	if len(ms) == 0 {
		return nil, nil
	}
	mr := e.mounter()
	o := mount.Owner{Lineage: lineage, Address: addr}
	var out []sandbox.Mount
	for _, m := range ms {
		dir := mr.HostDir(o, m.Path)
		if !mr.Live(dir) {
			var err error
			if dir, err = mr.Mount(ctx, o, mountDef(m)); err != nil {
				return nil, fmt.Errorf("%s: mounting %s at %s again (%s): %w", addr, m.Kind, m.Path, m.DeclRange.String(), err)
			}
		}
		out = append(out, sandbox.Mount{Path: m.Path, HostDir: dir, ReadOnly: m.ReadOnly})
	}
	return out, nil
}

// sweepMounts clears every recorded mount whose sandbox is no longer in
// the state, or recorded as deleted: destroyed, deleted on exit,
// replaced, or never recorded because agentctl was killed between
// mounting and recording the sandbox. The records under the state
// directory are this working directory's alone.
func (e *Engine) sweepMounts(ctx context.Context, st *state.State) error {
	mr := e.mounter()
	owners, err := mr.Owners()
	if err != nil {
		return err
	}
	var errs []error
	for _, o := range owners {
		// Another lineage's mounts are a killed first apply's, whose state
		// was never written, or an earlier state's of this directory.
		if ss := st.Sandboxes[o.Address]; o.Lineage == st.Lineage && ss != nil && ss.Status != statusDeleted {
			continue
		}
		if err := mr.Clear(ctx, o); err != nil {
			errs = append(errs, fmt.Errorf("%s: unmounting its storage: %w", o.Address, err))
		}
	}
	return errors.Join(errs...)
}

// openMounts is mountForOpen for openSandbox: a mount that cannot be made
// again is reported as a warning, not an error, so that a sandbox whose
// bucket is gone can still be destroyed; commands reading its path then
// fail ("transport endpoint is not connected") rather than see nothing.
func (e *Engine) openMounts(ctx context.Context, lineage, addr string) []sandbox.Mount {
	ms, err := e.mountForOpen(ctx, lineage, addr)
	if err != nil {
		e.emit(Event{Type: EventApplyProgress, Address: addr, Message: "warning: " + err.Error()})
	}
	return ms
}

// checkMountsAvailable fails the plan of a sandbox to be made with
// mounts when they cannot be made on this machine (rclone or FUSE
// missing), naming the first mount.
func (e *Engine) checkMountsAvailable(sb *config.SandboxInstance) error {
	ms := sandboxMounts(e.Config, sb)
	if len(ms) == 0 {
		return nil
	}
	if err := e.mounter().Available(); err != nil {
		return fmt.Errorf("%s: %s mount at %s (%s): %w", sb.Addr, ms[0].Kind, ms[0].Path, ms[0].DeclRange.String(), err)
	}
	return nil
}
