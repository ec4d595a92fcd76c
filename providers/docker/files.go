package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/agentctl/agentctl/sandbox"
)

// The path policy.
//
// The archive API resolves symlinks in the scope of the container's root
// filesystem, not the workspace, so a link /workspace/x -> /etc would let
// "x/passwd" reach /etc/passwd. Every workspace path is therefore resolved
// here one component at a time: the archive stat call (HEAD
// /containers/ID/archive) reports for a symlink its fully evaluated target,
// which must be the root or lie beneath it, or the path is refused with
// sandbox.ErrPathEscape. The daemon is then given the resolved, link-free
// path. A process inside the container could still swap a checked
// component for a link between the check and the use; the file tools run
// with the daemon's view of the container, so such a race can only reach
// the container's own filesystem, never the host's.

// relPath turns a tool path into clean workspace-relative components
// with the workspace path policy (sandbox.CleanPath): absolute paths
// inside the root are accepted, everything that leaves it lexically is
// refused.
func (s *Sandbox) relPath(p string) ([]string, error) {
	rel, err := sandbox.CleanPath(s.d.Root, p)
	if err != nil {
		return nil, err
	}
	if rel == "." {
		return nil, nil
	}
	return strings.Split(rel, "/"), nil
}

func (s *Sandbox) within(abs string) bool {
	root := s.d.Root
	return root == "/" || abs == root || strings.HasPrefix(abs, root+"/")
}

func (s *Sandbox) stat(ctx context.Context, abs string) (container.PathStat, bool, error) {
	res, err := s.p.cli.ContainerStatPath(ctx, s.id, client.ContainerStatPathOptions{Path: abs})
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			if s.gone(ctx, err) {
				return container.PathStat{}, false, s.notFound("stat " + abs)
			}
			return container.PathStat{}, false, nil // a missing path
		}
		return container.PathStat{}, false, s.wrap(ctx, "stat "+abs, err)
	}
	return res.Stat, true, nil
}

// resolved is where a workspace path lives in the container.
type resolved struct {
	// dir is the real (link-free) container directory holding the deepest
	// existing component.
	dir string
	// path is the real container path of the whole path when it exists,
	// else dir joined with missing.
	path   string
	exists bool
	stat   container.PathStat
	// missing are the components below dir that do not exist.
	missing []string
}

// resolve walks comps beneath the root. Symlinks are followed (intermediate
// ones always, the last one when followLast) only when their evaluated
// target stays inside the workspace.
func (s *Sandbox) resolve(ctx context.Context, display string, comps []string, followLast bool) (resolved, error) {
	root := s.d.Root
	st, ok, err := s.stat(ctx, root)
	if err != nil {
		return resolved{}, err
	}
	if !ok {
		return resolved{}, fmt.Errorf("workspace root %s does not exist in container %s", root, s.d.Name)
	}
	if st.Mode&fs.ModeSymlink != 0 {
		return resolved{}, fmt.Errorf("workspace root %s was replaced by a symlink: %w", root, sandbox.ErrPathEscape)
	}
	cur := root
	for i, c := range comps {
		last := i == len(comps)-1
		p := path.Join(cur, c)
		st, ok, err = s.stat(ctx, p)
		if err != nil {
			return resolved{}, err
		}
		if !ok {
			return resolved{dir: cur, path: path.Join(append([]string{cur}, comps[i:]...)...), missing: comps[i:]}, nil
		}
		if st.Mode&fs.ModeSymlink != 0 && (!last || followLast) {
			target := path.Clean(st.LinkTarget)
			if !strings.HasPrefix(target, "/") || !s.within(target) {
				return resolved{}, fmt.Errorf("%q: %s is a symlink to %s, outside the workspace: %w", display, path.Join(comps[:i+1]...), st.LinkTarget, sandbox.ErrPathEscape)
			}
			st, ok, err = s.stat(ctx, target)
			if err != nil {
				return resolved{}, err
			}
			if !ok {
				// A dangling link inside the workspace: the target's
				// parent was fully evaluated, so it is real.
				rest := append([]string{path.Base(target)}, comps[i+1:]...)
				return resolved{dir: path.Dir(target), path: path.Join(append([]string{path.Dir(target)}, rest...)...), missing: rest}, nil
			}
			p = target
		}
		if !last && !st.Mode.IsDir() {
			return resolved{}, fmt.Errorf("%q: %s: %w", display, path.Join(comps[:i+1]...), errNotDir)
		}
		cur = p
		if last {
			return resolved{dir: path.Dir(p), path: p, exists: true, stat: st}, nil
		}
	}
	return resolved{dir: path.Dir(root), path: root, exists: true, stat: st}, nil
}

func notExist(display string) error {
	return fmt.Errorf("%q: %w", display, fs.ErrNotExist)
}

