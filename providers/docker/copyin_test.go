package docker

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/engine/sandbox"
)

// These run without Docker: they check what CopyIn would send.

func filtered(t *testing.T, base string, in *bytes.Buffer) ([]*tar.Header, error) {
	t.Helper()
	s := &Sandbox{d: sessionData{Root: "/workspace", UID: 1000, GID: 1000}}
	var out bytes.Buffer
	if err := s.filterTar(in, &out, base); err != nil {
		return nil, err
	}
	var hdrs []*tar.Header
	tr := tar.NewReader(&out)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return hdrs, nil
		}
		if err != nil {
			t.Fatal(err)
		}
		hdrs = append(hdrs, h)
	}
}

func TestFilterTarHostile(t *testing.T) {
	cases := []struct {
		name string
		base string
		hdr  *tar.Header
		want error
	}{
		{"absolute", "", &tar.Header{Name: "/etc/passwd", Typeflag: tar.TypeReg}, sandbox.ErrPathEscape},
		{"dotdot", "", &tar.Header{Name: "../x", Typeflag: tar.TypeReg}, sandbox.ErrPathEscape},
		{"inner dotdot", "", &tar.Header{Name: "a/b/../../../x", Typeflag: tar.TypeReg}, sandbox.ErrPathEscape},
		{"dotdot dir", "", &tar.Header{Name: "..", Typeflag: tar.TypeDir}, sandbox.ErrPathEscape},
		{"hardlink", "", &tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: "x"}, ErrUnsafeArchive},
		{"char device", "", &tar.Header{Name: "c", Typeflag: tar.TypeChar}, ErrUnsafeArchive},
		{"block device", "", &tar.Header{Name: "b", Typeflag: tar.TypeBlock}, ErrUnsafeArchive},
		{"fifo", "", &tar.Header{Name: "f", Typeflag: tar.TypeFifo}, ErrUnsafeArchive},
		{"absolute symlink out", "", &tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}, sandbox.ErrPathEscape},
		{"symlink to root", "", &tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/"}, sandbox.ErrPathEscape},
		{"symlink to prefix sibling", "", &tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/workspace-other"}, sandbox.ErrPathEscape},
		{"relative symlink out", "", &tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "../etc"}, sandbox.ErrPathEscape},
		{"relative symlink out from sub", "sub", &tar.Header{Name: "a/l", Typeflag: tar.TypeSymlink, Linkname: "../../../x"}, sandbox.ErrPathEscape},
		{"empty symlink", "", &tar.Header{Name: "l", Typeflag: tar.TypeSymlink}, ErrUnsafeArchive},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			tw := tar.NewWriter(&buf)
			if err := tw.WriteHeader(c.hdr); err != nil {
				t.Fatal(err)
			}
			tw.Close()
			_, err := filtered(t, c.base, &buf)
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
		})
	}
}

