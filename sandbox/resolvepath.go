package sandbox

import (
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"time"
)

// PathResolverScript, run by /bin/sh with a workspace root as $1 and an
// absolute path as $2 in a sandbox whose files the provider reaches only
// through commands (Daytona's toolbox, a Kubernetes Pod), prints seven
// lines: the real root; the path with its parent resolved; the path
// fully resolved (missing components kept; "!" when it cannot be); its
// kind (F file, D directory, L symlink, O other, N missing) and link
// target; its stat ("%f %s %Y"); and the kind of what it leads to through
// symlinks (F, D, N, or P FIFO, S socket, C character device, B block
// device, O other). It exits 3 when the root is missing. CheckResolvedPath
// reads the lines.
const PathResolverScript = `set -f
r=$(cd -P -- "$1" 2>/dev/null && pwd -P) || { echo "workspace root $1 is missing" >&2; exit 3; }
res() {
  p=$1; s=
  while [ "$p" != / ] && [ ! -e "$p" ] && [ ! -L "$p" ]; do s="/${p##*/}$s"; p=${p%/*}; [ -n "$p" ] || p=/; done
  if [ -d "$p" ]; then q=$(cd -P -- "$p" && pwd -P) || return 1
  else q=$(readlink -f -- "$p" 2>/dev/null) || return 1; [ -n "$q" ] || return 1; fi
  [ "$q" = / ] && q=
  printf '%s%s\n' "$q" "$s"
}
printf '%s\n' "$r"
d=$(res "${2%/*}") || d='!'
printf '%s/%s\n' "$d" "${2##*/}"
f=$(res "$2") || f='!'
printf '%s\n' "$f"
if [ -L "$2" ]; then printf 'L\n%s\n' "$(readlink -- "$2")"
elif [ -d "$2" ]; then printf 'D\n\n'
elif [ -f "$2" ]; then printf 'F\n\n'
elif [ -e "$2" ]; then printf 'O\n\n'
else printf 'N\n\n'; fi
if [ -e "$2" ] || [ -L "$2" ]; then stat -c '%f %s %Y' -- "$2" 2>/dev/null || echo '0 0 0'; else echo '0 0 0'; fi
if [ -d "$2" ]; then echo D; elif [ -f "$2" ]; then echo F; elif [ -p "$2" ]; then echo P
elif [ -S "$2" ]; then echo S; elif [ -c "$2" ]; then echo C; elif [ -b "$2" ]; then echo B
elif [ -e "$2" ]; then echo O; else echo N; fi
`

// ResolvedPath is what PathResolverScript learned about a path.
type ResolvedPath struct {
	Abs      string // lexical absolute path
	NoFollow string // parent resolved, final component kept
	Follow   string // fully resolved ("" when unresolvable)
	Kind     byte   // 'F' file, 'D' dir, 'L' symlink, 'O' other, 'N' missing
	// Followed is the kind of what the path leads to through symlinks:
	// 'F', 'D', 'N' as Kind, or 'P' FIFO, 'S' socket, 'C' character
	// device, 'B' block device, 'O' other.
	Followed byte
	Target   string // symlink target
	Mode     uint32 // raw st_mode
	Size     int64
	Mtime    int64
}

// CheckResolvedPath reads PathResolverScript's lines about abs (the
// lexical absolute form of rel in the workspace root) and refuses, with
// ErrPathEscape, a path whose parent directory resolves outside the
// workspace, or, when follow is set, a path whose symlinks lead out of
// it. op names the operation in the error. The lines must number seven
// at least.
func CheckResolvedPath(op, rel, abs, root string, follow bool, lines []string) (ResolvedPath, error) {
	if len(lines) < 7 || lines[3] == "" || lines[6] == "" {
		return ResolvedPath{}, fmt.Errorf("%s %q: unexpected resolver output %q", op, rel, strings.Join(lines, "\n"))
	}
	r := ResolvedPath{Abs: abs, NoFollow: lines[1], Follow: lines[2], Kind: lines[3][0], Target: lines[4], Followed: lines[6][0]}
	if r.Follow == "!" {
		r.Follow = ""
	}
	if f := strings.Fields(lines[5]); len(f) == 3 {
		m, _ := strconv.ParseUint(f[0], 16, 32)
		r.Mode = uint32(m)
		r.Size, _ = strconv.ParseInt(f[1], 10, 64)
		r.Mtime, _ = strconv.ParseInt(f[2], 10, 64)
	}
	real := lines[0]
	within := func(p string) bool { return p == real || strings.HasPrefix(p, real+"/") }
	escape := func(what string) error {
		return fmt.Errorf("%s %q: %s resolves outside the workspace %s: %w", op, rel, what, root, ErrPathEscape)
	}
	if abs != root && (strings.HasPrefix(r.NoFollow, "!") || !within(r.NoFollow)) {
		return r, escape("its parent directory")
	}
	if follow && (r.Follow == "" || !within(r.Follow)) {
		return r, escape("a symlink in it")
	}
	// The resolved names from here on, within the real root.
	if abs == root {
		r.NoFollow = real
	}
	return r, nil
}

// Rel is the resolved path relative to root, the workspace root it was
// resolved in ("." for the root itself).
func (r ResolvedPath) Rel(root string) string {
	if r.Abs == root {
		return "."
	}
	return strings.TrimPrefix(r.Abs, root+"/")
}

// Info is what a Stat of the path returns (a final symlink not
// followed): its type and mode from the stat line, or only its type from
// Kind when stat printed nothing usable.
func (r ResolvedPath) Info(root string) FileInfo {
	mode := FileModeOf(r.Mode)
	if r.Mode&0o170000 == 0 {
		switch r.Kind {
		case 'F':
			mode = 0
		case 'D':
			mode = fs.ModeDir
		case 'L':
			mode = fs.ModeSymlink
		}
	}
	fi := FileInfo{Path: r.Rel(root), Size: r.Size, ModTime: time.Unix(r.Mtime, 0), Mode: mode}
	if mode&fs.ModeSymlink != 0 {
		fi.Target = r.Target
	}
	return fi
}

// Special refuses, with ErrNotRegular, a path that leads to a FIFO,
// socket or device: reading one would block or never end.
func (r ResolvedPath) Special(op, rel string) error {
	var mode fs.FileMode
	switch r.Followed {
	case 'F', 'D', 'N':
		return nil
	case 'P':
		mode = fs.ModeNamedPipe
	case 'S':
		mode = fs.ModeSocket
	case 'C':
		mode = fs.ModeDevice | fs.ModeCharDevice
	case 'B':
		mode = fs.ModeDevice
	default:
		mode = fs.ModeIrregular
	}
	return NotRegularError(op, rel, mode)
}
