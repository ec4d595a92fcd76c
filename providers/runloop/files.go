package runloop

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentctl/agentctl/providers/internal/hosted"
	"github.com/agentctl/agentctl/sandbox"
)

// resolve checks rel against the workspace inside the devbox; see
// hosted.Resolve.
func (w *Workspace) resolve(ctx context.Context, op, rel string, follow bool) (sandbox.ResolvedPath, error) {
	return hosted.Resolve(ctx, w.run, w.root, op, rel, follow)
}

// script runs a helper script with arguments and fails on a non-zero
// exit.
func (w *Workspace) script(ctx context.Context, op, rel, script string, args ...string) (string, error) {
	line := "set --"
	for _, a := range args {
		line += " " + sandbox.ShellQuote(a)
	}
	out, code, stderr, err := w.run(ctx, op+" "+strconv.Quote(rel), line+"\n"+script)
	if err != nil {
		return "", err
	}
	if code != 0 {
		return "", fmt.Errorf("%s %q: %s", op, rel, stderr)
	}
	return out, nil
}

// ReadFile implements sandbox.Sandbox through Runloop's download_file.
func (w *Workspace) ReadFile(ctx context.Context, rel string, limit int64) ([]byte, error) {
	r, err := w.resolve(ctx, "read", rel, true)
	if err != nil {
		return nil, err
	}
	if err := hosted.CheckRead(r, rel); err != nil {
		return nil, err
	}
	b, err := w.c.Download(ctx, w.id, r.Follow)
	if err != nil {
		return nil, w.unavailable(ctx, err)
	}
	if limit > 0 && int64(len(b)) > limit {
		return nil, fmt.Errorf("read %q: file is larger than %d bytes", rel, limit)
	}
	return b, nil
}

// WriteFile implements sandbox.Sandbox through Runloop's upload_file,
// then sets the mode.
func (w *Workspace) WriteFile(ctx context.Context, rel string, data []byte, mode fs.FileMode) error {
	r, err := w.resolve(ctx, "write", rel, true)
	if err != nil {
		return err
	}
	if err := hosted.CheckWrite(r, rel); err != nil {
		return err
	}
	if _, err := w.script(ctx, "write", rel, `mkdir -p -- "$1"`, path.Dir(r.Follow)); err != nil {
		return err
	}
	if err := w.c.Upload(ctx, w.id, r.Follow, data); err != nil {
		return w.unavailable(ctx, err)
	}
	if mode == 0 {
		mode = 0o644
	}
	_, err = w.script(ctx, "set the mode of", rel, `exec chmod "$1" -- "$2"`, fmt.Sprintf("%04o", mode.Perm()), r.Follow)
	return err
}

// Remove implements sandbox.Sandbox; it does not follow a final symlink
// and refuses a directory that is not empty.
func (w *Workspace) Remove(ctx context.Context, rel string) error {
	r, err := w.resolve(ctx, "remove", rel, false)
	if err != nil {
		return err
	}
	if err := hosted.CheckRemove(r, w.root, rel); err != nil {
		return err
	}
	_, err = w.script(ctx, "remove", rel, `if [ -d "$1" ] && [ ! -L "$1" ]; then exec rmdir -- "$1"; else exec rm -f -- "$1"; fi`, r.NoFollow)
	return err
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
	_, err = w.script(ctx, "mkdir", rel, `exec mkdir -p -- "$1"`, r.Follow)
	return err
}

// Stat implements sandbox.Sandbox; a final symlink is not followed.
func (w *Workspace) Stat(ctx context.Context, rel string) (sandbox.FileInfo, error) {
	r, err := w.resolve(ctx, "stat", rel, false)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	return hosted.Stat(r, w.root, rel)
}

// lister prints, for each entry of directory $1, its raw mode, size,
// mtime and link target, then its name, each field ended by a NUL.
const lister = `cd -- "$1" || exit 1
for f in * .[!.]* ..?*; do
  [ -e "$f" ] || [ -L "$f" ] || continue
  t=
  [ -L "$f" ] && t=$(readlink -- "$f")
  printf '%s\000%s\000%s\000' "$(stat -c '%f %s %Y' -- "$f")" "$t" "$f"
done
`

