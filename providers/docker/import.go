package docker

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/agentctl/agentctl/sandbox"
)

// Import adopts an existing container, by id or name (sandbox.Importer):
// one started by hand with docker run, or another configuration's
// after it let go of it. It checks what the configuration sets: the
// image, network, published ports, user, resources, cap_add and
// shm_size, agentctl's labels when it has them, and that the workspace
// root exists. The hardening agentctl gives the containers it creates
// (docs/docker-provider.md) is not checked: an adopted container keeps
// the settings it was run with.
func (p *Provider) Import(ctx context.Context, spec sandbox.Spec, id string) (sandbox.Sandbox, error) {
	settings, ok := spec.Settings.(*SandboxSettings)
	if !ok && spec.Settings != nil {
		return nil, fmt.Errorf("sandbox settings are %T, not *docker.SandboxSettings", spec.Settings)
	}
	res, err := p.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return nil, fmt.Errorf("no container %q (docker ps -a lists them): %w", id, sandbox.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("inspecting container %s: %w", id, err)
	}
	c := res.Container
	if c.Config == nil || c.HostConfig == nil {
		return nil, fmt.Errorf("inspecting container %s: the Docker Engine returned no configuration for it", id)
	}
	root := path.Clean("/" + spec.Root)
	if spec.Root == "" {
		root = "/workspace"
	}
	diffs := sandbox.LabelDifferences(spec, c.Config.Labels)
	diffs = append(diffs, p.imageDifferences(ctx, spec.Image, c)...)
	diffs = append(diffs, hostDifferences(spec, settings, c)...)
	if c.Config.User != settings.user() {
		diffs = append(diffs, fmt.Sprintf("it runs as user %q, the configuration says %q: set user = %q in the sandbox block, or run the container with --user", c.Config.User, settings.user(), c.Config.User))
	}
	if st, err := p.cli.ContainerStatPath(ctx, c.ID, client.ContainerStatPathOptions{Path: root}); err != nil || !st.Stat.Mode.IsDir() {
		diffs = append(diffs, fmt.Sprintf("it has no directory %s, the workspace root: create it (docker exec %s mkdir -p %s) or set the manifest's root to a directory it has", root, short(c.ID), root))
	}
	name := strings.TrimPrefix(c.Name, "/")
	if len(diffs) > 0 {
		return nil, &sandbox.MismatchError{ID: fmt.Sprintf("container %s (%s)", short(c.ID), name), Differences: diffs}
	}
	s := &Sandbox{p: p, id: c.ID, d: sessionData{
		Name: name, Image: spec.Image, ImageID: c.Image, Root: root, User: settings.user(), Commit: settings.CommitSnapshot(), Imported: true,
	}, accounts: spec.Accounts}
	if s.d.UID, s.d.GID, err = s.lookupUser(ctx, s.d.User); err != nil {
		return nil, err
	}
	return s, nil
}

// imageDifferences compares the container's image with the configured
// one: the same reference, or the same image id.
func (p *Provider) imageDifferences(ctx context.Context, image string, c container.InspectResponse) []string {
	if image == "" || c.Config.Image == image {
		return nil
	}
	if want, err := p.ImageID(ctx, image); err == nil && want == c.Image {
		return nil
	}
	return []string{fmt.Sprintf("its image is %q (%s), the configuration says %q: set image = %q, or import a container of %s", c.Config.Image, short(strings.TrimPrefix(c.Image, "sha256:")), image, c.Config.Image, image)}
}

// hostDifferences compares the network, published ports, resources and
// provider settings the configuration sets with the container's.
func hostDifferences(spec sandbox.Spec, settings *SandboxSettings, c container.InspectResponse) []string {
	hc := c.HostConfig
	var diffs []string
	want, got := spec.Network, string(hc.NetworkMode)
	if want == "" {
		want = "none"
	}
	if got == "default" || got == "" {
		got = "bridge"
	}
	if want != got {
		diffs = append(diffs, fmt.Sprintf("its network is %q, the configuration says %q: set network = %q in the sandbox block, or run the container with --network %s", got, want, got, want))
	}
	var published []int
	for port, bs := range hc.PortBindings {
		if len(bs) > 0 && port.Proto() == "tcp" {
			published = append(published, int(port.Num()))
		}
	}
	slices.Sort(published)
	if wantPorts := slices.Sorted(slices.Values(spec.Ports)); !slices.Equal(published, wantPorts) {
		diffs = append(diffs, fmt.Sprintf("it publishes ports %v, the configuration says %v: set ports = %v, or run the container with -p for each port", published, wantPorts, published))
	}
	r := spec.Resources
	if r.CPUs > 0 && hc.NanoCPUs != int64(r.CPUs*1e9) {
		diffs = append(diffs, fmt.Sprintf("its CPU limit is %s, the configuration says cpus = %v (docker run --cpus)", strconv.FormatFloat(float64(hc.NanoCPUs)/1e9, 'f', -1, 64), r.CPUs))
	}
	if r.MemoryMB > 0 && hc.Memory != r.MemoryMB<<20 {
		diffs = append(diffs, fmt.Sprintf("its memory limit is %d MiB, the configuration says memory = %d (docker run --memory %dm)", hc.Memory>>20, r.MemoryMB, r.MemoryMB))
	}
	if r.PIDs > 0 && (hc.PidsLimit == nil || *hc.PidsLimit != r.PIDs) {
		diffs = append(diffs, fmt.Sprintf("its process limit differs from pids = %d (docker run --pids-limit %d)", r.PIDs, r.PIDs))
	}
	if r.DiskGB > 0 || r.GPUs > 0 {
		diffs = append(diffs, "resources disk and gpus are not supported: remove them")
	}
	if settings != nil && settings.ShmSizeMB != nil && hc.ShmSize != settings.shmSizeMB()<<20 {
		diffs = append(diffs, fmt.Sprintf("its /dev/shm is %d MiB, the configuration says shm_size = %d (docker run --shm-size %dm)", hc.ShmSize>>20, settings.shmSizeMB(), settings.shmSizeMB()))
	}
	dropsAll := slices.ContainsFunc(hc.CapDrop, func(c string) bool { return strings.EqualFold(c, "ALL") })
	for _, capName := range settings.capabilities() {
		if dropsAll && !slices.ContainsFunc(hc.CapAdd, func(c string) bool { return canonicalCap(c) == capName }) {
			diffs = append(diffs, fmt.Sprintf("it drops capability %s, which cap_add asks for (docker run --cap-add %s)", capName, capName))
		}
	}
	return diffs
}
