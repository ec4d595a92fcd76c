package docker

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/sandbox"
)

// These run without Docker. The archive checks CopyIn applies are
// hostfs.SanitizeTar's, tested (and fuzzed) in sandbox/hostfs.

func TestRebase(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range []*tar.Header{
		{Name: "workspace/", Typeflag: tar.TypeDir},
		{Name: "workspace/a", Typeflag: tar.TypeReg},
		{Name: "workspace/d/", Typeflag: tar.TypeDir},
		{Name: "workspace/d/h", Typeflag: tar.TypeLink, Linkname: "workspace/a"},
		{Name: "workspace/s", Typeflag: tar.TypeSymlink, Linkname: "d"},
	} {
		tw.WriteHeader(h)
	}
	tw.Close()
	var out bytes.Buffer
	if err := rebase(io.NopCloser(&buf), &out, nil); err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(&out)
	var got []string
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		got = append(got, h.Name+">"+h.Linkname)
	}
	if want := "a>,d/>,d/h>a,s>d"; strings.Join(got, ",") != want {
		t.Fatalf("rebase = %v, want %s", got, want)
	}
}

func TestRelPath(t *testing.T) {
	s := &Sandbox{d: sessionData{Root: "/workspace"}}
	// The workspace path policy is sandbox.CleanPath's, as for every
	// provider: ".." may not climb above the root at any point.
	ok := map[string]string{"": "", ".": "", "a": "a", "a/b/": "a/b", "./a//b": "a/b", "/workspace": "", "/workspace/a/b": "a/b", "a/..": "", "a/../b": "b"}
	for in, want := range ok {
		c, err := s.relPath(in)
		if err != nil || strings.Join(c, "/") != want {
			t.Errorf("relPath(%q) = %v, %v; want %q", in, c, err, want)
		}
	}
	for _, in := range []string{"..", "../x", "a/../../x", "/etc/passwd", "/workspace/../etc", "/workspacex/a", "/", "a/../../workspace/x", "a\\b", "a\x00b"} {
		if _, err := s.relPath(in); !errors.Is(err, sandbox.ErrPathEscape) {
			t.Errorf("relPath(%q) = %v, want ErrPathEscape", in, err)
		}
	}
}
