package sandbox

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
)

// TestCheckResolvedPath: the checks on what PathResolverScript printed
// (real root /real/ws for the workspace root /ws).
func TestCheckResolvedPath(t *testing.T) {
	lines := func(noFollow, follow, kind, followed string) []string {
		return []string{"/real/ws", noFollow, follow, kind, "", "81a4 5 1700000000", followed}
	}
	for _, tc := range []struct {
		name   string
		abs    string
		follow bool
		lines  []string
		escape bool
	}{
		{"a file", "/ws/a.txt", true, lines("/real/ws/a.txt", "/real/ws/a.txt", "F", "F"), false},
		{"a missing file", "/ws/new/b.txt", true, lines("/real/ws/new/b.txt", "/real/ws/new/b.txt", "N", "N"), false},
		{"parent outside", "/ws/out/a.txt", false, lines("/etc/a.txt", "/etc/a.txt", "F", "F"), true},
		{"parent unresolvable", "/ws/x/a.txt", false, lines("!/a.txt", "", "N", "N"), true},
		{"a prefix is not inside", "/ws/a", false, lines("/real/ws2/a", "/real/ws2/a", "F", "F"), true},
		{"symlink out, not followed", "/ws/link", false, lines("/real/ws/link", "/etc/passwd", "L", "F"), false},
		{"symlink out, followed", "/ws/link", true, lines("/real/ws/link", "/etc/passwd", "L", "F"), true},
		{"the root", "/ws", true, lines("/real", "/real/ws", "D", "D"), false},
	} {
		r, err := CheckResolvedPath("read", strings.TrimPrefix(tc.abs, "/ws/"), tc.abs, "/ws", tc.follow, tc.lines)
		if got := errors.Is(err, ErrPathEscape); got != tc.escape {
			t.Errorf("%s: error %v, want an escape: %v", tc.name, err, tc.escape)
		}
		if err == nil && tc.abs == "/ws" && r.NoFollow != "/real/ws" {
			t.Errorf("the root's NoFollow = %q, want the real root", r.NoFollow)
		}
		if err == nil && (r.Mode != 0o100644 || r.Size != 5 || r.Mtime != 1700000000) {
			t.Errorf("%s: stat %o %d %d", tc.name, r.Mode, r.Size, r.Mtime)
		}
	}
	if _, err := CheckResolvedPath("read", "a", "/ws/a", "/ws", false, []string{"/real/ws", "x"}); err == nil || !strings.Contains(err.Error(), "unexpected resolver output") {
		t.Errorf("short output: %v", err)
	}
	if err := (ResolvedPath{Followed: 'P'}).Special("read", "fifo"); !errors.Is(err, ErrNotRegular) {
		t.Errorf("a FIFO: %v", err)
	}
	if err := (ResolvedPath{Followed: 'F'}).Special("read", "f"); err != nil {
		t.Errorf("a file: %v", err)
	}
}

// TestResolvedPathInfo: what a remote provider's Stat returns from the
// resolver's lines, for every kind of file, as os.Lstat would say it.
func TestResolvedPathInfo(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lines []string
		want  fs.FileMode
		rel   string
		targ  string
	}{
		{"file", []string{"/ws", "/ws/a.txt", "/ws/a.txt", "F", "", "81a4 3 1700000000", "F"}, 0o644, "a.txt", ""},
		{"root", []string{"/ws", "/ws", "/ws", "D", "", "41ed 4096 1700000000", "D"}, fs.ModeDir | 0o755, ".", ""},
		{"symlink", []string{"/ws", "/ws/l", "/ws/a.txt", "L", "a.txt", "a1ff 5 1700000000", "F"}, fs.ModeSymlink | 0o777, "l", "a.txt"},
		{"fifo", []string{"/ws", "/ws/p", "/ws/p", "O", "", "11a4 0 1700000000", "P"}, fs.ModeNamedPipe | 0o644, "p", ""},
		{"socket", []string{"/ws", "/ws/s", "/ws/s", "O", "", "c1ed 0 1700000000", "S"}, fs.ModeSocket | 0o755, "s", ""},
		{"char device", []string{"/ws", "/ws/z", "/ws/z", "O", "", "21b6 0 1700000000", "C"}, fs.ModeDevice | fs.ModeCharDevice | 0o666, "z", ""},
		{"block device", []string{"/ws", "/ws/b", "/ws/b", "O", "", "61b0 0 1700000000", "B"}, fs.ModeDevice | 0o660, "b", ""},
		{"setuid", []string{"/ws", "/ws/su", "/ws/su", "F", "", "89ed 9 1700000000", "F"}, fs.ModeSetuid | 0o755, "su", ""},
		{"sticky dir", []string{"/ws", "/ws/t", "/ws/t", "D", "", "43ff 4096 1700000000", "D"}, fs.ModeDir | fs.ModeSticky | 0o777, "t", ""},
		{"stat failed: a directory", []string{"/ws", "/ws/d", "/ws/d", "D", "", "0 0 0", "D"}, fs.ModeDir, "d", ""},
		{"stat failed: a symlink", []string{"/ws", "/ws/l", "/ws/x", "L", "x", "0 0 0", "N"}, fs.ModeSymlink, "l", "x"},
		{"stat failed: something else", []string{"/ws", "/ws/o", "/ws/o", "O", "", "0 0 0", "O"}, fs.ModeIrregular, "o", ""},
	} {
		abs := tc.lines[1]
		r, err := CheckResolvedPath("stat", tc.rel, abs, "/ws", false, tc.lines)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		fi := r.Info("/ws")
		if fi.Mode != tc.want || fi.Path != tc.rel || fi.Target != tc.targ {
			t.Errorf("%s: Info = mode %v path %q target %q, want %v %q %q", tc.name, fi.Mode, fi.Path, fi.Target, tc.want, tc.rel, tc.targ)
		}
		if tc.lines[5] != "0 0 0" && (fi.Size != r.Size || fi.ModTime.Unix() != 1700000000) {
			t.Errorf("%s: size %d, time %v", tc.name, fi.Size, fi.ModTime)
		}
	}
}
