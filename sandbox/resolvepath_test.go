package sandbox

import (
	"errors"
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
