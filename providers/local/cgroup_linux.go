package local

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentctl/agentctl/sandbox"
)

// A namespaced sandbox's memory and CPU limits are enforced by a cgroup
// of its own, which the sandbox's init joins before it runs anything;
// every process of the sandbox descends from the init and stays in it.
// Two layouts work:
//
//   - cgroup v2 (one unified hierarchy) where agentctl's own cgroup
//     offers the memory and cpu controllers and agentctl may write to it
//     (a delegated subtree, e.g. `systemd-run --user --scope -p
//     Delegate=yes agentctl apply`, or root);
//   - cgroup v1 (one hierarchy per controller) where agentctl may create
//     cgroups below its own in the memory and cpu hierarchies (root).
//
// Anywhere else the limits cannot be enforced and a sandbox that sets
// them is refused (CheckResources), never run without them.

// cgroupRoot is where the cgroup file systems are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// cpuPeriod is the CFS period, in microseconds, a CPU quota is given in.
const cpuPeriod = 100000

// cgroupLimits are the limits a sandbox cgroup enforces (zero: none).
type cgroupLimits struct {
	MemoryBytes int64
	CPUs        float64
}

func limitsOf(r sandbox.Resources) cgroupLimits {
	return cgroupLimits{MemoryBytes: r.MemoryMB << 20, CPUs: r.CPUs}
}

// controllers are the cgroup controllers the limits need.
func (l cgroupLimits) controllers() []string {
	var c []string
	if l.MemoryBytes > 0 {
		c = append(c, "memory")
	}
	if l.CPUs > 0 {
		c = append(c, "cpu")
	}
	return c
}

// cgroupHost is this machine's cgroup layout, as far as agentctl can use
// it: for v2 the directory of agentctl's own cgroup, for v1 the directory
// of agentctl's own cgroup in each controller's hierarchy.
type cgroupHost struct {
	v2     bool
	own    string            // v2
	parent map[string]string // v1: controller → directory
	// why explains, for each controller agentctl cannot use, the reason.
	why map[string]string
}

// detectCgroups reads the cgroup layout under root for the process whose
// /proc/PID/cgroup is procCgroup.
func detectCgroups(root string, procCgroup []byte) *cgroupHost {
	h := &cgroupHost{parent: map[string]string{}, why: map[string]string{}}
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
		h.v2 = true
		h.detectV2(root, procCgroup)
		return h
	}
	h.detectV1(root, procCgroup)
	return h
}

func (h *cgroupHost) detectV2(root string, procCgroup []byte) {
	var rel string
	for line := range strings.Lines(string(procCgroup)) {
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), "0::"); ok {
			rel = p
		}
	}
	h.own = filepath.Join(root, filepath.Clean("/"+rel))
	avail, err := os.ReadFile(filepath.Join(h.own, "cgroup.controllers"))
	for _, c := range []string{"memory", "cpu"} {
		switch {
		case err != nil:
			h.why[c] = fmt.Sprintf("agentctl's cgroup %s cannot be read (%v)", h.own, err)
		case !slices.Contains(strings.Fields(string(avail)), c):
			h.why[c] = fmt.Sprintf("the %s controller is not delegated to agentctl's cgroup %s", c, h.own)
		case syscall.Access(filepath.Join(h.own, "cgroup.subtree_control"), 2) != nil || syscall.Access(h.own, 2) != nil:
			h.why[c] = fmt.Sprintf("agentctl may not create cgroups in its cgroup %s (it is not delegated to this user)", h.own)
		}
	}
}

func (h *cgroupHost) detectV1(root string, procCgroup []byte) {
	own := map[string]string{} // controller → (mount dir name, path)
	for line := range strings.Lines(string(procCgroup)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			// The hierarchy is mounted under the joined controller list
			// (cpu,cpuacct) or the controller's own name.
			for _, mount := range []string{parts[1], c} {
				dir := filepath.Join(root, mount, filepath.Clean("/"+parts[2]))
				if _, err := os.Stat(dir); err == nil {
					own[c] = dir
					break
				}
			}
		}
	}
	for _, c := range []string{"memory", "cpu"} {
		dir, ok := own[c]
		switch {
		case !ok:
			h.why[c] = fmt.Sprintf("this machine has no %s cgroup that agentctl can find under %s", c, root)
		case syscall.Access(dir, 2) != nil:
			h.why[c] = fmt.Sprintf("agentctl may not create cgroups in %s (cgroup v1 needs root)", dir)
		default:
			h.parent[c] = dir
		}
	}
}

