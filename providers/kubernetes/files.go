package kubernetes

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/hostfs"
)

// abs maps a workspace path to an absolute path in the Pod with the
// workspace path policy (sandbox.CleanPath), refusing lexical escapes.
func (s *Sandbox) abs(rel string) (string, error) {
	// The resolver prints one path per line.
	if strings.ContainsRune(rel, '\n') {
		return "", fmt.Errorf("path %q contains a newline: %w", rel, sandbox.ErrPathEscape)
	}
	c, err := sandbox.CleanPath(s.d.Root, rel)
	if err != nil {
		return "", err
	}
	return path.Join(s.d.Root, c), nil
}

// resolved is what the in-Pod resolver learned about a path.
type resolved = sandbox.ResolvedPath

// actions run after the resolver, in the same exec, when $3 names one
// and the path stays in the workspace (the checks resolve makes, made
// here before anything is read or written): "read" prints the regular
// file the path leads to ($4: at most that many bytes), "write" replaces
// it with stdin and gives it mode $4. Either first prints actionMark on a
// line of its own; without it the action did not run.
const actions = `[ -n "${3:-}" ] || exit 0
if [ "$2" != "$1" ]; then case "$d/${2##*/}" in "$r"|"$r"/*) ;; *) exit 0 ;; esac; fi
case "$f" in "$r"|"$r"/*) ;; *) exit 0 ;; esac
case $3 in
read)
  [ -f "$f" ] || exit 0
  echo ` + actionMark + `
  if [ -n "${4:-}" ]; then exec head -c "$4" -- "$f"; else exec cat -- "$f"; fi ;;
write)
  if [ -e "$f" ] && [ ! -f "$f" ]; then exit 0; fi
  echo ` + actionMark + `
  mkdir -p -- "${f%/*}" && cat > "$f" && exec chmod "$4" -- "$f" ;;
esac
`

// actionMark starts the output of an action.
const actionMark = "--agentctl-action--"

// resolve checks rel against the workspace inside the Pod: a path whose
// resolution leaves the workspace is refused with sandbox.ErrPathEscape.
// follow says whether a final symlink is followed.
func (s *Sandbox) resolve(ctx context.Context, op, rel string, follow bool) (resolved, error) {
	r, _, _, err := s.resolveDo(ctx, op, rel, follow, "", nil)
	return r, err
}

// resolveDo is resolve, then action (see actions) in the same exec when
// the path stays in the workspace: it returns the action's output and
// whether it ran, and an error when the exec or the action failed.
func (s *Sandbox) resolveDo(ctx context.Context, op, rel string, follow bool, action string, stdin io.Reader, args ...string) (resolved, []byte, bool, error) {
	p, err := s.abs(rel)
	if err != nil {
		return resolved{}, nil, false, err
	}
	script := sandbox.PathResolverScript
	argv := []string{s.d.Root, p}
	if action != "" {
		script += actions
		argv = append(argv, action)
		argv = append(argv, args...)
	}
	out, stderr, code, err := s.runScript(ctx, script, stdin, argv...)
	if err != nil {
		return resolved{}, nil, false, fmt.Errorf("%s %q: %w", op, rel, err)
	}
	lines := strings.SplitN(string(out), "\n", 8)
	if len(lines) < 7 || lines[3] == "" || lines[6] == "" {
		if code != 0 {
			return resolved{}, nil, false, fmt.Errorf("%s %q: %s", op, rel, strings.TrimSpace(string(stderr)))
		}
		return resolved{}, nil, false, fmt.Errorf("%s %q: unexpected resolver output %q", op, rel, out)
	}
	var data []byte
	ran := false
	if len(lines) == 8 {
		if rest, ok := strings.CutPrefix(lines[7], actionMark+"\n"); ok {
			ran, data = true, []byte(rest)
		}
	}
	if ran && code != 0 {
		return resolved{}, nil, true, fmt.Errorf("%s %q: %s", op, rel, strings.TrimSpace(string(stderr)))
	}
	if code != 0 {
		return resolved{}, nil, false, fmt.Errorf("%s %q: %s", op, rel, strings.TrimSpace(string(stderr)))
	}
	r, err := s.checkResolved(op, rel, p, follow, lines)
	if err != nil && ran {
		// The in-Pod checks let the action run where these refuse: never
		// expected, and said loudly if it happens.
		return r, nil, true, fmt.Errorf("%s %q: the path was resolved differently in the Pod and by agentctl: %w", op, rel, err)
	}
	return r, data, ran, err
}

