//go:build linux

package mount

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Mounter makes and clears the mounts of one state directory.
type Mounter struct {
	// Dir holds each mount's record (KEY.json), its mount point (KEY/),
	// rclone's log (KEY.log) and cache (KEY.cache/).
	Dir string
	// Rclone is the rclone program; default "rclone" on PATH.
	Rclone string
	// Environ is the environment rclone starts from (PATH, HOME, proxies);
	// the variables of cloud SDKs and rclone's own are removed from it.
	Environ []string
	// Timeout bounds the wait for a mount to appear and for a check;
	// default 30s.
	Timeout time.Duration
}

// record is what a mount's KEY.json keeps: enough to find and clear the
// mount after a killed agentctl, and no credential.
type record struct {
	Lineage  string `json:"lineage"`
	Address  string `json:"address"`
	Path     string `json:"path"`
	Source   string `json:"source"`
	HostDir  string `json:"host_dir"`
	ReadOnly bool   `json:"read_only"`
	PID      int    `json:"pid,omitempty"`
}

// rclone is the rclone program: Rclone, or "rclone" found on the PATH of
// Environ (the process's when Environ has none).
func (m *Mounter) rclone() (string, error) {
	if m.Rclone != "" {
		return m.Rclone, nil
	}
	path, ok := os.LookupEnv("PATH")
	for _, kv := range m.Environ {
		if v, found := strings.CutPrefix(kv, "PATH="); found {
			path, ok = v, true
		}
	}
	if !ok {
		return exec.LookPath("rclone")
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, "rclone")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("no rclone on PATH %s", path)
}

func (m *Mounter) timeout() time.Duration {
	if m.Timeout > 0 {
		return m.Timeout
	}
	return 30 * time.Second
}

// HostDir is where the mount of o's workspace path is made.
func (m *Mounter) HostDir(o Owner, path string) string {
	return filepath.Join(m.Dir, key(o, path))
}

// Available says why mounts cannot be made on this machine, or nil.
func (m *Mounter) Available() error {
	if _, err := m.rclone(); err != nil {
		return fmt.Errorf("rclone is not installed (%v): install it, on Debian or Ubuntu with `apt-get install rclone fuse3`", err)
	}
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("FUSE is unavailable (%v): load the fuse module, and give a container /dev/fuse and the right to mount", err)
	}
	f.Close()
	return nil
}

// Mount mounts def for its owner and returns the host directory it is at.
// The record is written before rclone starts, so a mount is never left
// untracked; one the owner already has at that path (left by a killed
// agentctl) is cleared first. Nothing is left mounted when it fails.
func (m *Mounter) Mount(ctx context.Context, o Owner, def Def) (string, error) {
	if err := m.Available(); err != nil {
		return "", err
	}
	k := key(o, def.Path)
	rec := record{Lineage: o.Lineage, Address: o.Address, Path: def.Path, Source: def.Source(), HostDir: filepath.Join(m.Dir, k), ReadOnly: def.ReadOnly}
	if err := m.clearKey(ctx, k); err != nil {
		return "", err
	}
	if err := m.Check(ctx, def); err != nil {
		return "", err
	}
	if err := os.MkdirAll(rec.HostDir, 0o700); err != nil {
		return "", fmt.Errorf("making the mount point: %w", err)
	}
	if err := m.writeRecord(k, rec); err != nil {
		return "", err
	}
	pid, err := m.start(ctx, k, def, rec.HostDir)
	if err != nil {
		m.clearKey(context.WithoutCancel(ctx), k)
		return "", err
	}
	rec.PID = pid
	if err := m.writeRecord(k, rec); err != nil {
		m.clearKey(context.WithoutCancel(ctx), k)
		return "", err
	}
	return rec.HostDir, nil
}

func (m *Mounter) writeRecord(k string, rec record) error {
	if err := os.MkdirAll(m.Dir, 0o700); err != nil {
		return fmt.Errorf("making the mounts directory: %w", err)
	}
	b, _ := json.Marshal(rec)
	tmp := filepath.Join(m.Dir, k+".json.tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("recording the mount: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(m.Dir, k+".json")); err != nil {
		return fmt.Errorf("recording the mount: %w", err)
	}
	return nil
}