// check reports why the limits cannot be enforced here, or nil.
func (h *cgroupHost) check(l cgroupLimits) error {
	var reasons []string
	for _, c := range l.controllers() {
		if why := h.why[c]; why != "" {
			reasons = append(reasons, why)
		}
	}
	if len(reasons) == 0 {
		return nil
	}
	return errors.New(strings.Join(reasons, "; "))
}

// sandboxCgroup is one sandbox's cgroup: one directory (v2) or one per
// controller (v1).
type sandboxCgroup struct {
	dirs []string
}

// create makes (or reuses, after a crash) the cgroup named name and sets
// its limits.
func (h *cgroupHost) create(name string, l cgroupLimits) (*sandboxCgroup, error) {
	if err := h.check(l); err != nil {
		return nil, err
	}
	if h.v2 {
		return h.createV2(name, l)
	}
	return h.createV1(name, l)
}

func (h *cgroupHost) createV2(name string, l cgroupLimits) (*sandboxCgroup, error) {
	if err := h.delegateV2(l.controllers()); err != nil {
		return nil, err
	}
	dir := filepath.Join(h.own, name)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("creating cgroup %s: %w", dir, err)
	}
	g := &sandboxCgroup{dirs: []string{dir}}
	var writes [][2]string
	if l.MemoryBytes > 0 {
		writes = append(writes, [2]string{"memory.max", strconv.FormatInt(l.MemoryBytes, 10)})
		if _, err := os.Stat(filepath.Join(dir, "memory.swap.max")); err == nil {
			writes = append(writes, [2]string{"memory.swap.max", "0"})
		}
	}
	if l.CPUs > 0 {
		writes = append(writes, [2]string{"cpu.max", fmt.Sprintf("%d %d", cpuQuota(l.CPUs), cpuPeriod)})
	}
	for _, w := range writes {
		if err := writeCgroup(dir, w[0], w[1]); err != nil {
			g.remove()
			return nil, err
		}
	}
	return g, nil
}

