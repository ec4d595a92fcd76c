//go:build linux

package userns

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// stageEnv tells a process started by Start that it is stage one: its
// value is the descriptor of the pipe it waits on.
const stageEnv = "_AGENTCTL_USERNS_STAGE"

// parentEnv passes stage two the parent's pid: it dies with the parent,
// as the program it replaces would have (PR_SET_PDEATHSIG, which the
// kernel clears when stage two gains its capabilities at execve).
const parentEnv = "_AGENTCTL_USERNS_PARENT"

// goByte is what the parent writes on the pipe once the mapping is set.
const goByte = 'G'

// stageFailedCode is stage one's exit status when the mapping never came.
const stageFailedCode = 125

// Stage one runs from this package's initialization, before the rest of
// the program initializes.
func init() { continueStage() }

func continueStage() {
	if v, ok := os.LookupEnv(parentEnv); ok {
		os.Unsetenv(parentEnv)
		unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0)
		if strconv.Itoa(os.Getppid()) != v {
			os.Exit(stageFailedCode) // the parent is gone already
		}
		return
	}
	v, ok := os.LookupEnv(stageEnv)
	if !ok {
		return
	}
	os.Unsetenv(stageEnv)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		fmt.Fprintf(os.Stderr, "agentctl: invalid %s=%q\n", stageEnv, v)
		os.Exit(stageFailedCode)
	}
	var b [1]byte
	n, _ := unix.Read(fd, b[:])
	unix.Close(fd)
	if n != 1 || b[0] != goByte {
		// The parent reports why (Start's error); it may also have died.
		os.Exit(stageFailedCode)
	}
	err = unix.Exec("/proc/self/exe", os.Args, append(os.Environ(), fmt.Sprintf("%s=%d", parentEnv, os.Getppid())))
	fmt.Fprintf(os.Stderr, "agentctl: starting again in the user namespace: %v\n", err)
	os.Exit(stageFailedCode)
}

// Lookup returns the current user's mapping: its subordinate id ranges,
// which must hold at least need ids each, and checks that newuidmap and
// newgidmap are installed. The error says what is missing and how to
// add it.
func Lookup(need int) (Map, error) {
	return LookupUser(strconv.Itoa(os.Getuid()), need)
}

// LookupUser is Lookup for the user whose uid is uid.
func LookupUser(uid string, need int) (Map, error) {
	u, err := user.LookupId(uid)
	if err != nil {
		return Map{}, fmt.Errorf("looking up uid %s, whose subordinate ids to map: %w", uid, err)
	}
	m := Map{User: u.Username}
	if m.UID, err = strconv.Atoi(u.Uid); err != nil {
		return Map{}, fmt.Errorf("uid %q: %w", u.Uid, err)
	}
	if m.GID, err = strconv.Atoi(u.Gid); err != nil {
		return Map{}, fmt.Errorf("gid %q of %s: %w", u.Gid, u.Username, err)
	}
	if m.UID == os.Getuid() {
		m.GID = os.Getgid()
	}
	fix := fmt.Sprintf("add a range to /etc/subuid and /etc/subgid (for example `usermod --add-subuids 100000-165535 --add-subgids 100000-165535 %s` as root)", m.User)
	if m.SubUID, err = lookupRange(subUIDFile, m.User, m.UID); err != nil {
		return Map{}, fmt.Errorf("%w; %s", err, fix)
	}
	if m.SubGID, err = lookupRange(subGIDFile, m.User, m.UID); err != nil {
		return Map{}, fmt.Errorf("%w; %s", err, fix)
	}
	if m.Max() < need {
		return Map{}, fmt.Errorf("the subordinate id ranges of %s hold %d uids and %d gids, fewer than the %d the manifest's ids need; %s", m.User, m.SubUID.Count, m.SubGID.Count, need, fix)
	}
	if m.newuidmap, err = helper("newuidmap"); err != nil {
		return Map{}, err
	}
	if m.newgidmap, err = helper("newgidmap"); err != nil {
		return Map{}, err
	}
	return m, nil
}