// checkResolved parses the resolver's first seven lines for the path p
// (rel) and applies the workspace checks.
func (s *Sandbox) checkResolved(op, rel, p string, follow bool, lines []string) (resolved, error) {
	return sandbox.CheckResolvedPath(op, rel, p, s.d.Root, follow, lines)
}

// ReadFile implements sandbox.Sandbox: one exec resolves the path and,
// when it leads to a regular file in the workspace, reads it.
func (s *Sandbox) ReadFile(ctx context.Context, rel string, limit int64) ([]byte, error) {
	var args []string
	if limit > 0 {
		args = []string{strconv.FormatInt(limit+1, 10)}
	}
	r, data, ran, err := s.resolveDo(ctx, "read", rel, true, "read", nil, args...)
	if err != nil {
		return nil, err
	}
	switch {
	case r.Followed == 'N':
		return nil, fmt.Errorf("read %q: %w", rel, fs.ErrNotExist)
	case r.Followed == 'D':
		return nil, fmt.Errorf("read %q: is a directory", rel)
	}
	if err := r.Special("read", rel); err != nil {
		return nil, err
	}
	if !ran {
		return nil, fmt.Errorf("read %q: the file changed while it was read; try again", rel)
	}
	if limit > 0 && int64(len(data)) > limit {
		return nil, fmt.Errorf("read %q: file is larger than %d bytes", rel, limit)
	}
	return data, nil
}

// WriteFile implements sandbox.Sandbox (parents are created): one exec
// resolves the path and, when it stays in the workspace and is not a
// directory or a special file, writes it.
func (s *Sandbox) WriteFile(ctx context.Context, rel string, data []byte, mode fs.FileMode) error {
	if mode == 0 {
		mode = 0o644
	}
	r, _, ran, err := s.resolveDo(ctx, "write", rel, true, "write", bytes.NewReader(data), fmt.Sprintf("%04o", mode.Perm()))
	if err != nil {
		return err
	}
	if r.Followed == 'D' {
		return fmt.Errorf("write %q: is a directory", rel)
	}
	if err := r.Special("write", rel); err != nil {
		return err
	}
	if !ran {
		return fmt.Errorf("write %q: the path changed while it was written; try again", rel)
	}
	return nil
}

// Remove implements sandbox.Sandbox; it does not follow a final symlink.
func (s *Sandbox) Remove(ctx context.Context, rel string) error {
	r, err := s.resolve(ctx, "remove", rel, false)
	if err != nil {
		return err
	}
	if r.Abs == s.d.Root {
		return errors.New("refusing to remove the workspace root")
	}
	if r.Kind == 'N' {
		return fmt.Errorf("remove %q: %w", rel, fs.ErrNotExist)
	}
	const script = `if [ -d "$1" ] && [ ! -L "$1" ]; then exec rmdir -- "$1"; else exec rm -f -- "$1"; fi`
	_, stderr, code, err := s.runScript(ctx, script, nil, r.NoFollow)
	if err != nil {
		return fmt.Errorf("remove %q: %w", rel, err)
	}
	if code != 0 {
		return fmt.Errorf("remove %q: %s", rel, strings.TrimSpace(string(stderr)))
	}
	return nil
}

// Mkdir implements sandbox.Sandbox.
func (s *Sandbox) Mkdir(ctx context.Context, rel string) error {
	r, err := s.resolve(ctx, "mkdir", rel, true)
	if err != nil {
		return err
	}
	_, stderr, code, err := s.runScript(ctx, `exec mkdir -p -- "$1"`, nil, r.Follow)
	if err != nil {
		return fmt.Errorf("mkdir %q: %w", rel, err)
	}
	if code != 0 {
		return fmt.Errorf("mkdir %q: %s", rel, strings.TrimSpace(string(stderr)))
	}
	return nil
}

// Stat implements sandbox.Sandbox; a final symlink is not followed.
func (s *Sandbox) Stat(ctx context.Context, rel string) (sandbox.FileInfo, error) {
	r, err := s.resolve(ctx, "stat", rel, false)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	if r.Kind == 'N' {
		return sandbox.FileInfo{}, fmt.Errorf("stat %q: %w", rel, fs.ErrNotExist)
	}
	return r.Info(s.d.Root), nil
}

// lister prints, for each entry of directory $1, its raw mode, size,
// mtime and link target, then its name, each field ended by a NUL.

