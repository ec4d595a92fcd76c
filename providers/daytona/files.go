package daytona

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"strings"

	"github.com/agentctl/agentctl/providers/internal/hosted"
	"github.com/agentctl/agentctl/sandbox"
)

// resolved is what the in-sandbox resolver learned about a path.
type resolved = sandbox.ResolvedPath

// resolve checks rel against the workspace inside the sandbox; see
// hosted.Resolve.
func (w *Workspace) resolve(ctx context.Context, op, rel string, follow bool) (resolved, error) {
	return hosted.Resolve(ctx, w.run, w.root, op, rel, follow)
}

// ReadFile implements sandbox.Sandbox. FIFOs, sockets and devices are
// refused before the daemon opens them.
func (w *Workspace) ReadFile(ctx context.Context, rel string, limit int64) ([]byte, error) {
	r, err := w.resolve(ctx, "read", rel, true)
	if err != nil {
		return nil, err
	}
	if err := hosted.CheckRead(r, rel); err != nil {
		return nil, err
	}
	body, err := w.s.FileSystem.DownloadFile(ctx, r.Follow)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	return hosted.ReadLimited(body, rel, limit)
}

// WriteFile implements sandbox.Sandbox (parents are created by the daemon).
func (w *Workspace) WriteFile(ctx context.Context, rel string, data []byte, mode fs.FileMode) error {
	r, err := w.resolve(ctx, "write", rel, true)
	if err != nil {
		return err
	}
	if err := hosted.CheckWrite(r, rel); err != nil {
		return err
	}
	if err := w.s.FileSystem.UploadFile(ctx, data, r.Follow); err != nil {
		return err
	}
	if mode == 0 {
		mode = 0o644
	}
	if mode.Perm() != 0o644 {
		return w.s.FileSystem.SetFilePermissions(ctx, r.Follow, fmt.Sprintf("%04o", mode.Perm()))
	}
	return nil
}

// Remove implements sandbox.Sandbox; it does not follow a final symlink.
func (w *Workspace) Remove(ctx context.Context, rel string) error {
	r, err := w.resolve(ctx, "remove", rel, false)
	if err != nil {
		return err
	}
	if err := hosted.CheckRemove(r, w.root, rel); err != nil {
		return err
	}
	return w.s.FileSystem.DeleteFile(ctx, r.NoFollow, false)
}

// Mkdir implements sandbox.Sandbox.
func (w *Workspace) Mkdir(ctx context.Context, rel string) error {
	r, err := w.resolve(ctx, "mkdir", rel, true)
	if err != nil {
		return err
	}
	return w.s.FileSystem.CreateFolder(ctx, r.Follow, "755")
}

// Stat implements sandbox.Sandbox; a final symlink is not followed.
func (w *Workspace) Stat(ctx context.Context, rel string) (sandbox.FileInfo, error) {
	r, err := w.resolve(ctx, "stat", rel, false)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	return hosted.Stat(r, w.root, rel)
}

// ReadDir implements sandbox.Sandbox through the files list API. The
// daemon's list follows symlinks (and skips dangling ones) and types
// entries by their permissions alone, so entries are listed by a script
// in the sandbox instead, as lstat describes them: a symlink as a symlink
// with its target, a FIFO as a FIFO.
func (w *Workspace) ReadDir(ctx context.Context, rel string) ([]sandbox.FileInfo, error) {
	r, err := w.resolve(ctx, "list", rel, true)
	if err != nil {
		return nil, err
	}
	if r.Followed == 'N' {
		return nil, fmt.Errorf("list %q: %w", rel, fs.ErrNotExist)
	}
	if r.Followed != 'D' {
		return nil, fmt.Errorf("list %q: not a directory", rel)
	}
	out, code, stderr, err := w.run(ctx, "list "+strconv.Quote(rel), "set -- "+sandbox.ShellQuote(r.Follow)+"\n"+sandbox.DirListScript)
	if err != nil {
		return nil, err
	}
	if code != 0 {
		return nil, fmt.Errorf("list %q: %s", rel, strings.TrimSpace(stderr))
	}
	return sandbox.ParseDirList(r.Rel(w.root), []byte(out)), nil
}

// CopyIn implements sandbox.Sandbox. The archive is checked and rewritten
// here by hostfs.SanitizeTar with the common safe-extraction rules (no
// absolute or ".." names, no hardlinks, devices, FIFOs or sparse files,
// symlinks kept with their target but nothing beneath a symlink of the
// same archive, modes reduced to permission bits, parents sent as
// explicit directories, member and size limits), uploaded as one file and
// unpacked with tar inside the sandbox: three requests whatever the
// number of files, and modes and symlinks survive (the bulk upload API
// keeps neither).
func (w *Workspace) CopyIn(ctx context.Context, dir string, rd io.Reader) error {
	r, err := w.resolve(ctx, "copy into", dir, true)
	if err != nil {
		return err
	}
	clean, err := hosted.SanitizeCopyIn(ctx, r, w.root, dir, rd)
	if err != nil {
		return err
	}
	tmp := w.p.tempDir + "/agentctl-in-" + nonce() + ".tar"
	if err := w.s.FileSystem.UploadFile(ctx, clean, tmp); err != nil {
		return err
	}
	_, code, stderr, err := w.run(ctx, "copy into "+strconv.Quote(dir), hosted.UnpackScript(tmp, r.Follow))
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("copy into %q: tar exited %d: %s (the image needs tar)", dir, code, stderr)
	}
	return nil
}

// CopyOut implements sandbox.Sandbox: tar runs inside the sandbox, the
// archive is downloaded as one file and its member names are rewritten
// to be relative to dir. Closing the stream removes the remote archive.
func (w *Workspace) CopyOut(ctx context.Context, dir string) (io.ReadCloser, error) {
	r, err := w.resolve(ctx, "copy out of", dir, true)
	if err != nil {
		return nil, err
	}
	if err := hosted.CheckCopyOut(r, dir); err != nil {
		return nil, err
	}
	tmp := w.p.tempDir + "/agentctl-out-" + nonce() + ".tar"
	// GNU tar archives a hard link's content again (CopyIn, like every
	// safe extractor, refuses link members); other tars keep them as
	// links, which a restore then refuses by name.
	script := "h=; case \"$(tar --version 2>/dev/null)\" in *GNU*) h=--hard-dereference;; esac\n" +
		"mkdir -p -- " + sandbox.ShellQuote(w.p.tempDir) + " && tar $h -cf " + sandbox.ShellQuote(tmp) + " -C " + sandbox.ShellQuote(r.Follow) + " .\n"
	_, code, stderr, err := w.run(ctx, "copy out of "+strconv.Quote(dir), script)
	if err != nil {
		return nil, err
	}
	cleanup := func() {
		cctx, cancel := sandbox.CleanupContext(ctx)
		defer cancel()
		_ = w.s.FileSystem.DeleteFile(cctx, tmp, false)
	}
	if code != 0 {
		cleanup()
		return nil, fmt.Errorf("copy out of %q: tar exited %d: %s (the image needs tar)", dir, code, stderr)
	}
	body, err := w.s.FileSystem.DownloadFile(ctx, tmp)
	if err != nil {
		cleanup()
		return nil, err
	}
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(sandbox.TrimTarNames(body, pw, nil))
	}()
	return sandbox.ReadCloser(pr, func() error {
		pr.Close()
		body.Close()
		cleanup()
		return nil
	}), nil
}
