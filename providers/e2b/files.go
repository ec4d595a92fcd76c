package e2b

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/agentctl/agentctl/providers/e2b/internal/envd/filesystem"
	"github.com/agentctl/agentctl/providers/internal/hosted"
	"github.com/agentctl/agentctl/sandbox"
)

// resolve checks rel against the workspace inside the sandbox (envd's
// file endpoints follow symlinks); see hosted.Resolve.
func (w *Workspace) resolve(ctx context.Context, op, rel string, follow bool) (sandbox.ResolvedPath, error) {
	return hosted.Resolve(ctx, w.run, w.root, op, rel, follow)
}

// ReadFile implements sandbox.Sandbox through envd's GET /files. FIFOs,
// sockets and devices are refused before envd opens them.
func (w *Workspace) ReadFile(ctx context.Context, rel string, limit int64) ([]byte, error) {
	r, err := w.resolve(ctx, "read", rel, true)
	if err != nil {
		return nil, err
	}
	if err := hosted.CheckRead(r, rel); err != nil {
		return nil, err
	}
	body, err := w.envd.Download(ctx, r.Follow)
	if err != nil {
		return nil, unavailable(err)
	}
	defer body.Close()
	return hosted.ReadLimited(body, rel, limit)
}

// WriteFile implements sandbox.Sandbox through envd's POST /files (which
// creates the parents), then sets the mode when it is not 0644.
func (w *Workspace) WriteFile(ctx context.Context, rel string, data []byte, mode fs.FileMode) error {
	r, err := w.resolve(ctx, "write", rel, true)
	if err != nil {
		return err
	}
	if err := hosted.CheckWrite(r, rel); err != nil {
		return err
	}
	if err := w.envd.Upload(ctx, r.Follow, data); err != nil {
		return unavailable(err)
	}
	if mode == 0 {
		mode = 0o644
	}
	// envd creates files with the user's umask; set the mode in every
	// case, so that a file replaced keeps the one asked for.
	script := fmt.Sprintf("chmod %04o -- %s", mode.Perm(), sandbox.ShellQuote(r.Follow))
	_, code, stderr, err := w.run(ctx, "set the mode of "+strconv.Quote(rel), script)
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("write %q: setting mode %04o: %s", rel, mode.Perm(), stderr)
	}
	return nil
}

// Remove implements sandbox.Sandbox; it does not follow a final symlink
// and refuses a directory that is not empty (envd's Remove would remove
// its contents).
func (w *Workspace) Remove(ctx context.Context, rel string) error {
	r, err := w.resolve(ctx, "remove", rel, false)
	if err != nil {
		return err
	}
	if err := hosted.CheckRemove(r, w.root, rel); err != nil {
		return err
	}
	if r.Kind == 'D' {
		list, err := w.envd.ListDir(ctx, r.NoFollow)
		if err != nil {
			return unavailable(err)
		}
		if len(list) > 0 {
			return fmt.Errorf("remove %q: directory not empty", rel)
		}
	}
	return unavailable(w.envd.Remove(ctx, r.NoFollow))
}

// Mkdir implements sandbox.Sandbox.
func (w *Workspace) Mkdir(ctx context.Context, rel string) error {
	r, err := w.resolve(ctx, "mkdir", rel, true)
	if err != nil {
		return err
	}
	if err := hosted.CheckMkdir(r, rel); err != nil {
		return err
	}
	return unavailable(w.envd.MakeDir(ctx, r.Follow))
}

// Stat implements sandbox.Sandbox; a final symlink is not followed.
func (w *Workspace) Stat(ctx context.Context, rel string) (sandbox.FileInfo, error) {
	r, err := w.resolve(ctx, "stat", rel, false)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	return hosted.Stat(r, w.root, rel)
}

// ReadDir implements sandbox.Sandbox through envd's ListDir; symlinks are
// listed as symlinks, with their target.
func (w *Workspace) ReadDir(ctx context.Context, rel string) ([]sandbox.FileInfo, error) {
	r, err := w.resolve(ctx, "list", rel, true)
	if err != nil {
		return nil, err
	}
	if err := hosted.CheckList(r, rel); err != nil {
		return nil, err
	}
	list, err := w.envd.ListDir(ctx, r.Follow)
	if err != nil {
		return nil, unavailable(err)
	}
	base := r.Rel(w.root)
	out := make([]sandbox.FileInfo, 0, len(list))
	var links []int
	for _, e := range list {
		p := e.GetName()
		if base != "." {
			p = base + "/" + p
		}
		fi := sandbox.FileInfo{Path: p, Size: e.GetSize(), Mode: entryMode(e)}
		if t := e.GetModifiedTime(); t != nil {
			fi.ModTime = t.AsTime()
		}
		if fi.Mode&fs.ModeSymlink != 0 {
			links = append(links, len(out))
		}
		out = append(out, fi)
	}
	if err := w.linkTargets(ctx, r.Follow, out, links); err != nil {
		return nil, err
	}
	return out, nil
}