// ReadFile reads a workspace file, following symlinks only inside the
// workspace. FIFOs, sockets and devices are refused (the daemon's archive
// would not block on them, but every provider answers alike).
func (s *Sandbox) ReadFile(ctx context.Context, p string, limit int64) ([]byte, error) {
	comps, err := s.relPath(p)
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	r, err := s.resolve(ctx, p, comps, true)
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	if !r.exists {
		return nil, fmt.Errorf("read: %w", notExist(p))
	}
	if r.stat.Mode.IsDir() {
		return nil, fmt.Errorf("read %q: is a directory", p)
	}
	if !r.stat.Mode.IsRegular() {
		return nil, sandbox.NotRegularError("read", p, r.stat.Mode)
	}
	if limit > 0 && r.stat.Size > limit {
		return nil, fmt.Errorf("read %q: file is %d bytes, more than the limit of %d", p, r.stat.Size, limit)
	}
	res, err := s.p.cli.CopyFromContainer(ctx, s.id, client.CopyFromContainerOptions{SourcePath: r.path})
	if err != nil {
		return nil, s.wrap(ctx, "read "+p, err)
	}
	defer res.Content.Close()
	tr := tar.NewReader(res.Content)
	hdr, err := tr.Next()
	if err != nil {
		return nil, s.wrap(ctx, "read "+p, err)
	}
	if hdr.Typeflag != tar.TypeReg { // tar.Reader reports the legacy TypeRegA as TypeReg
		return nil, fmt.Errorf("read %q: not a regular file", p)
	}
	b, more, err := readAll(tr, limit)
	if err != nil {
		return nil, s.wrap(ctx, "read "+p, err)
	}
	if more {
		return nil, fmt.Errorf("read %q: file is larger than the limit of %d bytes", p, limit)
	}
	return b, nil
}

// put sends a small, provider-built tar to a real container directory.
func (s *Sandbox) put(ctx context.Context, op, dir string, hdrs []*tar.Header, data []byte) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range hdrs {
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(data); err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if _, err := s.p.cli.CopyToContainer(ctx, s.id, client.CopyToContainerOptions{
		DestinationPath: dir, Content: &buf,
	}); err != nil {
		return s.wrap(ctx, op, err)
	}
	return nil
}

func (s *Sandbox) dirHeaders(missing []string) []*tar.Header {
	var hdrs []*tar.Header
	for i := range missing {
		hdrs = append(hdrs, s.dirHeader(path.Join(missing[:i+1]...)))
	}
	return hdrs
}

// WriteFile writes a workspace file, creating parent directories. A final
// symlink is written through only when it points inside the workspace.
func (s *Sandbox) WriteFile(ctx context.Context, p string, data []byte, mode fs.FileMode) error {
	comps, err := s.relPath(p)
	if err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if len(comps) == 0 {
		return fmt.Errorf("write %q: is the workspace root", p)
	}
	r, err := s.resolve(ctx, p, comps, true)
	if err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if r.exists && r.stat.Mode.IsDir() {
		return fmt.Errorf("write %q: is a directory", p)
	}
	if r.exists && !r.stat.Mode.IsRegular() {
		// The daemon would replace it; every provider refuses instead.
		return sandbox.NotRegularError("write", p, r.stat.Mode)
	}
	if mode == 0 {
		mode = 0o644
	}
	dir, names := r.dir, r.missing
	if r.exists {
		dir, names = path.Dir(r.path), []string{path.Base(r.path)}
	}
	hdrs := s.dirHeaders(names[:len(names)-1])
	hdrs = append(hdrs, &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     path.Join(names...),
		Mode:     int64(mode.Perm()),
		Size:     int64(len(data)),
		Uid:      s.d.UID,
		Gid:      s.d.GID,
		ModTime:  time.Now(),
	})
	return s.put(ctx, "write "+p, dir, hdrs, data)
}

// Mkdir creates a workspace directory and its parents.
func (s *Sandbox) Mkdir(ctx context.Context, p string) error {
	comps, err := s.relPath(p)
	if err != nil {
		return fmt.Errorf("mkdir: %w", err)
	}
	r, err := s.resolve(ctx, p, comps, true)
	if err != nil {
		return fmt.Errorf("mkdir: %w", err)
	}
	if r.exists {
		if r.stat.Mode.IsDir() {
			return nil
		}
		return fmt.Errorf("mkdir %q: exists and is not a directory", p)
	}
	return s.put(ctx, "mkdir "+p, r.dir, s.dirHeaders(r.missing), nil)
}