// ReadDir implements sandbox.Sandbox: entries as lstat describes them
// (a symlink is listed as a symlink with its target).
func (w *Workspace) ReadDir(ctx context.Context, rel string) ([]sandbox.FileInfo, error) {
	r, err := w.resolve(ctx, "list", rel, true)
	if err != nil {
		return nil, err
	}
	if err := hosted.CheckList(r, rel); err != nil {
		return nil, err
	}
	out, err := w.script(ctx, "list", rel, lister, r.Follow)
	if err != nil {
		return nil, err
	}
	base := r.Rel(w.root)
	fields := strings.Split(out, "\x00")
	var list []sandbox.FileInfo
	for i := 0; i+2 < len(fields); i += 3 {
		st, target, name := strings.Fields(fields[i]), fields[i+1], fields[i+2]
		if len(st) != 3 {
			return nil, fmt.Errorf("list %q: unexpected stat output %q", rel, fields[i])
		}
		m, _ := strconv.ParseUint(st[0], 16, 32)
		size, _ := strconv.ParseInt(st[1], 10, 64)
		mt, _ := strconv.ParseInt(st[2], 10, 64)
		p := name
		if base != "." {
			p = base + "/" + name
		}
		list = append(list, sandbox.FileInfo{Path: p, Size: size, Mode: sandbox.FileModeOf(uint32(m)), ModTime: time.Unix(mt, 0), Target: target})
	}
	slices.SortFunc(list, func(a, b sandbox.FileInfo) int { return strings.Compare(a.Path, b.Path) })
	return list, nil
}

// CopyIn implements sandbox.Sandbox: the archive is checked and rewritten
// by hostfs.SanitizeTar, uploaded as one file and unpacked with tar in
// the devbox.
func (w *Workspace) CopyIn(ctx context.Context, dir string, rd io.Reader) error {
	r, err := w.resolve(ctx, "copy into", dir, true)
	if err != nil {
		return err
	}
	clean, err := hosted.SanitizeCopyIn(ctx, r, w.root, dir, rd)
	if err != nil {
		return err
	}
	tmp := tempDir + "/agentctl-in-" + nonce() + ".tar"
	if err := w.c.Upload(ctx, w.id, tmp, clean); err != nil {
		return w.unavailable(ctx, err)
	}
	_, err = w.script(ctx, "copy into", dir, `mkdir -p -- "$2" && tar -xf "$1" -C "$2"; rc=$?; rm -f -- "$1"; exit $rc`, tmp, r.Follow)
	return err
}

// CopyOut implements sandbox.Sandbox: tar runs in the devbox, the
// archive is downloaded and its member names made relative to dir.
func (w *Workspace) CopyOut(ctx context.Context, dir string) (io.ReadCloser, error) {
	r, err := w.resolve(ctx, "copy out of", dir, true)
	if err != nil {
		return nil, err
	}
	if err := hosted.CheckCopyOut(r, dir); err != nil {
		return nil, err
	}
	tmp := tempDir + "/agentctl-out-" + nonce() + ".tar"
	const pack = `h=
case $(tar --help 2>&1) in *hard-dereference*) h=--hard-dereference;; esac
tar $h -cf "$1" -C "$2" .`
	_, err = w.script(ctx, "copy out of", dir, pack, tmp, r.Follow)
	var body []byte
	if err == nil {
		body, err = w.c.Download(ctx, w.id, tmp)
		err = w.unavailable(ctx, err)
	}
	if _, rerr := w.script(ctx, "remove the archive of", dir, `exec rm -f -- "$1"`, tmp); rerr != nil && err == nil {
		err = rerr
	}
	if err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(sandbox.TrimTarNames(bytes.NewReader(body), pw, nil)) }()
	return pr, nil
}
