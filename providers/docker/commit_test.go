package docker

import (
	"context"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/internal/testfiles"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/agentctl/agentctl/sandbox"
)

const commitHCL = `
provider "scripted" {
  script "worker" {
    reply {
      call "exec_command" {
        arguments = { cmd = "mkdir -p /opt && echo hi > /opt/marker && mkdir -p out && echo inside > out/in.txt && echo wrote" }
      }
    }
    reply {
      text = "done"
    }
  }
}

provider "docker" {}

manifest "m" {
  file "hello.txt" {
    content = "hello\n"
  }
}

sandbox "box" {
  provider = provider.docker
  image    = "@IMAGE@"
  manifest = manifest.m
  @COMMIT@
}

capability "shell" "default" {}

agent "worker" {
  provider     = provider.scripted
  instructions = "Write the files."
  sandbox      = sandbox.box
  capabilities = [capability.shell.default]
}

run "work" {
  agent = agent.worker
  input = "Write the marker."
}
`

// commitCLI writes commitHCL (with the commit_snapshot line given) and
// returns its CLI, destroyed at the end of the test; any snapshot image
// left behind is removed too.
func commitCLI(t *testing.T, p *Provider, commitLine string) *cli {
	t.Helper()
	dir := t.TempDir()
	testfiles.WriteTree(t, dir, map[string]string{
		"commit.hcl": strings.NewReplacer("@IMAGE@", TestImage, "@COMMIT@", commitLine).Replace(commitHCL),
	})
	c := newCLI(t, dir, "commit.hcl")
	c.destroyOnCleanup(p)
	t.Cleanup(func() {
		if st := c.State(); st != nil {
			_, _ = p.Client().ImageRemove(context.Background(), sandbox.SnapshotImageRef(st.Lineage, "sandbox.box"),
				client.ImageRemoveOptions{Force: true, PruneChildren: true})
		}
	})
	return c
}

func imageGone(t *testing.T, p *Provider, ref string) bool {
	t.Helper()
	_, err := p.Client().ImageInspect(context.Background(), ref)
	if err != nil && !cerrdefs.IsNotFound(err) {
		t.Fatalf("inspect image %s: %v", ref, err)
	}
	return err != nil
}

// commit_snapshot = true through the binary: the completed run commits the
// container to a snapshot image; a container removed behind agentctl's
// back is restored from that image, so a file written outside the
// workspace comes back with the workspace, without re-running the run and
// without looking like image drift; destroy removes the image.
func TestDockerCommitSnapshot(t *testing.T) {
	p := testProvider(t)
	ctx := context.Background()
	c := commitCLI(t, p, "commit_snapshot = true")

	out := c.OK("apply", "-auto-approve", "commit.hcl")
	mustContain(t, "first apply", out, "1 run executed")
	st := c.MustState()
	ref := sandbox.SnapshotImageRef(st.Lineage, "sandbox.box")
	ss := st.Sandboxes["sandbox.box"]
	if ss.SnapshotImage != ref || ss.Snapshot == "" {
		t.Fatalf("state: snapshot image %q (want %q), snapshot %q", ss.SnapshotImage, ref, ss.Snapshot)
	}
	if imageGone(t, p, ref) {
		t.Fatalf("snapshot image %s was not created", ref)
	}
	if out, code := c.Run("plan", "-detailed-exitcode", "commit.hcl"); code != 0 {
		t.Fatalf("plan after apply: exit %d\n%s", code, out)
	}

	// Removed behind agentctl's back: plan says restore, and the restored
	// container comes from the snapshot image.
	id := ss.Session.ID
	removeAndRestore(t, p, c, "sandbox.box", id)
	st = c.MustState()
	ss = st.Sandboxes["sandbox.box"]
	if ss.Session.ID == id || ss.SnapshotImage != ref {
		t.Fatalf("after restore: container %s (old %s), snapshot image %q", ss.Session.ID, id, ss.SnapshotImage)
	}
	if got := c.OK("exec", "-config=commit.hcl", "sandbox.box", "--", "cat", "/opt/marker", "out/in.txt", "hello.txt"); got != "hi\ninside\nhello\n" {
		t.Fatalf("restored files: %q", got)
	}
	res, err := p.Client().ContainerInspect(ctx, ss.Session.ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Container.Config.Image != ref {
		t.Fatalf("restored container created from %q, want %q", res.Container.Config.Image, ref)
	}
	// Created from the snapshot image, not the configured one: no drift.
	if out, code := c.Run("plan", "-detailed-exitcode", "commit.hcl"); code != 0 {
		t.Fatalf("plan after restore: exit %d\n%s", code, out)
	}

	// Running again commits the restored container to the same reference.
	before, err := p.ImageID(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, "re-run", c.OK("apply", "-auto-approve", "-replace=run.work", "commit.hcl"), "1 run executed")
	after, err := p.ImageID(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if after == before {
		t.Fatalf("the re-run did not commit a new snapshot image (still %s)", before)
	}

	c.OK("destroy", "-auto-approve", "commit.hcl")
	if !imageGone(t, p, ref) {
		t.Fatalf("destroy left the snapshot image %s", ref)
	}
	if list, err := p.ListManaged(ctx, st.Lineage); err != nil || len(list) != 0 {
		t.Fatalf("after destroy: %v %v", list, err)
	}
}

// Without commit_snapshot, a completed run makes only the workspace
// snapshot: no image.
func TestDockerNoCommitWithoutSetting(t *testing.T) {
	p := testProvider(t)
	c := commitCLI(t, p, "")
	mustContain(t, "apply", c.OK("apply", "-auto-approve", "commit.hcl"), "1 run executed")
	st := c.MustState()
	ss := st.Sandboxes["sandbox.box"]
	if ss.Snapshot == "" || ss.SnapshotImage != "" {
		t.Fatalf("state: snapshot %q, snapshot image %q", ss.Snapshot, ss.SnapshotImage)
	}
	if ref := sandbox.SnapshotImageRef(st.Lineage, "sandbox.box"); !imageGone(t, p, ref) {
		t.Fatalf("snapshot image %s exists without commit_snapshot", ref)
	}
}
