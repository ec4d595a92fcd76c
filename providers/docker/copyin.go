package docker

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/agentctl/agentctl/sandbox/hostfs"
)

// CopyIn extracts a tar stream into the workspace directory dir (created
// if missing). The stream goes through hostfs.SanitizeTar before anything
// reaches the daemon, so it gets the common safe-extraction rules
// (docs/sandbox.md): no absolute or ".." names, no hardlinks, devices,
// FIFOs or sparse files, nothing beneath a symlink, permission bits kept
// but set-id and sticky bits dropped, owners set to the sandbox user, and
// every parent sent as an explicit directory so that an existing symlink
// in the container is replaced by a real directory instead of being
// written through.
//
// Symlinks keep their target whatever it is. The daemon refuses a
// relative link whose target climbs out of the destination directory
// ("invalid symlink"), so such links are held back from the stream and
// created afterwards by a second copy whose destination is the
// container's root, where every relative target stays inside.
//
// A refused member stops the copy; members before it may already have been
// extracted.
func (s *Sandbox) CopyIn(ctx context.Context, dir string, in io.Reader) error {
	comps, err := s.relPath(dir)
	if err != nil {
		return fmt.Errorf("copy in: %w", err)
	}
	r, err := s.resolve(ctx, dir, comps, true)
	if err != nil {
		return fmt.Errorf("copy in: %w", err)
	}
	if !r.exists {
		if err := s.put(ctx, "mkdir "+dir, r.dir, s.dirHeaders(r.missing), nil); err != nil {
			return err
		}
		r.path = path.Join(append([]string{r.dir}, r.missing...)...)
	} else if !r.stat.Mode.IsDir() {
		return fmt.Errorf("copy in %q: %w", dir, errNotDir)
	}
	// The workspace-relative position of dir, for symlink checks.
	base := strings.TrimPrefix(strings.TrimPrefix(r.path, s.d.Root), "/")
	if s.d.Root == "/" {
		base = strings.TrimPrefix(r.path, "/")
	}

	pr, pw := io.Pipe()
	filterErr := make(chan error, 1)
	var links []hostfs.Link
	go func() {
		var err error
		links, err = hostfs.SanitizeTarDeferLinks(ctx, base, in, pw, hostfs.SanitizeOptions{UID: s.d.UID, GID: s.d.GID, KeepPermissions: true})
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
		return fmt.Errorf("copy in %q: %w", dir, ferr)
	}
	if putErr != nil {
		return s.wrap(ctx, "copy in "+dir, putErr)
	}
	if len(links) == 0 {
		return nil
	}
	now := time.Now()
	hdrs := make([]*tar.Header, 0, len(links))
	for _, l := range links {
		mtime := l.ModTime
		if mtime.IsZero() {
			mtime = now
		}
		hdrs = append(hdrs, &tar.Header{Typeflag: tar.TypeSymlink, Name: strings.TrimPrefix(path.Join(r.path, l.Name), "/"),
			Linkname: l.Target, Mode: 0o777, Uid: s.d.UID, Gid: s.d.GID, ModTime: mtime})
	}
	return s.put(ctx, "copy in "+dir+" (symlinks leaving it)", "/", hdrs, nil)
}
