package local

// File operations on the workspace from the host side. They go through
// os.Root, which resolves every path beneath the workspace directory and
// refuses symlinks and ".." that leave it. This is the seam where the
// shared engine/sandbox host-directory layer can replace it.

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/agentctl/agentctl/engine/sandbox"
)

// relPath checks a workspace-relative path lexically and returns it in
// the form os.Root expects ("." for the root).
func relPath(p string) (string, error) {
	if p == "" || p == "." || p == "/" {
		return ".", nil
	}
	if path.IsAbs(p) || strings.ContainsRune(p, 0) || strings.Contains(p, "\\") {
		return "", fmt.Errorf("path %q: %w", p, sandbox.ErrPathEscape)
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("path %q: %w", p, sandbox.ErrPathEscape)
	}
	return c, nil
}

// fileErr maps os.Root's escape error to sandbox.ErrPathEscape and adds
// the path.
func (s *Sandbox) fileErr(op, p string, err error) error {
	if err == nil {
		return nil
	}
	if isEscape(err) {
		return fmt.Errorf("%s %s: a symlink or \"..\" leads out of the workspace: %w", op, p, sandbox.ErrPathEscape)
	}
	return fmt.Errorf("%s %s: %w", op, p, err)
}

// isEscape recognizes os.Root's refusal to leave the root; os does not
// export that error, so its message is matched (pinned by a test).
func isEscape(err error) bool {
	return errors.Is(err, sandbox.ErrPathEscape) || strings.Contains(err.Error(), "path escapes from parent")
}

// ReadFile reads at most limit bytes and fails when the file is larger.
func (s *Sandbox) ReadFile(ctx context.Context, p string, limit int64) ([]byte, error) {
	rp, err := relPath(p)
	if err != nil {
		return nil, err
	}
	f, err := s.root.Open(rp)
	if err != nil {
		return nil, s.fileErr("read", p, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, s.fileErr("read", p, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("read %s: not a regular file", p)
	}
	if limit > 0 && fi.Size() > limit {
		return nil, fmt.Errorf("read %s: file is %d bytes, more than the limit of %d", p, fi.Size(), limit)
	}
	var r io.Reader = f
	if limit > 0 {
		r = io.LimitReader(f, limit+1)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, s.fileErr("read", p, err)
	}
	if limit > 0 && int64(len(b)) > limit {
		return nil, fmt.Errorf("read %s: file grew beyond the limit of %d bytes", p, limit)
	}
	return b, nil
}

// WriteFile creates parent directories as needed.
func (s *Sandbox) WriteFile(ctx context.Context, p string, data []byte, mode fs.FileMode) error {
	rp, err := relPath(p)
	if err != nil {
		return err
	}
	if rp == "." {
		return fmt.Errorf("write %s: the workspace root is a directory", p)
	}
	if mode == 0 {
		mode = 0o644
	}
	if dir := path.Dir(rp); dir != "." {
		if err := s.root.MkdirAll(dir, 0o755); err != nil {
			return s.fileErr("write", p, err)
		}
	}
	f, err := s.root.OpenFile(rp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode.Perm())
	if err != nil {
		return s.fileErr("write", p, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return s.fileErr("write", p, err)
	}
	if err := f.Close(); err != nil {
		return s.fileErr("write", p, err)
	}
	return nil
}

// Remove removes a file or an empty directory.
func (s *Sandbox) Remove(ctx context.Context, p string) error {
	rp, err := relPath(p)
	if err != nil {
		return err
	}
	if rp == "." {
		return fmt.Errorf("remove %s: refusing to remove the workspace root", p)
	}
	return s.fileErr("remove", p, s.root.Remove(rp))
}

// Mkdir creates a directory and its parents.
func (s *Sandbox) Mkdir(ctx context.Context, p string) error {
	rp, err := relPath(p)
	if err != nil {
		return err
	}
	return s.fileErr("mkdir", p, s.root.MkdirAll(rp, 0o755))
}

func (s *Sandbox) info(rp string, fi fs.FileInfo) sandbox.FileInfo {
	out := sandbox.FileInfo{Path: rp, Size: fi.Size(), Mode: fi.Mode(), ModTime: fi.ModTime()}
	if fi.Mode()&fs.ModeSymlink != 0 {
		out.Target, _ = s.root.Readlink(rp)
	}
	return out
}

// Stat does not follow a final symlink.
func (s *Sandbox) Stat(ctx context.Context, p string) (sandbox.FileInfo, error) {
	rp, err := relPath(p)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	fi, err := s.root.Lstat(rp)
	if err != nil {
		return sandbox.FileInfo{}, s.fileErr("stat", p, err)
	}
	return s.info(rp, fi), nil
}

// ReadDir lists a directory, sorted by name.
func (s *Sandbox) ReadDir(ctx context.Context, p string) ([]sandbox.FileInfo, error) {
	rp, err := relPath(p)
	if err != nil {
		return nil, err
	}
	f, err := s.root.Open(rp)
	if err != nil {
		return nil, s.fileErr("list", p, err)
	}
	defer f.Close()
	ents, err := f.ReadDir(-1)
	if err != nil {
		return nil, s.fileErr("list", p, err)
	}
	out := make([]sandbox.FileInfo, 0, len(ents))
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		out = append(out, s.info(path.Join(rp, e.Name()), fi))
	}
	sortInfos(out)
	return out, nil
}

// Extraction limits for CopyIn.
const (
	maxTarMembers = 200_000
	maxTarBytes   = 64 << 30
)

// CopyIn extracts a tar stream into dir: regular files, directories and
// symlinks whose target stays inside the workspace; absolute names, ".."
// and other member types are refused; modes keep only permission bits.
func (s *Sandbox) CopyIn(ctx context.Context, dir string, r io.Reader) error {
	base, err := relPath(dir)
	if err != nil {
		return err
	}
	if err := s.root.MkdirAll(base, 0o755); err != nil {
		return s.fileErr("copy in", dir, err)
	}
	tr := tar.NewReader(r)
	var members int
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("copy in %s: reading tar: %w", dir, err)
		}
		members++
		if members > maxTarMembers {
			return fmt.Errorf("copy in %s: more than %d members", dir, maxTarMembers)
		}
		name, err := relPath(h.Name)
		if err != nil {
			return fmt.Errorf("copy in %s: member %q: %w", dir, h.Name, sandbox.ErrPathEscape)
		}
		if name == "." {
			continue
		}
		for k := range h.PAXRecords {
			if strings.HasPrefix(k, "GNU.sparse.") {
				// Holes would be written out as zeros: a small archive
				// could fill the disk.
				return fmt.Errorf("copy in %s: member %q is a sparse file, which is not supported", dir, h.Name)
			}
		}
		target := path.Join(base, name)
		mode := fs.FileMode(h.Mode).Perm()
		switch h.Typeflag {
		case tar.TypeDir:
			if err := s.root.MkdirAll(target, 0o755); err != nil {
				return s.fileErr("copy in", target, err)
			}
			if mode != 0 {
				s.root.Chmod(target, mode|0o700)
			}
		case tar.TypeReg:
			total += h.Size
			if total > maxTarBytes {
				return fmt.Errorf("copy in %s: archive larger than %d bytes", dir, int64(maxTarBytes))
			}
			if err := s.root.MkdirAll(path.Dir(target), 0o755); err != nil {
				return s.fileErr("copy in", target, err)
			}
			// Replace, never write through, an existing symlink.
			if fi, err := s.root.Lstat(target); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
				s.root.Remove(target)
			}
			f, err := s.root.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode|0o600)
			if err != nil {
				return s.fileErr("copy in", target, err)
			}
			_, err = io.CopyN(f, tr, h.Size)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return s.fileErr("copy in", target, err)
			}
		case tar.TypeSymlink:
			lt := h.Linkname
			if path.IsAbs(lt) {
				return fmt.Errorf("copy in %s: symlink %q points to absolute path %q: %w", dir, h.Name, lt, sandbox.ErrPathEscape)
			}
			if _, err := relPath(path.Join(path.Dir(target), lt)); err != nil {
				return fmt.Errorf("copy in %s: symlink %q points out of the workspace: %w", dir, h.Name, sandbox.ErrPathEscape)
			}
			if err := s.root.MkdirAll(path.Dir(target), 0o755); err != nil {
				return s.fileErr("copy in", target, err)
			}
			s.root.Remove(target)
			if err := s.root.Symlink(lt, target); err != nil {
				return s.fileErr("copy in", target, err)
			}
		default:
			return fmt.Errorf("copy in %s: member %q has unsupported type %q (only files, directories and symlinks)", dir, h.Name, string(h.Typeflag))
		}
	}
}

