package e2b

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/agentctl/agentctl/providers/e2b/internal/envd/filesystem"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/hostfs"
)

// Limits for CopyIn archives.
const (
	maxTarMembers = 200_000
	maxTarBytes   = 8 << 30
)

// abs maps a workspace path to an absolute sandbox path with the
// workspace path policy (sandbox.CleanPath), refusing lexical escapes.
func (w *Workspace) abs(rel string) (string, error) {
	if strings.ContainsRune(rel, '\n') {
		return "", fmt.Errorf("path %q contains a newline: %w", rel, sandbox.ErrPathEscape)
	}
	c, err := sandbox.CleanPath(w.root, rel)
	if err != nil {
		return "", err
	}
	return path.Join(w.root, c), nil
}

// resolve checks rel against the workspace inside the sandbox: symlinks
// are resolved there (envd's file endpoints follow them), and a path
// whose resolution leaves the workspace is refused with
// sandbox.ErrPathEscape. follow says whether a final symlink is followed.
func (w *Workspace) resolve(ctx context.Context, op, rel string, follow bool) (sandbox.ResolvedPath, error) {
	p, err := w.abs(rel)
	if err != nil {
		return sandbox.ResolvedPath{}, err
	}
	script := "set -- " + sandbox.ShellQuote(w.root) + " " + sandbox.ShellQuote(p) + "\n" + sandbox.PathResolverScript
	out, code, stderr, err := w.run(ctx, op, script)
	if err != nil {
		return sandbox.ResolvedPath{}, err
	}
	if code != 0 {
		return sandbox.ResolvedPath{}, fmt.Errorf("%s %q: %s", op, rel, stderr)
	}
	return sandbox.CheckResolvedPath(op, rel, p, w.root, follow, strings.Split(out, "\n"))
}

// ReadFile implements sandbox.Sandbox through envd's GET /files. FIFOs,
// sockets and devices are refused before envd opens them.
func (w *Workspace) ReadFile(ctx context.Context, rel string, limit int64) ([]byte, error) {
	r, err := w.resolve(ctx, "read", rel, true)
	if err != nil {
		return nil, err
	}
	switch r.Kind {
	case 'N':
		return nil, fmt.Errorf("read %q: %w", rel, fs.ErrNotExist)
	case 'D':
		return nil, fmt.Errorf("read %q: is a directory", rel)
	}
	if err := r.Special("read", rel); err != nil {
		return nil, err
	}
	body, err := w.envd.Download(ctx, r.Follow)
	if err != nil {
		return nil, unavailable(err)
	}
	defer body.Close()
	var rd io.Reader = body
	if limit > 0 {
		rd = io.LimitReader(body, limit+1)
	}
	b, err := io.ReadAll(rd)
	if err != nil {
		return nil, fmt.Errorf("read %q: %w", rel, err)
	}
	if limit > 0 && int64(len(b)) > limit {
		return nil, fmt.Errorf("read %q: file is larger than %d bytes", rel, limit)
	}
	return b, nil
}

// WriteFile implements sandbox.Sandbox through envd's POST /files (which
// creates the parents), then sets the mode when it is not 0644.
func (w *Workspace) WriteFile(ctx context.Context, rel string, data []byte, mode fs.FileMode) error {
	r, err := w.resolve(ctx, "write", rel, true)
	if err != nil {
		return err
	}
	if r.Kind == 'D' {
		return fmt.Errorf("write %q: is a directory", rel)
	}
	if err := r.Special("write", rel); err != nil {
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
	if r.Abs == w.root {
		return errors.New("refusing to remove the workspace root")
	}
	switch r.Kind {
	case 'N':
		return fmt.Errorf("remove %q: %w", rel, fs.ErrNotExist)
	case 'D':
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
	if r.Kind != 'N' && r.Kind != 'D' {
		return fmt.Errorf("mkdir %q: %w", rel, fs.ErrExist)
	}
	return unavailable(w.envd.MakeDir(ctx, r.Follow))
}

// Stat implements sandbox.Sandbox; a final symlink is not followed.
func (w *Workspace) Stat(ctx context.Context, rel string) (sandbox.FileInfo, error) {
	r, err := w.resolve(ctx, "stat", rel, false)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	if r.Kind == 'N' {
		return sandbox.FileInfo{}, fmt.Errorf("stat %q: %w", rel, fs.ErrNotExist)
	}
	return r.Info(w.root), nil
}

// ReadDir implements sandbox.Sandbox through envd's ListDir; symlinks are
// listed as symlinks, with their target.
func (w *Workspace) ReadDir(ctx context.Context, rel string) ([]sandbox.FileInfo, error) {
	r, err := w.resolve(ctx, "list", rel, true)
	if err != nil {
		return nil, err
	}
	switch r.Kind {
	case 'N':
		return nil, fmt.Errorf("list %q: %w", rel, fs.ErrNotExist)
	case 'D':
	default:
		return nil, fmt.Errorf("list %q: not a directory", rel)
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
	var clean bytes.Buffer
	err = hostfs.SanitizeTar(ctx, r.Rel(w.root), rd, &clean, hostfs.SanitizeOptions{
		Limits:          hostfs.ExtractLimits{MaxMembers: maxTarMembers, MaxBytes: maxTarBytes},
		KeepPermissions: true,
	})
	if err != nil {
		return fmt.Errorf("copy into %q: %w", dir, err)
	}
	tmp := w.p.tempDir + "/agentctl-in-" + nonce() + ".tar"
	if err := w.envd.Upload(ctx, tmp, clean.Bytes()); err != nil {
		return unavailable(err)
	}
	script := "t=" + sandbox.ShellQuote(tmp) + "\nmkdir -p -- " + sandbox.ShellQuote(r.Follow) + " && tar -xf \"$t\" -C " + sandbox.ShellQuote(r.Follow) + "\nrc=$?\nrm -f -- \"$t\"\nexit $rc\n"
	_, code, stderr, err := w.run(ctx, "copy into "+strconv.Quote(dir), script)
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
	if r.Kind != 'D' {
		return nil, fmt.Errorf("copy out of %q: not a directory", dir)
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