// readlink returns a symlink's own target (not evaluated).
func (s *Sandbox) readlink(ctx context.Context, abs string) (string, error) {
	res, err := s.p.cli.CopyFromContainer(ctx, s.id, client.CopyFromContainerOptions{SourcePath: abs})
	if err != nil {
		return "", s.wrap(ctx, "readlink", err)
	}
	defer res.Content.Close()
	hdr, err := tar.NewReader(res.Content).Next()
	if err != nil {
		return "", s.wrap(ctx, "readlink", err)
	}
	return hdr.Linkname, nil
}

func (s *Sandbox) info(ctx context.Context, rel, abs string, st container.PathStat) (sandbox.FileInfo, error) {
	fi := sandbox.FileInfo{Path: rel, Size: st.Size, Mode: st.Mode, ModTime: st.Mtime}
	if st.Mode&fs.ModeSymlink != 0 {
		t, err := s.readlink(ctx, abs)
		if err != nil {
			return fi, err
		}
		fi.Target = t
		fi.Size = int64(len(t))
	}
	if st.Mode.IsDir() {
		fi.Size = 0
	}
	return fi, nil
}

// Stat describes a workspace entry without following a final symlink.
func (s *Sandbox) Stat(ctx context.Context, p string) (sandbox.FileInfo, error) {
	comps, err := s.relPath(p)
	if err != nil {
		return sandbox.FileInfo{}, fmt.Errorf("stat: %w", err)
	}
	r, err := s.resolve(ctx, p, comps, false)
	if err != nil {
		return sandbox.FileInfo{}, fmt.Errorf("stat: %w", err)
	}
	if !r.exists {
		return sandbox.FileInfo{}, fmt.Errorf("stat: %w", notExist(p))
	}
	rel := strings.Join(comps, "/")
	if rel == "" {
		rel = "."
	}
	return s.info(ctx, rel, r.path, r.stat)
}

// listScript prints the names in directory $1, NUL-terminated, using only
// shell builtins.
const listScript = `cd -- "$1" || exit 2
for f in * .*; do
  case "$f" in .|..) continue ;; esac
  if [ -e "$f" ] || [ -L "$f" ]; then printf '%s\0' "$f"; fi
done`

// ReadDir lists a workspace directory, sorted by name. The names come from
// a shell in the container (the archive API has no listing without
// contents); each entry is then described by the archive stat call. The
// container must be running.
func (s *Sandbox) ReadDir(ctx context.Context, p string) ([]sandbox.FileInfo, error) {
	comps, err := s.relPath(p)
	if err != nil {
		return nil, fmt.Errorf("readdir: %w", err)
	}
	r, err := s.resolve(ctx, p, comps, true)
	if err != nil {
		return nil, fmt.Errorf("readdir: %w", err)
	}
	if !r.exists {
		return nil, fmt.Errorf("readdir: %w", notExist(p))
	}
	if !r.stat.Mode.IsDir() {
		return nil, fmt.Errorf("readdir %q: %w", p, errNotDir)
	}
	out, errOut, code, err := s.run(ctx, "0", []string{"/bin/sh", "-c", listScript, "sh", r.path}, nil)
	if err != nil {
		return nil, fmt.Errorf("readdir %q: %w", p, err)
	}
	if code != 0 {
		return nil, fmt.Errorf("readdir %q: listing failed (exit %d): %s", p, code, strings.TrimSpace(string(errOut)))
	}
	var names []string
	for _, n := range strings.Split(string(out), "\x00") {
		if n != "" && !strings.Contains(n, "/") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	rel := strings.Join(comps, "/")
	infos := make([]sandbox.FileInfo, 0, len(names))
	for _, n := range names {
		abs := path.Join(r.path, n)
		st, ok, err := s.stat(ctx, abs)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue // removed meanwhile
		}
		fi, err := s.info(ctx, path.Join(rel, n), abs, st)
		if err != nil {
			return nil, err
		}
		infos = append(infos, fi)
	}
	return infos, nil
}

// Remove removes a file, a symlink (not its target) or an empty directory.
// The container must be running (the archive API cannot delete).
func (s *Sandbox) Remove(ctx context.Context, p string) error {
	comps, err := s.relPath(p)
	if err != nil {
		return fmt.Errorf("remove: %w", err)
	}
	if len(comps) == 0 {
		return fmt.Errorf("remove %q: refusing to remove the workspace root", p)
	}
	r, err := s.resolve(ctx, p, comps, false)
	if err != nil {
		return fmt.Errorf("remove: %w", err)
	}
	if !r.exists {
		return fmt.Errorf("remove: %w", notExist(p))
	}
	argv := []string{"rm", "-f", "--", r.path}
	if r.stat.Mode.IsDir() {
		argv = []string{"rmdir", "--", r.path}
	}
	_, errOut, code, err := s.run(ctx, "0", argv, nil)
	if err != nil {
		return fmt.Errorf("remove %q: %w", p, err)
	}
	if code != 0 {
		return fmt.Errorf("remove %q: %s", p, strings.TrimSpace(string(errOut)))
	}
	return nil
}