// CopyOut streams a tar of dir; member names are relative to dir.
// Symlinks are archived as links, never followed.
func (s *Sandbox) CopyOut(ctx context.Context, dir string) (io.ReadCloser, error) {
	base, err := relPath(dir)
	if err != nil {
		return nil, err
	}
	fi, err := s.root.Stat(base)
	if err != nil {
		return nil, s.fileErr("copy out", dir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("copy out %s: not a directory", dir)
	}
	sub, err := s.root.OpenRoot(base)
	if err != nil {
		return nil, s.fileErr("copy out", dir, err)
	}
	pr, pw := io.Pipe()
	go func() {
		defer sub.Close()
		pw.CloseWithError(writeTar(ctx, sub, pw))
	}()
	return pr, nil
}

func writeTar(ctx context.Context, root *os.Root, w io.Writer) error {
	tw := tar.NewWriter(w)
	err := fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if p == "." {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		var link string
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = root.Readlink(p); err != nil {
				return err
			}
		} else if !fi.Mode().IsRegular() && !fi.IsDir() {
			return nil // sockets, fifos, devices are not archived
		}
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		h.Name = p
		if fi.IsDir() {
			h.Name += "/"
		}
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
		// Permission bits only: a command may have set setuid bits on
		// files that are owned by the agentctl user on disk.
		h.Mode = int64(fi.Mode().Perm())
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			f, err := root.Open(p)
			if err != nil {
				return err
			}
			_, err = io.CopyN(tw, f, h.Size)
			f.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

func sortInfos(infos []sandbox.FileInfo) {
	slices.SortFunc(infos, func(a, b sandbox.FileInfo) int { return strings.Compare(a.Path, b.Path) })
}
