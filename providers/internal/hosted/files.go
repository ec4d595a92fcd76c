package hosted

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"

	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/hostfs"
)

// Limits for the archives CopyIn unpacks.
const (
	MaxTarMembers = 200_000
	MaxTarBytes   = 8 << 30
)

// Runner runs a shell script inside a sandbox and returns its standard
// output, exit code and standard error; op names it in errors.
type Runner func(ctx context.Context, op, script string) (stdout string, code int, stderr string, err error)

// Abs maps a workspace path to an absolute sandbox path with the workspace
// path policy (sandbox.CleanPath), refusing lexical escapes.
func Abs(root, rel string) (string, error) {
	// The resolver script reads one path per line.
	if strings.ContainsRune(rel, '\n') {
		return "", fmt.Errorf("path %q contains a newline: %w", rel, sandbox.ErrPathEscape)
	}
	c, err := sandbox.CleanPath(root, rel)
	if err != nil {
		return "", err
	}
	return path.Join(root, c), nil
}

// Resolve checks rel against the workspace root inside the sandbox:
// symlinks are resolved there by sandbox.PathResolverScript, and a path
// whose resolution leaves the workspace is refused with
// sandbox.ErrPathEscape. follow says whether a final symlink is followed.
func Resolve(ctx context.Context, run Runner, root, op, rel string, follow bool) (sandbox.ResolvedPath, error) {
	p, err := Abs(root, rel)
	if err != nil {
		return sandbox.ResolvedPath{}, err
	}
	script := "set -- " + sandbox.ShellQuote(root) + " " + sandbox.ShellQuote(p) + "\n" + sandbox.PathResolverScript
	out, code, stderr, err := run(ctx, op, script)
	if err != nil {
		return sandbox.ResolvedPath{}, err
	}
	if code != 0 {
		return sandbox.ResolvedPath{}, fmt.Errorf("%s %q: %s", op, rel, stderr)
	}
	return sandbox.CheckResolvedPath(op, rel, p, root, follow, strings.Split(out, "\n"))
}

// CheckRead refuses to read rel when it is missing, a directory, a FIFO, a
// socket or a device.
func CheckRead(r sandbox.ResolvedPath, rel string) error {
	switch r.Kind {
	case 'N':
		return fmt.Errorf("read %q: %w", rel, fs.ErrNotExist)
	case 'D':
		return fmt.Errorf("read %q: is a directory", rel)
	}
	return r.Special("read", rel)
}

// CheckWrite refuses to write rel when it is a directory, a FIFO, a socket
// or a device.
func CheckWrite(r sandbox.ResolvedPath, rel string) error {
	if r.Kind == 'D' {
		return fmt.Errorf("write %q: is a directory", rel)
	}
	return r.Special("write", rel)
}

// CheckRemove refuses to remove the workspace root or a missing rel.
func CheckRemove(r sandbox.ResolvedPath, root, rel string) error {
	if r.Abs == root {
		return errors.New("refusing to remove the workspace root")
	}
	if r.Kind == 'N' {
		return fmt.Errorf("remove %q: %w", rel, fs.ErrNotExist)
	}
	return nil
}

// CheckMkdir refuses to make a directory where something else stands.
func CheckMkdir(r sandbox.ResolvedPath, rel string) error {
	if r.Kind != 'N' && r.Kind != 'D' {
		return fmt.Errorf("mkdir %q: %w", rel, fs.ErrExist)
	}
	return nil
}

// CheckList refuses to list rel when it is missing or not a directory.
func CheckList(r sandbox.ResolvedPath, rel string) error {
	switch r.Kind {
	case 'N':
		return fmt.Errorf("list %q: %w", rel, fs.ErrNotExist)
	case 'D':
		return nil
	}
	return fmt.Errorf("list %q: not a directory", rel)
}

// CheckCopyOut refuses to archive rel when it is not a directory.
func CheckCopyOut(r sandbox.ResolvedPath, dir string) error {
	if r.Kind != 'D' {
		return fmt.Errorf("copy out of %q: not a directory", dir)
	}
	return nil
}

// Stat is the FileInfo of the resolved rel, or fs.ErrNotExist.
func Stat(r sandbox.ResolvedPath, root, rel string) (sandbox.FileInfo, error) {
	if r.Kind == 'N' {
		return sandbox.FileInfo{}, fmt.Errorf("stat %q: %w", rel, fs.ErrNotExist)
	}
	return r.Info(root), nil
}

// ReadLimited reads body, refusing more than limit bytes when limit > 0.
func ReadLimited(body io.Reader, rel string, limit int64) ([]byte, error) {
	rd := body
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

// SanitizeCopyIn checks and rewrites the archive rd for unpacking into the
// resolved directory r with hostfs.SanitizeTar's common safe-extraction
// rules, keeping permissions; dir names it in errors.
func SanitizeCopyIn(ctx context.Context, r sandbox.ResolvedPath, root, dir string, rd io.Reader) ([]byte, error) {
	var clean bytes.Buffer
	err := hostfs.SanitizeTar(ctx, r.Rel(root), rd, &clean, hostfs.SanitizeOptions{
		Limits:          hostfs.ExtractLimits{MaxMembers: MaxTarMembers, MaxBytes: MaxTarBytes},
		KeepPermissions: true,
	})
	if err != nil {
		return nil, fmt.Errorf("copy into %q: %w", dir, err)
	}
	return clean.Bytes(), nil
}

// UnpackScript is a shell script that unpacks the archive tar into dir
// (made when missing) and removes the archive, exiting with tar's status.
func UnpackScript(tar, dir string) string {
	return "t=" + sandbox.ShellQuote(tar) + "\nmkdir -p -- " + sandbox.ShellQuote(dir) + " && tar -xf \"$t\" -C " + sandbox.ShellQuote(dir) + "\nrc=$?\nrm -f -- \"$t\"\nexit $rc\n"
}

// CheckSession refuses session state that another provider type wrote, or
// that names no sandbox (noun is the service's word for one: "sandbox",
// "devbox"); the latter is sandbox.ErrNotFound.
func CheckSession(ss sandbox.SessionState, provider, noun string) error {
	if ss.Provider != "" && ss.Provider != provider {
		return fmt.Errorf("session state belongs to provider %q", ss.Provider)
	}
	if ss.ID == "" {
		return fmt.Errorf("session state has no %s id: %w", noun, sandbox.ErrNotFound)
	}
	return nil
}
