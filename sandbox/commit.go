package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
	"sync"
)

// Committer is an optional interface a Sandbox implements when it can
// save its whole filesystem, not only the workspace, as a local image (a
// docker commit). The engine calls it after the workspace snapshot when
// the sandbox setting commit_snapshot is true, and creates a restored
// sandbox from that image.
type Committer interface {
	// Commit saves the sandbox as the local image ref and returns the
	// image id.
	Commit(ctx context.Context, ref string) (imageID string, err error)
}

// ImageRemover is an optional interface a Provider implements to remove
// the snapshot images its sandboxes committed. Removing an image that no
// longer exists is not an error.
type ImageRemover interface {
	RemoveImage(ctx context.Context, ref string) error
}

// ImageLooker is an optional interface a Provider implements to tell
// whether an image is present locally: it returns an error wrapping
// ErrNotFound when it is not. The engine asks it before creating a
// sandbox from a snapshot image, so a missing one is never pulled.
type ImageLooker interface {
	ImageID(ctx context.Context, ref string) (string, error)
}

var refUnsafe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[^a-z0-9]+`) })

// SnapshotImageRef is the local image reference of the whole-sandbox
// snapshot of the sandbox at address in the state of lineage:
// agentctl-snapshot/<address, made safe>-<hash of address>:<lineage
// prefix>. It is a valid, lowercase docker reference; the hash keeps
// addresses that differ only in case or punctuation apart.
func SnapshotImageRef(lineage, address string) string {
	name := strings.Trim(refUnsafe().ReplaceAllString(strings.ToLower(address), "-"), "-")
	if len(name) > 60 {
		name = strings.TrimRight(name[:60], "-")
	}
	sum := sha256.Sum256([]byte(address))
	name += "-" + hex.EncodeToString(sum[:4])
	name = strings.TrimLeft(name, "-")
	tag := strings.Trim(refUnsafe().ReplaceAllString(strings.ToLower(lineage), "-"), "-")
	if len(tag) > 12 {
		tag = tag[:12]
	}
	tag = strings.TrimRight(tag, "-")
	if tag == "" {
		tag = "latest"
	}
	return "agentctl-snapshot/" + name + ":" + tag
}
