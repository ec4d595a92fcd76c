package runloop_test

import (
	"context"
	"errors"
	"io/fs"
	"testing"
	"time"

	"github.com/agentctl/agentctl/providers/runloop"
	"github.com/agentctl/agentctl/providers/runloop/runloopfake"
	"github.com/agentctl/agentctl/sandbox"
)

func setup(t *testing.T) (*runloopfake.Server, *runloop.Provider, sandbox.Spec) {
	t.Helper()
	f := runloopfake.New(t)
	p, err := runloop.New(runloop.Options{APIKey: f.APIKey, BaseURL: f.URL(), Poll: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	spec := sandbox.Spec{Address: "sandbox.dev", Lineage: "lin-1", Root: f.Root + "/ws", Ports: []int{8080},
		Settings: &runloop.Settings{Commit: true, Env: map[string]string{"A": "1"}}}
	return f, p, spec
}

// TestCreateParamsAndSnapshotImages: what agentctl asks Runloop for (the
// address in the metadata, the keep-alive time), and disk snapshots as
// images: Commit, ImageID, a devbox created from the snapshot after its
// source was shut down behind agentctl's back, RemoveImage. The contract
// itself is the suite's (TestSandboxContract).
func TestCreateParamsAndSnapshotImages(t *testing.T) {
	f, p, spec := setup(t)
	ctx := context.Background()
	sb, err := p.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Devbox(sb.ID())["metadata"].(map[string]any)[sandbox.LabelAddress]; got != "sandbox.dev" {
		t.Fatalf("address label = %v", got)
	}
	if lp := f.Devbox(sb.ID())["launch_parameters"].(map[string]any); lp["keep_alive_time_seconds"] != float64(3600) {
		t.Fatalf("keep-alive = %v, want the default TTL of 3600s", lp["keep_alive_time_seconds"])
	}
	ref := "agentctl-snapshot/dev:1"
	snap, err := sb.(sandbox.Committer).Commit(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := p.ImageID(ctx, ref); err != nil || id != snap {
		t.Fatalf("image id = %q %v, want %q", id, err, snap)
	}
	f.Shutdown(sb.ID())
	if st, _ := sb.Refresh(ctx); st != sandbox.StatusMissing {
		t.Fatalf("after shutdown behind agentctl's back: %s", st)
	}
	spec.Image = ref
	sb2, err := p.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Devbox(sb2.ID())["snapshot_id"]; got != snap {
		t.Fatalf("restored from %v, want %s", got, snap)
	}
	if err := p.RemoveImage(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if _, err := p.ImageID(ctx, ref); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("after remove: %v", err)
	}
}

// TestLostCreateIsShutDownAndRateLimitRetried: a create whose answer
// never came (the caller gave up waiting) leaves no devbox: Runloop lists
// devboxes by status only, so the provider finds the one it made by its
// metadata and shuts it down. A create answered 429 is retried.
func TestLostCreateIsShutDownAndRateLimitRetried(t *testing.T) {
	f, p, spec := setup(t)
	release := f.HoldCreates()
	cctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := p.Create(cctx, spec); err == nil {
		t.Fatal("Create succeeded though its answer never came")
	}
	release()
	if live := f.Live(); len(live) != 0 {
		t.Fatalf("the devbox of the lost create is still there: %v", live)
	}
	f.Fail(runloopfake.Fault{PathContains: "/v1/devboxes", Status: 429, RetryAfter: "0", Count: 2})
	sb, err := p.Create(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if f.Status(sb.ID()) != "running" {
		t.Fatalf("the devbox created after 429s is %s", f.Status(sb.ID()))
	}
}

// TestDiskSnapshotRestoresTheDisk: a devbox created from a disk snapshot
// has the files its source had when the snapshot was taken, not those
// written after, and each devbox's disk is its own.
func TestDiskSnapshotRestoresTheDisk(t *testing.T) {
	f, p, spec := setup(t)
	ctx := context.Background()
	src, err := p.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := src.WriteFile(ctx, "before.txt", []byte("kept"), 0o600); err != nil {
		t.Fatal(err)
	}
	ref := "agentctl-snapshot/disk:1"
	if _, err := src.(sandbox.Committer).Commit(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if err := src.WriteFile(ctx, "after.txt", []byte("not in the snapshot"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Another address, so the create does not shut src down as its
	// leftover.
	spec.Image, spec.Address = ref, "sandbox.restored"
	restored, err := p.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := restored.ReadFile(ctx, "before.txt", 0); err != nil || string(b) != "kept" {
		t.Fatalf("before.txt in the restored devbox = %q, %v; want the snapshot's %q", b, err, "kept")
	}
	if _, err := restored.Stat(ctx, "after.txt"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after.txt, written after the snapshot, in the restored devbox: %v; want it absent", err)
	}
	res, err := restored.Exec(ctx, sandbox.ExecRequest{Shell: "cat before.txt; echo more >> before.txt"})
	if err != nil || res.ExitCode != 0 || string(res.Stdout) != "kept" {
		t.Fatalf("exec in the restored devbox: %+v %v", res, err)
	}
	if b, err := src.ReadFile(ctx, "before.txt", 0); err != nil || string(b) != "kept" {
		t.Fatalf("the source devbox's before.txt = %q, %v; a write in another devbox changed it", b, err)
	}
	if got, err := f.ReadFile(restored.ID(), spec.Root+"/before.txt"); err != nil || string(got) != "keptmore\n" {
		t.Fatalf("the restored devbox's disk holds %q, %v", got, err)
	}
	f.Shutdown(src.ID())
	if _, err := f.ReadFile(src.ID(), spec.Root+"/before.txt"); err == nil {
		t.Fatalf("a shut-down devbox's disk survived")
	}
}

// TestEnvironmentAndSecretsReachCommands: the sandbox's env and the
// values of the Runloop secrets it names are in every command's
// environment, put there by Runloop at create.
func TestEnvironmentAndSecretsReachCommands(t *testing.T) {
	f, p, spec := setup(t)
	f.Secrets["MY_TOKEN"] = "s3cret"
	spec.Settings.(*runloop.Settings).Secrets = map[string]string{"TOKEN": "MY_TOKEN"}
	ctx := context.Background()
	sb, err := p.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Shell: `echo "$A $TOKEN"`})
	if err != nil || string(res.Stdout) != "1 s3cret\n" {
		t.Fatalf("exec = %q %v; want the env and the secret's value", res.Stdout, err)
	}
}
