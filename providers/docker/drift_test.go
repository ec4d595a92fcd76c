package docker

import (
	"archive/tar"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/internal/testfiles"

	"github.com/moby/moby/client"
)

const driftHCL = `
variable "image" {
  type = string
}

provider "docker" {}

manifest "m" {
  file "hello.txt" {
    content = "hi\n"
  }
}

sandbox "box" {
  provider = provider.docker
  image    = var.image
  manifest = manifest.m
  on_exit  = "keep"
}
`

// The same image reference rebuilt to another image: refresh sees it, plan
// says replace with the reason, -refresh=false does not look, and apply
// recreates the container from the new image.
func TestDockerImageDrift(t *testing.T) {
	p := testProvider(t)
	ctx := context.Background()
	tag := "agentctl-test-drift-" + randHex(4) + ":1"
	if _, err := p.Client().ImageTag(ctx, client.ImageTagOptions{Source: TestImage, Target: tag}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = p.Client().ImageRemove(context.Background(), tag, client.ImageRemoveOptions{Force: true, PruneChildren: true})
	})
	dir := t.TempDir()
	testfiles.WriteTree(t, dir, map[string]string{"drift.hcl": driftHCL})
	c := newCLI(t, dir, "drift.hcl", "AGENTCTL_VAR_image="+tag)
	c.destroyOnCleanup(p)

	c.OK("apply", "-auto-approve", "drift.hcl")
	if out, code := c.Run("plan", "-detailed-exitcode", "drift.hcl"); code != 0 {
		t.Fatalf("plan before the rebuild: exit %d\n%s", code, out)
	}
	oldID := c.MustState().Sandboxes["sandbox.box"].Session.ID

	// Rebuild the tag: same reference, another image.
	build := tarOf(t, &tar.Header{Name: "Dockerfile", Typeflag: tar.TypeReg, Mode: 0o644,
		Linkname: "FROM " + TestImage + "\nRUN echo v2 > /variant\n"})
	if err := imageBuild(ctx, p.Client(), tag, build); err != nil {
		t.Fatal(err)
	}

	// The provider-level check the engine uses.
	sb, err := p.Open(ctx, testSpec(t), c.MustState().Sandboxes["sandbox.box"].Session)
	if err != nil {
		t.Fatal(err)
	}
	spec := testSpec(t)
	spec.Image = tag
	reason, err := sb.(*Sandbox).Drift(ctx, spec)
	if err != nil || !strings.Contains(reason, "now resolves to sha256:") {
		t.Fatalf("Drift = %q, %v", reason, err)
	}

	out, code := c.Run("plan", "-detailed-exitcode", "drift.hcl")
	if code != 2 {
		t.Fatalf("plan after the rebuild: exit %d\n%s", code, out)
	}
	mustContain(t, "plan after the rebuild", out, "# sandbox.box will be replaced", `image "`+tag+`" now resolves to sha256:`,
		"Plan: 1 to create, 0 to change, 1 to destroy")
	if out, code := c.Run("plan", "-refresh=false", "-detailed-exitcode", "drift.hcl"); code != 0 {
		t.Fatalf("plan -refresh=false: exit %d\n%s", code, out)
	}

	c.OK("apply", "-auto-approve", "drift.hcl")
	if got := c.Exec("sandbox.box", "cat /variant hello.txt"); got != "v2\nhi\n" {
		t.Fatalf("after replace: %q", got)
	}
	st := c.MustState()
	if st.Sandboxes["sandbox.box"].Session.ID == oldID {
		t.Fatal("the container was not replaced")
	}
	if _, err := p.Client().ContainerInspect(ctx, oldID, client.ContainerInspectOptions{}); err == nil {
		t.Fatal("the old container still exists")
	}
	if out, code := c.Run("plan", "-detailed-exitcode", "drift.hcl"); code != 0 {
		t.Fatalf("plan after the replace: exit %d\n%s", code, out)
	}

	// A reference that no longer resolves locally is not drift: the
	// container keeps working.
	variant, err := p.ImageID(ctx, tag)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = p.Client().ImageRemove(context.Background(), variant, client.ImageRemoveOptions{Force: true, PruneChildren: true})
	})
	if _, err := p.Client().ImageRemove(ctx, tag, client.ImageRemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if out, code := c.Run("plan", "-detailed-exitcode", "drift.hcl"); code != 0 {
		t.Fatalf("plan with the tag gone: exit %d\n%s", code, out)
	}
	c.OK("destroy", "-auto-approve", "drift.hcl")
	if list, err := p.ListManaged(ctx, st.Lineage); err != nil || len(list) != 0 {
		t.Fatalf("after destroy: %v %v", list, err)
	}
}

// examples/docker-analyst.hcl's sandbox (bridge network, a published port,
// resources, user) is accepted by the engine, with the image named by its
// variable; the run itself needs a model API and is not applied.
func TestDockerAnalystExampleSandbox(t *testing.T) {
	p := testProvider(t)
	ctx := context.Background()
	example, err := os.ReadFile("../../examples/docker-analyst.hcl")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	testfiles.WriteTree(t, dir, map[string]string{"docker-analyst.hcl": string(example)})
	c := newCLI(t, dir, "docker-analyst.hcl", "AGENTCTL_VAR_image="+TestImage)
	c.destroyOnCleanup(p)
	c.OK("apply", "-auto-approve", "-target=sandbox.analysis", "docker-analyst.hcl")
	st := c.MustState()
	ss := st.Sandboxes["sandbox.analysis"]
	if ss == nil || !strings.HasPrefix(ss.URLs["8080"], "http://127.0.0.1:") {
		t.Fatalf("sandbox in state: %+v", ss)
	}
	res, err := p.Client().ContainerInspect(ctx, ss.Session.ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hc := res.Container.HostConfig
	if hc.NetworkMode != "bridge" || hc.NanoCPUs != 1.5e9 || hc.Memory != 1024<<20 || hc.PidsLimit == nil || *hc.PidsLimit != 256 || res.Container.Config.User != "1000:1000" {
		t.Fatalf("container settings: network %s cpus %d memory %d pids %v user %q", hc.NetworkMode, hc.NanoCPUs, hc.Memory, hc.PidsLimit, res.Container.Config.User)
	}
	if got := c.Exec("sandbox.analysis", "id -u; cat data/sales.csv | wc -l; test -x tools/query.py && echo x"); got != "1000\n3\nx\n" {
		t.Fatalf("workspace: %q", got)
	}
	c.OK("destroy", "-auto-approve", "docker-analyst.hcl")
	if list, err := p.ListManaged(ctx, st.Lineage); err != nil || len(list) != 0 {
		t.Fatalf("after destroy: %v %v", list, err)
	}
}
