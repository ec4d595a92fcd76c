package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/moby/moby/client"

	"github.com/agentctl/agentctl/engine/sandbox"
)

// CopyIn extracts a tar stream into the workspace directory dir (created
// if missing). The stream goes through sandbox.SanitizeTar before anything
// reaches the daemon, so it gets the common safe-extraction rules
// (docs/sandbox.md): no absolute or ".." names, no hardlinks, devices,
// FIFOs or sparse files, symlink targets confined to the workspace,
// permission bits kept but set-id and sticky bits dropped, owners set to
// the sandbox user, and every parent sent
// as an explicit directory so that an existing symlink in the container
// is replaced by a real directory instead of being written through.
//
// A refused member stops the copy; members before it may already have been
// extracted.
func (s *Sandbox) CopyIn(ctx context.Context, dir string, in io.Reader) error {
	comps, err := s.relPath(dir)
	if err != nil {
		return fmt.Errorf("docker: copy in: %w", err)
	}
	r, err := s.resolve(ctx, dir, comps, true)
	if err != nil {
		return fmt.Errorf("docker: copy in: %w", err)
	}
	if !r.exists {
		if err := s.put(ctx, "mkdir "+dir, r.dir, s.dirHeaders(r.missing), nil); err != nil {
			return err
		}
		r.path = path.Join(append([]string{r.dir}, r.missing...)...)
	} else if !r.stat.Mode.IsDir() {
		return fmt.Errorf("docker: copy in %q: %w", dir, errNotDir)
	}
	// The workspace-relative position of dir, for symlink checks.
	base := strings.TrimPrefix(strings.TrimPrefix(r.path, s.d.Root), "/")
	if s.d.Root == "/" {
		base = strings.TrimPrefix(r.path, "/")
	}

	pr, pw := io.Pipe()
	filterErr := make(chan error, 1)
	go func() {
		err := sandbox.SanitizeTar(ctx, base, in, pw, sandbox.SanitizeOptions{UID: s.d.UID, GID: s.d.GID, KeepPermissions: true})
		filterErr <- err
		pw.CloseWithError(err)
	}()
	_, putErr := s.p.cli.CopyToContainer(ctx, s.id, client.CopyToContainerOptions{
		DestinationPath:           r.path,
		Content:                   pr,
		AllowOverwriteDirWithFile: true,
	})
	pr.CloseWithError(errors.New("copy aborted"))
	if ferr := <-filterErr; ferr != nil {
		return fmt.Errorf("docker: copy in %q: %w", dir, ferr)
	}
	if putErr != nil {
		return s.wrap("copy in "+dir, putErr)
	}
	return nil
}
