//go:build unix

package sandbox

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestCleanPath(t *testing.T) {
	tests := []struct {
		p    string
		want string // "" = refused
	}{
		{"a.txt", "a.txt"},
		{"./a.txt", "a.txt"},
		{"a/b/c", "a/b/c"},
		{"a//b/", "a/b"},
		{"a/./b", "a/b"},
		{"a/../b", "b"},
		{"", "."},
		{".", "."},
		{"./", "."},
		{"dir/..", "."},
		{"...", "..."},
		{"..a", "..a"},
		{"a..", "a.."},
		{"/workspace", "."},
		{"/workspace/", "."},
		{"/workspace/a/b", "a/b"},
		{"/workspace//a", "a"},
		{"/workspace/./a", "a"},
		{"/workspace/a/../b", "b"},
		{"/etc/../workspace/x", "x"},
		{"..", ""},
		{"../x", ""},
		{"a/../../x", ""},
		{"a/../../workspace/x", ""},
		{"/workspace/..", ""},
		{"/workspace/../workspace/x", ""},
		{"/workspace/a/../../etc", ""},
		{"/workspacex/a", ""},
		{"/work", ""},
		{"/etc/passwd", ""},
		{"/", ""},
		{"//workspacex", ""},
		{"a\x00b", ""},
		{"a\\b", ""},
		{"..\\..\\etc", ""},
	}
	for _, tt := range tests {
		got, err := CleanPath("/workspace", tt.p)
		if tt.want == "" {
			if err == nil {
				t.Errorf("CleanPath(%q) = %q, want refusal", tt.p, got)
			} else if !errors.Is(err, ErrPathEscape) || !strings.Contains(err.Error(), fmt.Sprintf("%q", tt.p)) {
				t.Errorf("CleanPath(%q) error %v: want ErrPathEscape naming the path", tt.p, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("CleanPath(%q) = %q, %v; want %q", tt.p, got, err, tt.want)
		}
	}
	// With no root, absolute paths are refused outright.
	if _, err := CleanPath("", "/workspace/a"); !errors.Is(err, ErrPathEscape) {
		t.Errorf("CleanPath with empty root accepted an absolute path: %v", err)
	}
	// A root of "/" makes every absolute path a workspace path.
	for p, want := range map[string]string{"/etc/x": "etc/x", "/": ".", "/a/../b": "b"} {
		if got, err := CleanPath("/", p); err != nil || got != want {
			t.Errorf("CleanPath(\"/\", %q) = %q, %v; want %q", p, got, err, want)
		}
	}
	if _, err := CleanPath("/", "/.."); !errors.Is(err, ErrPathEscape) {
		t.Errorf("CleanPath(\"/\", \"/..\") = %v, want ErrPathEscape", err)
	}
}

func FuzzCleanPath(f *testing.F) {
	for _, s := range []string{"a", "../a", "/workspace/a", "/workspace/../x", "a/./b/../..", "\x00", "a\\b", "//", "/workspace"} {
		f.Add("/workspace", s)
	}
	f.Add("", "a/b")
	f.Fuzz(func(t *testing.T, root, p string) {
		got, err := CleanPath(root, p)
		if err != nil {
			if !errors.Is(err, ErrPathEscape) {
				t.Fatalf("error does not wrap ErrPathEscape: %v", err)
			}
			return
		}
		if got == "" || strings.HasPrefix(got, "/") || strings.Contains(got, "\x00") || strings.Contains(got, "\\") {
			t.Fatalf("CleanPath(%q, %q) = %q", root, p, got)
		}
		for _, e := range strings.Split(got, "/") {
			if e == ".." || e == "" || (e == "." && got != ".") {
				t.Fatalf("CleanPath(%q, %q) = %q: unclean element %q", root, p, got, e)
			}
		}
		// Idempotent: a clean relative result is accepted as is.
		if again, err := CleanPath(root, got); err != nil || again != got {
			t.Fatalf("CleanPath(%q) = %q, %v; want it unchanged", got, again, err)
		}
	})
}