// ReadDir implements sandbox.Sandbox: entries as lstat describes them
// (a symlink is listed as a symlink with its target).
func (s *Sandbox) ReadDir(ctx context.Context, rel string) ([]sandbox.FileInfo, error) {
	r, err := s.resolve(ctx, "list", rel, true)
	if err != nil {
		return nil, err
	}
	if r.Followed == 'N' {
		return nil, fmt.Errorf("list %q: %w", rel, fs.ErrNotExist)
	}
	if r.Followed != 'D' {
		return nil, fmt.Errorf("list %q: not a directory", rel)
	}
	out, stderr, code, err := s.runScript(ctx, sandbox.DirListScript, nil, r.Follow)
	if err != nil {
		return nil, fmt.Errorf("list %q: %w", rel, err)
	}
	if code != 0 {
		return nil, fmt.Errorf("list %q: %s", rel, strings.TrimSpace(string(stderr)))
	}
	return sandbox.ParseDirList(r.Rel(s.d.Root), out), nil
}

// Limits of a CopyIn archive.
const (
	maxTarMembers = 1 << 20
	maxTarBytes   = 16 << 30
)

// extractor unpacks the tar on stdin into directory $1 of the Pod. First
// it reads the archive's directories (one a line, backslash and newline
// as \0134 and \0012, ended by an empty line) and replaces any symlink
// standing at one of them by nothing (tar then makes the directory):
// BusyBox tar would otherwise write through such a link. Symlinks are
// kept whatever their target (EXTRACT_UNSAFE_SYMLINKS: BusyBox skips
// absolute and climbing ones otherwise); owners are not restored.
//
// Then come the modification times of the archive's directories and
// symlinks, one "SECONDS NAME" line each (grouped by time), and an empty
// line; they are set once tar is done (tar sets a directory's time
// before writing into it, and none on a symlink), so that a restored
// workspace archives as it was archived.
const extractor = `mkdir -p -- "$1" && cd -- "$1" || exit 1
while IFS= read -r l; do
  [ -z "$l" ] && break
  n=$(printf '%bx' "$l"); n=${n%x}
  if [ -L "$n" ]; then rm -f -- "$n" || exit 1; fi
done
times=$(mktemp) || exit 1
trap 'rm -f -- "$times"' EXIT
while IFS= read -r l; do
  [ -z "$l" ] && break
  printf '%s\n' "$l" >> "$times"
done
EXTRACT_UNSAFE_SYMLINKS=1 tar -x -o -f - || exit
cur=; set --
while IFS= read -r l; do
  s=${l%% *}; n=$(printf '%bx' "${l#* }"); n=${n%x}
  if [ "$s" != "$cur" ] || [ $# -ge 200 ]; then
    if [ $# -gt 0 ]; then touch -h -d "@$cur" -- "$@" || exit; fi
    cur=$s; set --
  fi
  set -- "$@" "$n"
done < "$times"
if [ $# -gt 0 ]; then touch -h -d "@$cur" -- "$@" || exit; fi
`