// linkTargets sets the Target of the symlinks among list (at indexes
// links) in directory dir: envd reports where a link resolves to, not
// what it says.
func (w *Workspace) linkTargets(ctx context.Context, dir string, list []sandbox.FileInfo, links []int) error {
	if len(links) == 0 {
		return nil
	}
	argv := []string{"/bin/sh", "-c", `cd -- "$1" || exit 1; shift; for f; do readlink -- "$f"; printf '\0'; done`, "sh", dir}
	for _, i := range links {
		argv = append(argv, path.Base(list[i].Path))
	}
	res, err := w.Exec(ctx, sandbox.ExecRequest{Argv: argv, Timeout: time.Minute, OutputLimit: 16 << 20})
	if err != nil {
		return fmt.Errorf("reading link targets: %w", err)
	}
	targets := strings.Split(string(res.Stdout), "\x00")
	if res.ExitCode != 0 || len(targets) != len(links)+1 {
		return fmt.Errorf("reading link targets in %s: exit %d: %s", dir, res.ExitCode, bytes.TrimSpace(res.Stderr))
	}
	for k, i := range links {
		list[i].Target = strings.TrimSuffix(targets[k], "\n")
	}
	return nil
}

// entryMode is an entry's type and permission bits, from its mode
// string (envd's type and mode describe what a symlink resolves to, and
// name no FIFO, socket or device).
func entryMode(e *filesystem.EntryInfo) fs.FileMode {
	s := e.GetPermissions()
	if len(s) < 9 {
		m := fs.FileMode(e.GetMode()) & fs.ModePerm
		switch e.GetType() {
		case filesystem.FileType_FILE_TYPE_DIRECTORY:
			m |= fs.ModeDir
		case filesystem.FileType_FILE_TYPE_SYMLINK:
			m |= fs.ModeSymlink
		}
		return m
	}
	var m fs.FileMode
	for i, c := range s[len(s)-9:] {
		if c != '-' {
			m |= 1 << (8 - i)
		}
	}
	for _, c := range s[:len(s)-9] {
		if i := strings.IndexRune(modeLetters, c); i >= 0 {
			m |= 1 << (31 - i)
		}
	}
	return m
}

// modeLetters are fs.FileMode's type letters, from its highest bit.
const modeLetters = "dalTLDpSugct?"

// CopyIn implements sandbox.Sandbox: the archive is checked and rewritten
// here by hostfs.SanitizeTar (the common safe-extraction rules), uploaded
// as one file and unpacked with tar inside the sandbox, so modes and
// symlinks survive.
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
	if err := w.envd.Upload(ctx, tmp, clean); err != nil {
		return unavailable(err)
	}
	_, code, stderr, err := w.run(ctx, "copy into "+strconv.Quote(dir), hosted.UnpackScript(tmp, r.Follow))
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("copy into %q: tar exited %d: %s (the template needs tar)", dir, code, stderr)
	}
	return nil
}

// CopyOut implements sandbox.Sandbox: tar runs inside the sandbox, the
// archive is downloaded as one file and its member names are made
// relative to dir. Closing the stream removes the remote archive.
func (w *Workspace) CopyOut(ctx context.Context, dir string) (io.ReadCloser, error) {
	r, err := w.resolve(ctx, "copy out of", dir, true)
	if err != nil {
		return nil, err
	}
	if err := hosted.CheckCopyOut(r, dir); err != nil {
		return nil, err
	}
	tmp := w.p.tempDir + "/agentctl-out-" + nonce() + ".tar"
	// GNU tar stores hard-linked files as files (the archive is checked
	// like any other when it is restored, and hard links are refused).
	script := "mkdir -p -- " + sandbox.ShellQuote(w.p.tempDir) + " || exit 1\nh=\ncase $(tar --help 2>&1) in *hard-dereference*) h=--hard-dereference;; esac\n" +
		"tar $h -cf " + sandbox.ShellQuote(tmp) + " -C " + sandbox.ShellQuote(r.Follow) + " .\n"
	_, code, stderr, err := w.run(ctx, "copy out of "+strconv.Quote(dir), script)
	cleanup := func() {
		cctx, cancel := sandbox.CleanupContext(ctx)
		defer cancel()
		_ = w.envd.Remove(cctx, tmp)
	}
	if err != nil {
		cleanup()
		return nil, err
	}
	if code != 0 {
		cleanup()
		return nil, fmt.Errorf("copy out of %q: tar exited %d: %s (the template needs tar)", dir, code, stderr)
	}
	body, err := w.envd.Download(ctx, tmp)
	if err != nil {
		cleanup()
		return nil, unavailable(err)
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(sandbox.TrimTarNames(body, pw, nil)) }()
	return sandbox.ReadCloser(pr, func() error {
		pr.Close()
		body.Close()
		cleanup()
		return nil
	}), nil
}
