package runloopfake

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// Each devbox has a disk of its own: a directory under the fake's
// private disks directory, which the devbox sees at Root. Its commands
// run in a mount namespace of their own (unshare -m) with the disk
// bind-mounted over Root; its file uploads and downloads go to the disk.
// A disk snapshot is a tar of the disk; a devbox created from it starts
// with the tar unpacked into its disk. Shutting a devbox down removes its
// disk, as Runloop does.

// mountScript runs $3 with the disk $1 mounted at Root $2; a failure of
// the mount exits 125 with a line starting "runloopfake:".
const mountScript = `mount --bind -- "$1" "$2" || { echo "runloopfake: mounting the devbox's disk failed" >&2; exit 125; }
cd -- "$2" && exec /bin/sh -c "$3"`

// unshareArgs returns how to start a command in a mount namespace of its
// own (a user namespace too when not root), checking once that it works.
func unshareArgs(probeDir string) ([]string, error) {
	bin, err := exec.LookPath("unshare")
	if err != nil {
		return nil, fmt.Errorf("unshare (util-linux) is not installed: %w", err)
	}
	args := []string{bin, "--mount"}
	if os.Geteuid() != 0 {
		args = append(args, "--user", "--map-root-user")
	}
	src, dst := filepath.Join(probeDir, "src"), filepath.Join(probeDir, "dst")
	for _, d := range []string{src, dst} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(src, "probe"), nil, 0o644); err != nil {
		return nil, err
	}
	probe := exec.Command(args[0], append(args[1:], "--", "/bin/sh", "-c", mountScript, "sh", src, dst, "test -e probe")...)
	if out, err := probe.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return args, os.RemoveAll(probeDir)
}

// command is the process of a devbox's command line.
func (s *Server) command(d *devbox, line string) *exec.Cmd {
	args := append(append([]string(nil), s.unshare[1:]...), "--", "/bin/sh", "-c", mountScript, "sh", d.disk, s.Root, line)
	cmd := exec.Command(s.unshare[0], args...)
	cmd.Dir, cmd.Env = "/", d.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// hostPath maps a path in devbox d to the host: paths under Root to its
// disk, the command files /tmp/agentctl-* to themselves; any other is
// refused.
func (s *Server) hostPath(d *devbox, p string) (string, error) {
	if strings.HasPrefix(p, "/tmp/agentctl-") && !strings.Contains(p[5:], "/") {
		return p, nil
	}
	if p == s.Root {
		return d.disk, nil
	}
	if rel, ok := strings.CutPrefix(p, s.Root+"/"); ok && !strings.Contains("/"+rel+"/", "/../") {
		return filepath.Join(d.disk, rel), nil
	}
	return "", fmt.Errorf("runloopfake: %s is outside the fake devbox's disk %s", p, s.Root)
}

// snapshotTar writes the tar of d's disk for snapshot id; callers hold
// s.mu.
func (s *Server) snapshotTar(d *devbox, id string) (string, error) {
	file := filepath.Join(s.disks, id+".tar")
	if out, err := exec.Command("tar", "-cf", file, "-C", d.disk, ".").CombinedOutput(); err != nil {
		return "", fmt.Errorf("runloopfake: snapshot of %s: %v: %s", d.view["id"], err, out)
	}
	return file, nil
}

// newDisk makes a devbox's disk, unpacking the snapshot tar file into it
// when set; callers hold s.mu.
func (s *Server) newDisk(id, tarFile string) (string, error) {
	dir := filepath.Join(s.disks, id)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", err
	}
	if tarFile != "" {
		if out, err := exec.Command("tar", "-xpf", tarFile, "-C", dir).CombinedOutput(); err != nil {
			return "", fmt.Errorf("runloopfake: restoring %s: %v: %s", tarFile, err, out)
		}
	}
	return dir, nil
}

// ReadFile reads the file at path p (below Root) in devbox id's disk.
func (s *Server) ReadFile(id, p string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.devboxes[id]
	if d == nil || d.disk == "" {
		return nil, fmt.Errorf("runloopfake: devbox %s has no disk", id)
	}
	hp, err := s.hostPath(d, p)
	if err != nil {
		return nil, err
	}
	return os.ReadFile(hp)
}

// WriteFile writes the file at path p (below Root) in devbox id's disk.
func (s *Server) WriteFile(id, p string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.devboxes[id]
	if d == nil || d.disk == "" {
		return fmt.Errorf("runloopfake: devbox %s has no disk", id)
	}
	hp, err := s.hostPath(d, p)
	if err != nil {
		return err
	}
	return os.WriteFile(hp, data, 0o644)
}
