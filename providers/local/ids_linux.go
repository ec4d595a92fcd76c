//go:build linux

package local

// How a namespaced sandbox's ids reach the host (docs/local-provider.md,
// "Users and groups").

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"

	"github.com/agentctl/agentctl/internal/userns"
	"github.com/agentctl/agentctl/sandbox"
)

// idMode is what agentctl may map into a sandbox's user namespace.
type idMode int

const (
	// idsUser: an ordinary user maps only its own id, as the sandbox's
	// root.
	idsUser idMode = iota
	// idsHostRoot: root of the host maps Options.HostID as the sandbox's
	// root and HostID+N as manifest id N, and shares the workspace
	// through idmapped mounts.
	idsHostRoot
	// idsNamespaceRoot: root of a user namespace (the one the agentctl
	// command starts for an ordinary user's manifest users, or a rootless
	// container) maps its own root as the sandbox's and its id N as
	// manifest id N; the workspace is bound as for an ordinary user
	// (idmapped mounts need the host's root).
	idsNamespaceRoot
)

func currentIDMode() (idMode, error) {
	if os.Geteuid() != 0 {
		return idsUser, nil
	}
	initial, _, err := userns.Mapped("uid_map", nil)
	if err != nil {
		return 0, err
	}
	if initial {
		return idsHostRoot, nil
	}
	return idsNamespaceRoot, nil
}

// accountIDs are the manifest's uids and gids (a user's private group's
// gid is its uid), and the largest of them.
func accountIDs(a sandbox.Accounts) (uids, gids []int, maxID int) {
	for _, u := range a.Users {
		uids = append(uids, u.UID)
		gids = append(gids, u.UID)
		maxID = max(maxID, u.UID)
	}
	for _, g := range a.Groups {
		gids = append(gids, g.GID)
		maxID = max(maxID, g.GID)
	}
	return uids, gids, maxID
}

// accountsMappable reports whether this process can map the manifest's
// ids into a sandbox's user namespace. An ordinary user cannot, but the
// agentctl command then runs itself again in a user namespace of its own
// (internal/userns): with later, only the prerequisites of that (the
// user's subordinate ids, newuidmap and newgidmap) are checked.
func accountsMappable(a sandbox.Accounts, later bool) error {
	mode, err := currentIDMode()
	if err != nil {
		return err
	}
	uids, gids, maxID := accountIDs(a)
	switch mode {
	case idsHostRoot:
		return nil
	case idsNamespaceRoot:
		for _, f := range []struct {
			file string
			ids  []int
		}{{"uid_map", uids}, {"gid_map", gids}} {
			_, missing, err := userns.Mapped(f.file, f.ids)
			if err != nil {
				return err
			}
			if len(missing) > 0 {
				return fmt.Errorf("the manifest declares users and groups, but agentctl runs as root of a user namespace whose %s does not map id %v: give the namespace more ids (the agentctl command maps ids 1 to the size of the user's /etc/subuid and /etc/subgid ranges), or use provider.docker", f.file, missing)
			}
		}
		return nil
	}
	if _, err := userns.Lookup(maxID); err != nil {
		return fmt.Errorf("the manifest declares users and groups, and agentctl runs as uid %d, which may map only its own id into the sandbox's user namespace: agentctl needs this user's subordinate ids to give each manifest user an id of its own, and %w; or run agentctl as root, or use provider.docker", os.Geteuid(), err)
	}
	if !later {
		return fmt.Errorf("the manifest declares users and groups, and agentctl runs as uid %d, which may map only its own id into a user namespace: the agentctl command runs itself in a user namespace of its own that maps this user's subordinate ids, but this process was not started that way (a program using the local provider as a library must run as root, or as root of such a namespace)", os.Geteuid())
	}
	return nil
}

// removeEnv turns the binary into a remover of a sandbox directory (its
// value), run as root of a user namespace that maps the user's
// subordinate ids (removeInUserNS).
const removeEnv = "_AGENTCTL_SANDBOX_REMOVE"

// maybeRemove removes the sandbox directory named by removeEnv and exits,
// when this process was started as removeInUserNS's helper.
func maybeRemove() {
	dir, ok := os.LookupEnv(removeEnv)
	if !ok {
		return
	}
	os.Unsetenv(removeEnv)
	// Delete checked the directory's marker before it removed what it
	// could, which may have been the marker itself.
	if err := removeTree(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// removeInUserNS removes the sandbox directory as root of a user
// namespace that maps this user's subordinate ids: files a manifest user
// left there are owned by those ids, which an ordinary user cannot
// remove (a sandbox made with manifest users, deleted by an agentctl
// process that did not start its own namespace, as when the users were
// taken out of the manifest).
func (s *Sandbox) removeInUserNS() error {
	if os.Geteuid() == 0 {
		return errors.New("agentctl runs as root")
	}
	m, err := userns.Lookup(1)
	if err != nil {
		return err
	}
	exe, err := s.p.executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(exe)
	cmd.Args = []string{"agentctl-sandbox-remove"}
	cmd.Env = []string{removeEnv + "=" + s.dir}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := userns.Start(cmd, m); err != nil {
		return err
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("%v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