func TestFilterTarRewrites(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	write := func(h *tar.Header, data string) {
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(data))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, data)
	}
	write(&tar.Header{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755}, "")
	write(&tar.Header{Name: "a/b/c.txt", Typeflag: tar.TypeReg, Mode: 0o4755, Uid: 0,
		PAXRecords: map[string]string{"SCHILY.xattr.security.capability": "x"}}, "data")
	write(&tar.Header{Name: "a/link", Typeflag: tar.TypeSymlink, Linkname: "b/c.txt"}, "")
	write(&tar.Header{Name: "abs", Typeflag: tar.TypeSymlink, Linkname: "/workspace/a"}, "")
	write(&tar.Header{Name: "a/", Typeflag: tar.TypeDir, Mode: 0o2775}, "")
	tw.Close()
	hdrs, err := filtered(t, "", &buf)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, h := range hdrs {
		got = append(got, h.Name)
		if h.Uid != 1000 || h.Gid != 1000 {
			t.Errorf("%s: owner %d:%d, want the sandbox user", h.Name, h.Uid, h.Gid)
		}
		if h.Mode&^0o777 != 0 {
			t.Errorf("%s: mode %o keeps special bits", h.Name, h.Mode)
		}
		if len(h.PAXRecords) != 0 {
			t.Errorf("%s: PAX records %v kept", h.Name, h.PAXRecords)
		}
	}
	want := "a/,a/b/,a/b/c.txt,a/link,abs,a/"
	if strings.Join(got, ",") != want {
		t.Fatalf("members %v, want %s", got, want)
	}
}

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
	if err := rebase(&buf, &out, nil); err != nil {
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
	ok := map[string]string{"": "", ".": "", "a": "a", "a/b/": "a/b", "./a//b": "a/b", "/workspace": "", "/workspace/a/b": "a/b"}
	for in, want := range ok {
		c, err := s.relPath(in)
		if err != nil || strings.Join(c, "/") != want {
			t.Errorf("relPath(%q) = %v, %v; want %q", in, c, err, want)
		}
	}
	for _, in := range []string{"..", "../x", "a/../../x", "a/..", "/etc/passwd", "/workspace/../etc", "/workspacex/a", "/"} {
		if _, err := s.relPath(in); !errors.Is(err, sandbox.ErrPathEscape) {
			t.Errorf("relPath(%q) = %v, want ErrPathEscape", in, err)
		}
	}
}

// FuzzFilterTar checks that whatever CopyIn lets through is safe: relative
// names without "..", only files, directories and symlinks whose targets
// stay in the workspace, no special mode bits, parents before children.
func FuzzFilterTar(f *testing.F) {
	seed := func(hs ...*tar.Header) []byte {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for _, h := range hs {
			tw.WriteHeader(h)
		}
		tw.Close()
		return buf.Bytes()
	}
	f.Add(seed(&tar.Header{Name: "a/b", Typeflag: tar.TypeReg}), "")
	f.Add(seed(&tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "../x"}), "sub")
	f.Add(seed(&tar.Header{Name: "../x", Typeflag: tar.TypeReg}), "")
	f.Add(seed(&tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: "a"}), "")
	f.Add(seed(&tar.Header{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o7777}), "x/y")
	f.Fuzz(func(t *testing.T, data []byte, base string) {
		if _, err := (&Sandbox{d: sessionData{Root: "/w"}}).relPath(base); err != nil {
			return
		}
		s := &Sandbox{d: sessionData{Root: "/w"}}
		var out bytes.Buffer
		done := make(chan error, 1)
		go func() { done <- s.filterTar(bytes.NewReader(data), &out, strings.Trim(base, "/")) }()
		select {
		case err := <-done:
			if err != nil {
				return
			}
		case <-time.After(3 * time.Second):
			t.Fatalf("filterTar hangs on %q", data)
		}
		seen := map[string]bool{}
		tr := tar.NewReader(&out)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				return
			}
			if err != nil {
				t.Fatalf("filter wrote an unreadable archive: %v", err)
			}
			name := strings.TrimSuffix(h.Name, "/")
			if strings.HasPrefix(name, "/") || name == "" {
				t.Fatalf("bad name %q", h.Name)
			}
			for _, c := range strings.Split(name, "/") {
				if c == ".." || c == "." || c == "" {
					t.Fatalf("bad component in %q", h.Name)
				}
			}
			if i := strings.LastIndex(name, "/"); i > 0 && !seen[name[:i]] {
				t.Fatalf("%q sent before its parent", h.Name)
			}
			switch h.Typeflag {
			case tar.TypeDir:
				seen[name] = true
			case tar.TypeReg:
			case tar.TypeSymlink:
				if err := s.checkLink(strings.Trim(base, "/"), name, h.Linkname); err != nil {
					t.Fatalf("unsafe link passed: %v", err)
				}
			default:
				t.Fatalf("type %q passed", h.Typeflag)
			}
			if h.Mode&^0o777 != 0 {
				t.Fatalf("mode %o passed", h.Mode)
			}
		}
	})
}