// delegateV2 enables the controllers for agentctl's cgroup's children.
// A cgroup v2 with processes in it cannot pass controllers on, so when
// agentctl is alone in its cgroup (a scope of its own) it first moves
// itself into a leaf beside the sandboxes.
func (h *cgroupHost) delegateV2(controllers []string) error {
	ctl := filepath.Join(h.own, "cgroup.subtree_control")
	have, err := os.ReadFile(ctl)
	if err != nil {
		return fmt.Errorf("reading %s: %w", ctl, err)
	}
	var missing []string
	for _, c := range controllers {
		if !slices.Contains(strings.Fields(string(have)), c) {
			missing = append(missing, "+"+c)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	procs, err := os.ReadFile(filepath.Join(h.own, "cgroup.procs"))
	if err != nil {
		return fmt.Errorf("reading %s: %w", filepath.Join(h.own, "cgroup.procs"), err)
	}
	self := strconv.Itoa(os.Getpid())
	if others := slices.DeleteFunc(strings.Fields(string(procs)), func(p string) bool { return p == self }); len(others) > 0 {
		return fmt.Errorf("agentctl's cgroup %s holds other processes (%d), so it cannot pass the %s controllers on to sandbox cgroups: start agentctl in a cgroup of its own, e.g. systemd-run --user --scope -p Delegate=yes agentctl apply", h.own, len(others), strings.Join(controllers, " and "))
	}
	if len(strings.Fields(string(procs))) > 0 {
		leaf := filepath.Join(h.own, "agentctl")
		if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("creating cgroup %s: %w", leaf, err)
		}
		if err := writeCgroup(leaf, "cgroup.procs", self); err != nil {
			return err
		}
	}
	return writeCgroup(h.own, "cgroup.subtree_control", strings.Join(missing, " "))
}

func (h *cgroupHost) createV1(name string, l cgroupLimits) (*sandboxCgroup, error) {
	g := &sandboxCgroup{}
	for _, c := range l.controllers() {
		dir := filepath.Join(h.parent[c], name)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			g.remove()
			return nil, fmt.Errorf("creating cgroup %s: %w", dir, err)
		}
		g.dirs = append(g.dirs, dir)
		var writes [][2]string
		switch c {
		case "memory":
			// Memory plus swap is capped too, so the limit is not
			// escaped by swapping. The combined limit is lifted first: it
			// may never be below the memory limit.
			memsw := false
			if _, err := os.Stat(filepath.Join(dir, "memory.memsw.limit_in_bytes")); err == nil {
				memsw = true
				writes = append(writes, [2]string{"memory.memsw.limit_in_bytes", "-1"})
			}
			writes = append(writes, [2]string{"memory.limit_in_bytes", strconv.FormatInt(l.MemoryBytes, 10)})
			if memsw {
				writes = append(writes, [2]string{"memory.memsw.limit_in_bytes", strconv.FormatInt(l.MemoryBytes, 10)})
			}
		case "cpu":
			writes = append(writes,
				[2]string{"cpu.cfs_period_us", strconv.Itoa(cpuPeriod)},
				[2]string{"cpu.cfs_quota_us", strconv.FormatInt(cpuQuota(l.CPUs), 10)})
		}
		for _, w := range writes {
			if err := writeCgroup(dir, w[0], w[1]); err != nil {
				g.remove()
				return nil, err
			}
		}
	}
	return g, nil
}

func cpuQuota(cpus float64) int64 { return max(int64(cpus*cpuPeriod), 1000) }

func writeCgroup(dir, file, value string) error {
	p := filepath.Join(dir, file)
	if err := os.WriteFile(p, []byte(value), 0o644); err != nil {
		return fmt.Errorf("setting %s to %s: %w", p, value, err)
	}
	return nil
}

// add moves a process (the sandbox's init, before it runs anything) into
// the cgroup.
func (g *sandboxCgroup) add(pid int) error {
	for _, dir := range g.dirs {
		if err := writeCgroup(dir, "cgroup.procs", strconv.Itoa(pid)); err != nil {
			return err
		}
	}
	return nil
}

// remove deletes the cgroup once its processes are gone. The kernel
// frees a cgroup's last processes a moment after their init is reaped,
// so a busy cgroup is retried for up to a second.
func (g *sandboxCgroup) remove() error {
	var errs []error
	for _, dir := range g.dirs {
		var err error
		for range 100 {
			err = syscall.Rmdir(dir)
			if err == nil || errors.Is(err, fs.ErrNotExist) {
				err = nil
				break
			}
			if !errors.Is(err, syscall.EBUSY) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("removing cgroup %s: %w", dir, err))
		}
	}
	return errors.Join(errs...)
}

// remove deletes the cgroup named name wherever agentctl could have made
// it; a missing one is not an error.
func (h *cgroupHost) remove(name string) error {
	g := &sandboxCgroup{}
	if h.v2 {
		g.dirs = append(g.dirs, filepath.Join(h.own, name))
	}
	for _, dir := range h.parent {
		g.dirs = append(g.dirs, filepath.Join(dir, name))
	}
	return g.remove()
}

// hostCgroups reads this process's cgroup layout.
func hostCgroups() *cgroupHost {
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return &cgroupHost{why: map[string]string{
			"memory": fmt.Sprintf("reading /proc/self/cgroup: %v", err),
			"cpu":    fmt.Sprintf("reading /proc/self/cgroup: %v", err),
		}}
	}
	return detectCgroups(cgroupRoot, bytes.TrimSpace(own))
}

// cgroupCheck reports why memory and CPU limits cannot be enforced here.
func cgroupCheck(r sandbox.Resources) error { return hostCgroups().check(limitsOf(r)) }
