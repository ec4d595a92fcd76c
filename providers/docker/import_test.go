package docker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// importConfig adopts the container named name as sandbox.box, with
// network as the sandbox's.
func importConfig(name, network string) string {
	return `
provider "docker" {}
manifest "ws" {
  file "hello.txt" {
    content = "hi\n"
  }
}
sandbox "box" {
  provider = provider.docker
  image    = "` + TestImage + `"
  network  = "` + network + `"
  manifest = manifest.ws
}
import {
  to = sandbox.box
  id = "` + name + `"
}
`
}

// TestImportHandRunContainer: a container started by hand (as docker run
// does, without agentctl's labels) is imported by an import block: plan
// says it will be imported, or what differs; apply records it and writes
// the manifest into it; the next plan has no changes; destroy removes it.
func TestImportHandRunContainer(t *testing.T) {
	p := testProvider(t)
	ctx := context.Background()
	name := "agentctl-test-import-" + randHex(4)
	created, err := p.Client().ContainerCreate(ctx, client.ContainerCreateOptions{
		Name:       name,
		Config:     &container.Config{Image: TestImage, Entrypoint: []string{"/bin/sh", "-c", "mkdir -p /workspace && echo by-hand > /workspace/mine.txt && " + idleScript}},
		HostConfig: &container.HostConfig{NetworkMode: "none"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = p.Client().ContainerRemove(context.Background(), created.ID, client.ContainerRemoveOptions{Force: true})
	})
	if _, err := p.Client().ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(cfg string) {
		if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := newCLI(t, dir, "main.hcl")
	c.destroyOnCleanup(p)

	// What differs is said, and nothing is imported.
	write(importConfig(name, "bridge"))
	out, code := c.Run("plan", c.File)
	if code != 1 {
		t.Fatalf("plan of a mismatching import: exit %d\n%s", code, out)
	}
	mustContain(t, "mismatch", out, `sandbox.box: cannot import "`+name+`"`, `its network is "none", the configuration says "bridge"`)
	write(importConfig("no-such-container-"+randHex(4), "none"))
	out, code = c.Run("plan", c.File)
	if code != 1 || !strings.Contains(out, "no container") {
		t.Fatalf("plan of a missing container: exit %d\n%s", code, out)
	}

	write(importConfig(name, "none"))
	out = c.OK("plan", c.File)
	mustContain(t, "plan", out, "# sandbox.box will be imported", "Plan: 1 to import, 0 to create")
	out = c.OK("apply", "-auto-approve", c.File)
	mustContain(t, "apply", out, "Apply complete! Resources: 1 imported, 0 added")
	if id := c.MustState().Sandboxes["sandbox.box"].Session.ID; id != created.ID {
		t.Fatalf("the state records container %s, want the imported %s", short(id), short(created.ID))
	}
	out, code = c.Run("plan", "-detailed-exitcode", c.File)
	if code != 0 {
		t.Fatalf("plan after the import: exit %d, want 0 (no changes)\n%s", code, out)
	}
	if got := c.Exec("sandbox.box", "cat mine.txt hello.txt"); got != "by-hand\nhi\n" {
		t.Fatalf("exec in the imported container: %q", got)
	}
	c.OK("destroy", "-auto-approve", c.File)
	if _, err := p.Client().ContainerInspect(ctx, created.ID, client.ContainerInspectOptions{}); !cerrdefs.IsNotFound(err) {
		t.Fatalf("destroy left the imported container (inspect: %v)", err)
	}
}