// helper finds newuidmap or newgidmap: on PATH, or in /usr/bin where
// Debian's uidmap package puts them.
func helper(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	p := "/usr/bin/" + name
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%s is not installed: it maps the subordinate ids into the user namespace (Debian and Ubuntu: apt-get install uidmap; Fedora: dnf install shadow-utils)", name)
}

// Start starts cmd in a new user namespace with mapping m, which Lookup
// or LookupUser returned: id 0 is the user, ids 1 to m.Max() its
// subordinate ids. cmd must run this binary (or another program linking
// this package), which waits in stage one until the mapping is written
// and then runs again, as root of the namespace. Start returns once that
// is under way; the caller waits for cmd as usual. The process is killed
// if the thread that started it exits (PR_SET_PDEATHSIG): callers lock
// theirs (runtime.LockOSThread). cmd.SysProcAttr may ask for more (a
// process group, a terminal), but no other namespaces or credentials.
func Start(cmd *exec.Cmd, m Map) error {
	if m.newuidmap == "" || m.newgidmap == "" {
		return errors.New("userns.Start: the mapping does not come from Lookup")
	}
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("creating the user namespace's pipe: %w", err)
	}
	defer r.Close()
	defer w.Close()
	cmd.ExtraFiles = append(cmd.ExtraFiles, r)
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, fmt.Sprintf("%s=%d", stageEnv, 2+len(cmd.ExtraFiles)))
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWUSER
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s in a new user namespace (check the sysctls user.max_user_namespaces and kernel.unprivileged_userns_clone): %w", cmd.Path, err)
	}
	r.Close()
	pid := strconv.Itoa(cmd.Process.Pid)
	n := m.Max()
	for _, x := range []struct {
		tool string
		own  int
		sub  Range
	}{{m.newuidmap, m.UID, m.SubUID}, {m.newgidmap, m.GID, m.SubGID}} {
		out, err := exec.Command(x.tool, pid, "0", strconv.Itoa(x.own), "1", "1", strconv.Itoa(x.sub.Start), strconv.Itoa(n)).CombinedOutput()
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			return fmt.Errorf("%s %s 0 %d 1 1 %d %d: %v: %s (check the ranges of %s in /etc/subuid and /etc/subgid, and that %s is setuid root)",
				x.tool, pid, x.own, x.sub.Start, n, err, bytes.TrimSpace(out), m.User, x.tool)
		}
	}
	if _, err := w.Write([]byte{goByte}); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return fmt.Errorf("starting %s in its user namespace: %w", cmd.Path, err)
	}
	return nil
}

// Mapped reports whether this process's user namespace maps every id of
// ids (uids when file is "uid_map", gids for "gid_map"), and whether it
// is the host's initial namespace (the whole id space mapped to itself).
func Mapped(file string, ids []int) (initial bool, missing []int, err error) {
	b, err := os.ReadFile("/proc/self/" + file)
	if err != nil {
		return false, nil, fmt.Errorf("reading this process's user namespace mapping: %w", err)
	}
	type ext struct{ inside, outside, count int64 }
	var exts []ext
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 {
			continue
		}
		var e ext
		var errs [3]error
		e.inside, errs[0] = strconv.ParseInt(f[0], 10, 64)
		e.outside, errs[1] = strconv.ParseInt(f[1], 10, 64)
		e.count, errs[2] = strconv.ParseInt(f[2], 10, 64)
		if err := errors.Join(errs[:]...); err != nil {
			return false, nil, fmt.Errorf("/proc/self/%s: %q: %w", file, sc.Text(), err)
		}
		exts = append(exts, e)
	}
	initial = len(exts) == 1 && exts[0] == ext{0, 0, 1<<32 - 1}
	for _, id := range ids {
		found := false
		for _, e := range exts {
			if int64(id) >= e.inside && int64(id) < e.inside+e.count {
				found = true
				break
			}
		}
		if !found {
			missing = append(missing, id)
		}
	}
	return initial, missing, nil
}