// CopyOut streams a tar of a workspace directory with member names
// relative to it.
func (s *Sandbox) CopyOut(ctx context.Context, dir string) (io.ReadCloser, error) {
	comps, err := s.relPath(dir)
	if err != nil {
		return nil, fmt.Errorf("copy out: %w", err)
	}
	r, err := s.resolve(ctx, dir, comps, true)
	if err != nil {
		return nil, fmt.Errorf("copy out: %w", err)
	}
	if !r.exists {
		return nil, fmt.Errorf("copy out: %w", notExist(dir))
	}
	if !r.stat.Mode.IsDir() {
		return nil, fmt.Errorf("copy out %q: %w", dir, errNotDir)
	}
	res, err := s.p.cli.CopyFromContainer(ctx, s.id, client.CopyFromContainerOptions{SourcePath: r.path})
	if err != nil {
		return nil, s.wrap(ctx, "copy out "+dir, err)
	}
	// Hardlinked files come from the daemon as one file and link members
	// pointing at it; CopyIn (like every safe extractor) refuses links, so
	// each one is fetched again and sent as a regular file.
	fetch := func(name string) (io.ReadCloser, int64, error) {
		abs := path.Join(r.path, name)
		fr, err := s.p.cli.CopyFromContainer(ctx, s.id, client.CopyFromContainerOptions{SourcePath: abs})
		if err != nil {
			return nil, 0, s.wrap(ctx, "copy out "+abs, err)
		}
		tr := tar.NewReader(fr.Content)
		h, err := tr.Next()
		if err != nil {
			fr.Content.Close()
			return nil, 0, s.wrap(ctx, "copy out "+abs, err)
		}
		return struct {
			io.Reader
			io.Closer
		}{tr, fr.Content}, h.Size, nil
	}
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(rebase(res.Content, pw, fetch))
	}()
	return pr, nil
}

// rebase copies a daemon archive of a directory (members "base/...")
// to w with the first name component removed and the directory itself
// dropped. Hardlink members are replaced by regular files read with
// fetch (by their rebased name); a nil fetch keeps them as links. The
// daemon holds the container until its archive is read and closed, so
// a fetch while it is open would wait forever: at the first hardlink the
// rest of the archive is spilled to a temporary file and in is closed,
// and the members go on from the file, in the daemon's order.
func rebase(in io.ReadCloser, w io.Writer, fetch func(name string) (io.ReadCloser, int64, error)) error {
	defer in.Close()
	tr := tar.NewReader(in)
	tw := tar.NewWriter(w)
	strip := func(name string) (string, bool) {
		name = strings.TrimPrefix(name, "./")
		_, rest, _ := strings.Cut(name, "/")
		rest = strings.TrimSuffix(rest, "/")
		return rest, rest != ""
	}
	var spill *os.File
	defer func() {
		if spill != nil {
			spill.Close()
			os.Remove(spill.Name())
		}
	}()
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("copy out: reading the daemon's archive: %w", err)
		}
		name, ok := strip(hdr.Name)
		if !ok {
			continue
		}
		if hdr.Typeflag == tar.TypeDir {
			name += "/"
		}
		hdr.Name = name
		if hdr.Typeflag == tar.TypeLink && fetch != nil {
			if spill == nil {
				// The tar reader has read exactly up to the next header.
				if spill, err = spillRest(in); err != nil {
					return err
				}
				tr = tar.NewReader(spill)
			}
			if err := writeFetched(tw, hdr, fetch); err != nil {
				return err
			}
			continue
		}
		if hdr.Typeflag == tar.TypeLink {
			hdr.Linkname, _ = strip(hdr.Linkname)
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return err
		}
	}
	return tw.Close()
}

// spillRest copies the rest of in to a temporary file, closes in and
// returns the file, positioned at its start.
func spillRest(in io.ReadCloser) (*os.File, error) {
	f, err := os.CreateTemp("", "agentctl-copyout-*.tar")
	if err != nil {
		return nil, fmt.Errorf("copy out: spilling the daemon's archive: %w", err)
	}
	_, err = io.Copy(f, in)
	if err == nil {
		err = in.Close()
	}
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("copy out: spilling the daemon's archive: %w", err)
	}
	return f, nil
}

// writeFetched writes the hardlink member hdr to tw as the regular file
// fetch reads.
func writeFetched(tw *tar.Writer, hdr *tar.Header, fetch func(name string) (io.ReadCloser, int64, error)) error {
	rc, size, err := fetch(hdr.Name)
	if err != nil {
		return err
	}
	defer rc.Close()
	hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeReg, "", size
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err = io.CopyN(tw, rc, size)
	return err
}