// args are rclone mount's arguments: no credential among them.
func (m *Mounter) args(k string, def Def, hostDir string) []string {
	args := []string{"mount", def.remote(), hostDir,
		"--config", filepath.Join(m.Dir, "rclone.conf"), // never the user's; it need not exist
		"--allow-other",
		"--vfs-cache-mode", "writes", "--vfs-write-back", "1s",
		"--cache-dir", filepath.Join(m.Dir, k+".cache"),
		"--dir-cache-time", "5s",
		"--log-file", filepath.Join(m.Dir, k+".log"), "--log-level", "NOTICE",
		"--retries", "1", "--low-level-retries", "2",
	}
	if def.ReadOnly {
		args = append(args, "--read-only")
	}
	return args
}

func (m *Mounter) command(ctx context.Context, def Def, args ...string) *exec.Cmd {
	bin, err := m.rclone()
	if err != nil {
		bin = "rclone" // Available reported it; the start fails the same way
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(CleanEnviron(m.Environ), def.rcloneEnv()...)
	return cmd
}

// start runs rclone mount in a session of its own (it outlives agentctl,
// as the sandbox does) and waits until the mount is there.
func (m *Mounter) start(ctx context.Context, k string, def Def, hostDir string) (int, error) {
	logPath := filepath.Join(m.Dir, k+".log")
	os.Remove(logPath)
	// Not tied to ctx: the mount must outlive this command.
	cmd := m.command(context.WithoutCancel(ctx), def, m.args(k, def, hostDir)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("starting rclone: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.NewTimer(m.timeout())
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if mounted(hostDir) {
			return cmd.Process.Pid, nil
		}
		select {
		case err := <-exited:
			return 0, fmt.Errorf("rclone mount of %s ended before the mount was made (%v): %s", def.Source(), err, logTail(logPath))
		case <-ctx.Done():
			cmd.Process.Kill()
			return 0, ctx.Err()
		case <-deadline.C:
			cmd.Process.Kill()
			return 0, fmt.Errorf("rclone did not mount %s within %s: %s", def.Source(), m.timeout(), logTail(logPath))
		case <-tick.C:
		}
	}
}

// logTail is the last lines of rclone's log, for an error message.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil || len(bytes.TrimSpace(b)) == 0 {
		return "rclone logged nothing"
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strings.Join(lines, "; ")
}

// Live says whether the mount at hostDir is up and answers: a mount
// whose rclone ended is still listed, but says "transport endpoint is
// not connected".
func (m *Mounter) Live(hostDir string) bool {
	if !mounted(hostDir) {
		return false
	}
	var st unix.Stat_t
	return unix.Stat(hostDir, &st) == nil
}

// mounted says whether a FUSE file system is mounted at dir.
func mounted(dir string) bool {
	points, err := mountPoints()
	if err != nil {
		return false
	}
	for _, p := range points {
		if p.dir == dir && strings.HasPrefix(p.fstype, "fuse") {
			return true
		}
	}
	return false
}

type mountPoint struct{ dir, fstype string }

// mountPoints lists this mount namespace's mounts.
func mountPoints() ([]mountPoint, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []mountPoint
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source super
		fields := strings.Fields(sc.Text())
		if len(fields) < 7 {
			continue
		}
		fstype := ""
		for i := 6; i < len(fields)-1; i++ {
			if fields[i] == "-" {
				fstype = fields[i+1]
				break
			}
		}
		out = append(out, mountPoint{dir: unescape(fields[4]), fstype: fstype})
	}
	return out, sc.Err()
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// UnmountUnder detaches every mount at or below dir (deepest first), so
// that removing dir never reaches into a bucket through a mount.
func UnmountUnder(dir string) error {
	points, err := mountPoints()
	if err != nil {
		return fmt.Errorf("listing mounts: %w", err)
	}
	dir = filepath.Clean(dir)
	var under []string
	for _, p := range points {
		if p.dir == dir || strings.HasPrefix(p.dir, dir+"/") {
			under = append(under, p.dir)
		}
	}
	var errs []error
	for i := len(under) - 1; i >= 0; i-- {
		if err := unix.Unmount(under[i], unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", under[i], err))
		}
	}
	return errors.Join(errs...)
}
