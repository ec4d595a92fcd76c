package docker

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/agentctl/agentctl/sandbox"
)

const queryConfig = `
provider "docker" {}
manifest "ws" {}
sandbox "box" {
  provider = provider.docker
  image    = "` + TestImage + `"
  manifest = manifest.ws
}
sandbox "spare" {
  provider = provider.docker
  image    = "` + TestImage + `"
  manifest = manifest.ws
}
`

// TestQueryReapsOrphanContainers: a container whose state entry was
// removed is listed by agentctl query as an orphan and deleted by
// -reap; another lineage's container is listed as foreign and kept.
func TestQueryReapsOrphanContainers(t *testing.T) {
	p := testProvider(t)
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(queryConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	c := newCLI(t, dir, "main.hcl")
	c.destroyOnCleanup(p)
	c.OK("apply", "-auto-approve", c.File)
	st := c.MustState()
	spare := st.Sandboxes["sandbox.spare"].Session.ID

	// Another configuration's container, labelled as agentctl makes them.
	foreign, err := p.Client().ContainerCreate(ctx, client.ContainerCreateOptions{Config: &container.Config{
		Image: TestImage, Entrypoint: []string{"/bin/sh", "-c", idleScript},
		Labels: sandbox.Labels(sandbox.Spec{Lineage: "another-lineage", Address: "sandbox.box"}, nil),
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = p.Client().ContainerRemove(context.Background(), foreign.ID, client.ContainerRemoveOptions{Force: true})
	})

	c.OK("state", "rm", "-config="+c.File, "sandbox.spare")
	out := c.OK("query", "-config="+c.File, "-json")
	status := queryStatuses(t, out)
	if status[spare] != "orphan" || status[st.Sandboxes["sandbox.box"].Session.ID] != "managed" || status[foreign.ID] != "foreign" {
		t.Fatalf("query: statuses %v (spare %s, foreign %s)\n%s", status, short(spare), short(foreign.ID), out)
	}

	out = c.OK("query", "-config="+c.File, "-reap", "-auto-approve")
	mustContain(t, "query -reap", out, "Deleted "+spare, "sandbox.spare", "Reaped 1 orphan.")
	if _, err := p.Client().ContainerInspect(ctx, spare, client.ContainerInspectOptions{}); !cerrdefs.IsNotFound(err) {
		t.Fatalf("the orphan container %s is still there after -reap (inspect: %v)", short(spare), err)
	}
	if _, err := p.Client().ContainerInspect(ctx, foreign.ID, client.ContainerInspectOptions{}); err != nil {
		t.Fatalf("the foreign container was removed by -reap: %v", err)
	}
	out = c.OK("query", "-config="+c.File)
	mustContain(t, "query after -reap", out, "0 orphans")
}

// queryStatuses maps each container id query -json listed to its status.
func queryStatuses(t *testing.T, out string) map[string]string {
	t.Helper()
	var res struct {
		Sandboxes []struct{ ID, Status string }
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("query -json: %v\n%s", err, out)
	}
	m := map[string]string{}
	for _, s := range res.Sandboxes {
		m[s.ID] = s.Status
	}
	return m
}
