// Package usernstest finds, for tests, an ordinary user with subordinate
// ids to run agentctl as (internal/userns). Used by tests only.
package usernstest

import (
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/agentctl/agentctl/internal/testenv"
	"github.com/agentctl/agentctl/internal/userns"
)

// UserVar names the ordinary user that tests running as root switch to;
// DefaultUser (which .ci/run creates) when unset.
const (
	UserVar     = "AGENTCTL_TEST_SUBID_USER"
	DefaultUser = "agentctl-test"
)

// User is an ordinary user with subordinate ids.
type User struct {
	Map userns.Map
	// Credential runs a process as the user: nil when the test already
	// runs as it.
	Credential *syscall.Credential
	Home       string
}

// Find returns the user the test runs as, when it is an ordinary user
// with subordinate ids for need ids, or, when the test runs as root, the
// user UserVar names. Otherwise the test is skipped with the reason (a
// failure under AGENTCTL_TEST_STRICT=1).
func Find(tb testing.TB, need int) User {
	tb.Helper()
	if os.Geteuid() != 0 {
		m, err := userns.Lookup(need)
		if err != nil {
			testenv.Missing(tb, "an ordinary user with subordinate ids: %v", err)
		}
		home, _ := os.UserHomeDir()
		return User{Map: m, Home: home}
	}
	name := os.Getenv(UserVar)
	if name == "" {
		name = DefaultUser
	}
	u, err := user.Lookup(name)
	if err != nil {
		testenv.Missing(tb, "user %s to run agentctl as an ordinary user (useradd -m %s, or name another in %s): %v", name, name, UserVar, err)
	}
	m, err := userns.LookupUser(u.Uid, need)
	if err != nil {
		testenv.Missing(tb, "subordinate ids of %s: %v", name, err)
	}
	var groups []uint32
	if gids, err := u.GroupIds(); err == nil {
		for _, g := range gids {
			if n, err := strconv.Atoi(g); err == nil {
				groups = append(groups, uint32(n))
			}
		}
	}
	return User{
		Map:        m,
		Credential: &syscall.Credential{Uid: uint32(m.UID), Gid: uint32(m.GID), Groups: groups},
		Home:       u.HomeDir,
	}
}

// Chown gives the user the paths (when the test runs as root), so that
// it can use them.
func (u User) Chown(tb testing.TB, paths ...string) {
	tb.Helper()
	if u.Credential == nil {
		return
	}
	for _, p := range paths {
		if err := os.Chown(p, u.Map.UID, u.Map.GID); err != nil {
			tb.Fatal(err)
		}
	}
}

// Executable copies the program at path into a new directory that every
// user may enter (removed when the test ends) and returns the copy's
// path: the user can run it, whatever the permissions on the way to
// path.
func Executable(tb testing.TB, path string) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "usernstest-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	in, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer in.Close()
	bin := filepath.Join(dir, filepath.Base(path))
	out, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		tb.Fatal(err)
	}
	if err := out.Close(); err != nil {
		tb.Fatal(err)
	}
	return bin
}
