package docker

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/moby/moby/client"

	"github.com/agentctl/agentctl/engine/sandbox"
)

// Limits on archives given to CopyIn.
const (
	MaxCopyInMembers = 1_000_000
	MaxCopyInBytes   = 64 << 30
)

// ErrUnsafeArchive is returned (wrapped) for a tar member CopyIn refuses
// that is not a path escape (hardlinks, devices, FIFOs, limits).
var ErrUnsafeArchive = errors.New("unsafe archive member")

// CopyIn extracts a tar stream into the workspace directory dir (created
// if missing). The stream is checked member by member before anything is
// sent to the daemon:
//
//   - names must be relative, without "..": else sandbox.ErrPathEscape;
//   - only regular files, directories and symlinks are accepted;
//     hardlinks, devices, FIFOs, sparse files and anything else are
//     refused;
//   - symlink targets must stay inside the workspace;
//   - modes keep only the permission bits, owners become the sandbox
//     user, extended attributes and PAX records are dropped;
//   - every parent directory of a member is sent as an explicit directory
//     member first, so that an existing symlink in the container (or one
//     created earlier in the same archive) is replaced by a real directory
//     instead of being written through.
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
		err := s.filterTar(in, pw, base)
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

// filterTar rewrites in to out following CopyIn's rules. base is the
// workspace-relative directory the archive is extracted into.
func (s *Sandbox) filterTar(in io.Reader, out io.Writer, base string) error {
	tr := tar.NewReader(in)
	tw := tar.NewWriter(out)
	dirs := map[string]bool{}
	var members, total int64
	emitDir := func(name string, src *tar.Header) error {
		h := s.dirHeader(name)
		if src != nil {
			h.Mode = src.Mode & 0o777
			h.ModTime = src.ModTime
		}
		dirs[name] = true
		return tw.WriteHeader(h)
	}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("reading the tar stream: %w", err)
		}
		if members++; members > MaxCopyInMembers {
			return fmt.Errorf("more than %d members: %w", MaxCopyInMembers, ErrUnsafeArchive)
		}
		name, err := memberName(hdr.Name)
		if err != nil {
			return err
		}
		if name == "" {
			continue // "." itself
		}
		switch hdr.Typeflag {
		case tar.TypeReg, tar.TypeRegA, tar.TypeDir, tar.TypeSymlink:
		case tar.TypeLink:
			return fmt.Errorf("member %q is a hardlink: %w", hdr.Name, ErrUnsafeArchive)
		case tar.TypeChar, tar.TypeBlock:
			return fmt.Errorf("member %q is a device: %w", hdr.Name, ErrUnsafeArchive)
		case tar.TypeFifo:
			return fmt.Errorf("member %q is a FIFO: %w", hdr.Name, ErrUnsafeArchive)
		default:
			return fmt.Errorf("member %q has unsupported type %q: %w", hdr.Name, hdr.Typeflag, ErrUnsafeArchive)
		}
		for k := range hdr.PAXRecords {
			if strings.HasPrefix(k, "GNU.sparse.") {
				// A sparse file can expand a tiny archive into gigabytes
				// of zeros.
				return fmt.Errorf("member %q is a sparse file: %w", hdr.Name, ErrUnsafeArchive)
			}
		}
		// Parents first, as real directories.
		parts := strings.Split(name, "/")
		for i := 1; i < len(parts); i++ {
			if p := strings.Join(parts[:i], "/"); !dirs[p] {
				if err := emitDir(p, nil); err != nil {
					return err
				}
			}
		}
		if hdr.Typeflag == tar.TypeDir {
			if err := emitDir(name, hdr); err != nil {
				return err
			}
			continue
		}
		if dirs[name] {
			// A non-directory replacing a directory this archive made.
			return fmt.Errorf("member %q replaces a directory of the same archive: %w", hdr.Name, ErrUnsafeArchive)
		}
		h := &tar.Header{
			Name:    name,
			Mode:    hdr.Mode & 0o777,
			Uid:     s.d.UID,
			Gid:     s.d.GID,
			ModTime: hdr.ModTime,
		}
		if hdr.Typeflag == tar.TypeSymlink {
			if err := s.checkLink(base, name, hdr.Linkname); err != nil {
				return err
			}
			h.Typeflag = tar.TypeSymlink
			h.Linkname = hdr.Linkname
			h.Mode = 0o777
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			continue
		}
		if hdr.Size < 0 {
			return fmt.Errorf("member %q has a negative size: %w", hdr.Name, ErrUnsafeArchive)
		}
		if total += hdr.Size; total > MaxCopyInBytes {
			return fmt.Errorf("archive is larger than %d bytes: %w", int64(MaxCopyInBytes), ErrUnsafeArchive)
		}
		h.Typeflag = tar.TypeReg
		h.Size = hdr.Size
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := io.CopyN(tw, tr, hdr.Size); err != nil {
			return fmt.Errorf("member %q: %w", hdr.Name, err)
		}
	}
	return tw.Close()
}

// memberName cleans a tar member name; "" is the archive root.
func memberName(n string) (string, error) {
	if strings.HasPrefix(n, "/") {
		return "", fmt.Errorf("member %q has an absolute name: %w", n, sandbox.ErrPathEscape)
	}
	if strings.ContainsRune(n, 0) {
		return "", fmt.Errorf("member %q has a NUL in its name: %w", n, ErrUnsafeArchive)
	}
	var out []string
	for _, c := range strings.Split(n, "/") {
		switch c {
		case "", ".":
			continue
		case "..":
			return "", fmt.Errorf("member %q contains \"..\": %w", n, sandbox.ErrPathEscape)
		}
		out = append(out, c)
	}
	return strings.Join(out, "/"), nil
}

// checkLink refuses a symlink whose target leaves the workspace. base is
// the extraction directory (workspace-relative), name the member.
func (s *Sandbox) checkLink(base, name, target string) error {
	if target == "" {
		return fmt.Errorf("symlink %q has an empty target: %w", name, ErrUnsafeArchive)
	}
	if strings.HasPrefix(target, "/") {
		if s.within(path.Clean(target)) {
			return nil
		}
		return fmt.Errorf("symlink %q points to %s, outside the workspace %s: %w", name, target, s.d.Root, sandbox.ErrPathEscape)
	}
	// Resolve lexically from the link's directory, inside a virtual root:
	// a leading ".." after cleaning means the target climbs out.
	rel := path.Join(base, path.Dir(name), target)
	if rel == ".." || strings.HasPrefix(rel, "../") {
		return fmt.Errorf("symlink %q points to %s, outside the workspace: %w", name, target, sandbox.ErrPathEscape)
	}
	return nil
}
