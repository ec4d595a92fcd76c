// Package userns starts agentctl again in a user namespace of its own in
// which the invoking user is root and ids 1 to N are that user's
// subordinate ids (/etc/subuid and /etc/subgid, mapped by the setuid
// helpers newuidmap and newgidmap of the shadow suite), as rootless
// container engines do. An ordinary user's local sandbox with manifest
// users needs it: the sandbox's user namespace can then give every
// manifest user an id of its own, and agentctl, as root of the outer
// namespace, can still read, snapshot and remove the files those users
// own (docs/local-provider.md, "Users and groups").
//
// The new process cannot be given the mapping before it runs: it is
// started in a new, still empty user namespace, waits on a pipe (stage
// one, this package's initialization) until the parent has written the
// mapping, then executes the binary again, and so runs with root's
// capabilities in the namespace (the kernel grants them at execve only
// to a process whose uid maps to 0).
package userns

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Range is one subordinate id range of /etc/subuid or /etc/subgid.
type Range struct {
	Start, Count int
}

// Map is the mapping of a user namespace this package makes: id 0 is
// the user's own UID and GID, ids 1 to Count are the subordinate ranges.
type Map struct {
	User     string // the user's name, as the subordinate id files name it
	UID, GID int
	SubUID   Range
	SubGID   Range
	// newuidmap and newgidmap are the helpers' paths, as Lookup found
	// them.
	newuidmap, newgidmap string
}

// Max is the largest id the namespace maps besides 0.
func (m Map) Max() int { return min(m.SubUID.Count, m.SubGID.Count) }

// The subordinate id files.
const (
	subUIDFile = "/etc/subuid"
	subGIDFile = "/etc/subgid"
)

// lookupRange returns the first range of file for user name or id.
func lookupRange(file, name string, id int) (Range, error) {
	f, err := os.Open(file)
	if err != nil {
		return Range{}, err
	}
	defer f.Close()
	return parseRange(f, file, name, id)
}

func parseRange(r io.Reader, file, name string, id int) (Range, error) {
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		f := strings.Split(text, ":")
		if len(f) != 3 || (f[0] != name && f[0] != strconv.Itoa(id)) {
			continue
		}
		start, err1 := strconv.Atoi(f[1])
		count, err2 := strconv.Atoi(f[2])
		if err1 != nil || err2 != nil || start < 1 || count < 1 {
			return Range{}, fmt.Errorf("%s:%d: %q is not NAME:START:COUNT with positive numbers", file, line, text)
		}
		return Range{Start: start, Count: count}, nil
	}
	if err := sc.Err(); err != nil {
		return Range{}, fmt.Errorf("reading %s: %w", file, err)
	}
	return Range{}, fmt.Errorf("%s has no range for user %s (uid %d)", file, name, id)
}
