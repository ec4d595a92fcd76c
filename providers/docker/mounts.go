package docker

import (
	"path"

	"github.com/moby/moby/api/types/mount"

	"github.com/agentctl/agentctl/sandbox"
)

// storageMounts are binds of the storage mounts made on this machine
// (sandbox/mount) at their paths under the workspace root. A bind is
// fixed when the container is created: a mount made again later (after
// rclone ended) is not seen by the container until it is replaced.
func storageMounts(root string, ms []sandbox.Mount) []mount.Mount {
	var out []mount.Mount
	for _, m := range ms {
		out = append(out, mount.Mount{
			Type: mount.TypeBind, Source: m.HostDir, Target: path.Join(root, m.Path), ReadOnly: m.ReadOnly,
			BindOptions: &mount.BindOptions{Propagation: mount.PropagationRPrivate},
		})
	}
	return out
}
