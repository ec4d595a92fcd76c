//go:build unix

package nsinit

import (
	"os"
	"path/filepath"
	"testing"
)

func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"bin", "sbin", "work/tools"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(dir, p), []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("bin/tool", 0o755)
	write("sbin/tool", 0o755)
	write("sbin/plain", 0o644)
	write("work/tools/local", 0o755)
	write("work/here", 0o755)
	work := filepath.Join(dir, "work")
	bin, sbin := filepath.Join(dir, "bin"), filepath.Join(dir, "sbin")

	for _, tc := range []struct {
		name, path, want string
		code             int // 0: found
	}{
		{"tool", bin + ":" + sbin, filepath.Join(bin, "tool"), 0},
		{"tool", sbin + ":" + bin, filepath.Join(sbin, "tool"), 0},
		{"local", "tools", filepath.Join(work, "tools/local"), 0},   // relative entries: against the working directory
		{"tools/local", "", filepath.Join(work, "tools/local"), 0},  // a name with a slash ignores PATH
		{"here", bin + "::" + sbin, filepath.Join(work, "here"), 0}, // an empty entry is the working directory
		{"tool", "", "", 127},    // no PATH: not found
		{"plain", sbin, "", 126}, // not executable
		{"missing", bin + ":" + sbin, "", 127},
		{"bin", dir, "", 126}, // a directory
	} {
		got, err := LookPath(tc.name, tc.path, work)
		switch {
		case tc.code == 0 && (err != nil || got != tc.want):
			t.Errorf("LookPath(%q, %q) = %q, %v; want %q", tc.name, tc.path, got, err, tc.want)
		case tc.code != 0 && err == nil:
			t.Errorf("LookPath(%q, %q) = %q; want an error (exit %d)", tc.name, tc.path, got, tc.code)
		case tc.code != 0 && NotFoundCode(err) != tc.code:
			t.Errorf("LookPath(%q, %q): %v, exit code %d, want %d", tc.name, tc.path, err, NotFoundCode(err), tc.code)
		}
	}
}
