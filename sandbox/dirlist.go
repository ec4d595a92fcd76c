package sandbox

import (
	"slices"
	"strconv"
	"strings"
	"time"
)

// DirListScript lists directory $1 as lstat(2) describes its entries,
// for providers that reach files only through commands (Daytona,
// Kubernetes): for each entry, NUL-terminated, its "st_mode(hex) size
// mtime" from stat(1), its symlink target (empty for other entries) and
// its name, hidden entries included. ParseDirList reads the output.
const DirListScript = `cd -- "$1" || exit 1
for f in * .[!.]* ..?*; do
  [ -e "$f" ] || [ -L "$f" ] || continue
  t=
  [ -L "$f" ] && t=$(readlink -- "$f")
  printf '%s\000%s\000%s\000' "$(stat -c '%f %s %Y' -- "$f")" "$t" "$f"
done
`

// ParseDirList turns DirListScript's output for workspace directory
// base ("." for the root) into entries sorted by path, symlinks as
// symlinks with their target, every type as FileModeOf names it.
func ParseDirList(base string, out []byte) []FileInfo {
	fields := strings.Split(string(out), "\x00")
	var list []FileInfo
	for i := 0; i+2 < len(fields); i += 3 {
		st, target, name := strings.Fields(fields[i]), fields[i+1], fields[i+2]
		if len(st) != 3 {
			continue
		}
		m, _ := strconv.ParseUint(st[0], 16, 32)
		size, _ := strconv.ParseInt(st[1], 10, 64)
		mt, _ := strconv.ParseInt(st[2], 10, 64)
		p := name
		if base != "." {
			p = base + "/" + name
		}
		list = append(list, FileInfo{Path: p, Size: size, Mode: FileModeOf(uint32(m)), ModTime: time.Unix(mt, 0), Target: target})
	}
	slices.SortFunc(list, func(a, b FileInfo) int { return strings.Compare(a.Path, b.Path) })
	return list
}