// extractorInput is what the extractor reads before the archive: the
// archive's directories, then its directories' and symlinks' times.
func extractorInput(archive io.Reader) (string, error) {
	escape := func(name string) string {
		name = strings.TrimSuffix(name, "/")
		name = strings.ReplaceAll(name, `\`, `\0134`)
		return strings.ReplaceAll(name, "\n", `\0012`)
	}
	var dirs strings.Builder
	var times []string
	tr := tar.NewReader(archive)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", err
		}
		if h.Typeflag == tar.TypeDir {
			dirs.WriteString(escape(h.Name) + "\n")
		}
		if (h.Typeflag == tar.TypeDir || h.Typeflag == tar.TypeSymlink) && !h.ModTime.IsZero() {
			times = append(times, strconv.FormatInt(h.ModTime.Unix(), 10)+" "+escape(h.Name))
		}
	}
	slices.SortStableFunc(times, func(a, b string) int {
		return strings.Compare(a[:strings.IndexByte(a, ' ')], b[:strings.IndexByte(b, ' ')])
	})
	return dirs.String() + "\n" + strings.Join(append(times, ""), "\n") + "\n", nil
}

// CopyIn implements sandbox.Sandbox. The archive is checked and rewritten
// by hostfs.SanitizeTar with the common safe-extraction rules into a
// temporary file on the host, then streamed to tar -x in the Pod.
func (s *Sandbox) CopyIn(ctx context.Context, dir string, rd io.Reader) error {
	r, err := s.resolve(ctx, "copy into", dir, true)
	if err != nil {
		return err
	}
	if r.Followed != 'D' && r.Followed != 'N' {
		return fmt.Errorf("copy into %q: not a directory", dir)
	}
	tmp, err := os.CreateTemp("", "agentctl-copyin-*.tar")
	if err != nil {
		return fmt.Errorf("copy into %q: temporary file: %w", dir, err)
	}
	defer func() {
		tmp.Close()
		os.Remove(tmp.Name())
	}()
	err = hostfs.SanitizeTar(ctx, r.Rel(s.d.Root), rd, tmp, hostfs.SanitizeOptions{
		Limits:          hostfs.ExtractLimits{MaxMembers: maxTarMembers, MaxBytes: maxTarBytes},
		KeepPermissions: true,
	})
	if err != nil {
		return fmt.Errorf("copy into %q: %w", dir, err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return err
	}
	head, err := extractorInput(tmp)
	if err != nil {
		return fmt.Errorf("copy into %q: reading the checked archive: %w", dir, err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return err
	}
	_, stderr, code, err := s.runScript(ctx, extractor, io.MultiReader(strings.NewReader(head), tmp), r.Follow)
	if err != nil {
		return fmt.Errorf("copy into %q: %w", dir, err)
	}
	if code != 0 {
		return fmt.Errorf("copy into %q: tar in the Pod exited %d: %s (the image needs tar)", dir, code, strings.TrimSpace(string(stderr)))
	}
	return nil
}

// readAgain reads file p of the Pod (absolute) with its size: a hard
// link the Pod's tar archives as a link member, which CopyIn refuses.
func (s *Sandbox) readAgain(ctx context.Context, p string) (io.ReadCloser, int64, error) {
	pr, pw := io.Pipe()
	go func() {
		var stderr bytes.Buffer
		code, err := s.stream(ctx, []string{"/bin/sh", "-c", `stat -c %s -- "$1" && exec cat -- "$1"`, "sh", p}, streams{stdout: pw, stderr: &stderr})
		if err == nil && code != 0 {
			err = fmt.Errorf("exit %d: %s", code, strings.TrimSpace(stderr.String()))
		}
		pw.CloseWithError(err)
	}()
	br := bufio.NewReader(pr)
	line, err := br.ReadString('\n')
	size, perr := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
	if err != nil || perr != nil {
		pr.CloseWithError(errors.New("the size could not be read"))
		return nil, 0, fmt.Errorf("copy out: reading the hard link %s again: %v", p, errors.Join(err, perr))
	}
	return sandbox.ReadCloser(br, func() error { return pr.Close() }), size, nil
}

// CopyOut implements sandbox.Sandbox: tar -c runs in the Pod and its
// output streams back with names made relative to dir; hard links come
// out as regular files.
func (s *Sandbox) CopyOut(ctx context.Context, dir string) (io.ReadCloser, error) {
	r, err := s.resolve(ctx, "copy out of", dir, true)
	if err != nil {
		return nil, err
	}
	if r.Followed != 'D' {
		return nil, fmt.Errorf("copy out of %q: not a directory", dir)
	}
	ctx, cancel := context.WithCancel(ctx)
	tarR, tarW := io.Pipe()
	outR, outW := io.Pipe()
	go func() {
		var stderr bytes.Buffer
		code, err := s.stream(ctx, []string{"/bin/sh", "-c", `cd -- "$1" && exec tar -c -f - .`, "sh", r.Follow}, streams{stdout: tarW, stderr: &stderr})
		switch {
		case err != nil:
			tarW.CloseWithError(fmt.Errorf("copy out of %q: %w", dir, err))
		case code != 0:
			tarW.CloseWithError(fmt.Errorf("copy out of %q: tar in the Pod exited %d: %s (the image needs tar)", dir, code, strings.TrimSpace(stderr.String())))
		default:
			tarW.Close()
		}
	}()
	go func() {
		err := sandbox.TrimTarNames(tarR, outW, func(name string) (io.ReadCloser, int64, error) {
			return s.readAgain(ctx, path.Join(r.Follow, name))
		})
		tarR.CloseWithError(errors.New("copy out: the reader stopped"))
		outW.CloseWithError(err)
	}()
	return sandbox.ReadCloser(outR, func() error {
		outR.Close()
		cancel()
		return nil
	}), nil
}
