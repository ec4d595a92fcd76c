// Package testfiles builds the trees and tar archives tests need (a
// directory from a map of files, a tar stream from headers, a tar stream
// as pre-POSIX tar wrote it) and describes trees to compare them. Only
// tests import it.
package testfiles

import (
	"archive/tar"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// WriteTree writes files (slash-separated path → content) under root,
// creating directories; a name ending in .sh is made executable.
func WriteTree(t testing.TB, root string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(p, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(full, []byte(c), mode); err != nil {
			t.Fatal(err)
		}
	}
}

// Tar builds a tar stream from headers. A regular file's content is its
// Linkname field (the shorthand Reg makes); a header without a mode gets
// 0644.
func Tar(t testing.TB, hdrs ...*tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range hdrs {
		body := ""
		if h.Typeflag == tar.TypeReg {
			body, h.Linkname = h.Linkname, ""
			h.Size = int64(len(body))
		}
		if h.Mode == 0 && h.Typeflag != tar.TypeXGlobalHeader {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if body != "" {
			if _, err := tw.Write([]byte(body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Reg is a regular file member for Tar.
func Reg(name, body string) *tar.Header {
	return &tar.Header{Typeflag: tar.TypeReg, Name: name, Linkname: body, ModTime: time.Unix(1700000000, 0)}
}

// Sym is a symlink member for Tar.
func Sym(name, target string) *tar.Header {
	return &tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target}
}

// LegacyTar builds a tar stream as pre-POSIX tar wrote it: regular files
// (and directories, as names ending in a slash) carry the type flag NUL
// (the deprecated tar.TypeRegA). Members are name, content pairs.
func LegacyTar(t testing.TB, members ...string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	var offs []int // where each member's header starts
	for i := 0; i < len(members); i += 2 {
		offs = append(offs, buf.Len())
		// tar.Writer refuses a regular file named with a trailing slash:
		// write "d_" and make it "d/" below.
		name := strings.TrimSuffix(members[i], "/")
		if name != members[i] {
			name += "_"
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(members[i+1])), Format: tar.FormatUSTAR}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(members[i+1])); err != nil {
			t.Fatal(err)
		}
		if err := tw.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	for i, off := range offs {
		h := b[off : off+512]
		if name := members[2*i]; strings.HasSuffix(name, "/") {
			h[len(name)-1] = '/'
		}
		h[156] = 0
		copy(h[148:156], "        ")
		sum := 0
		for _, c := range h {
			sum += int(c)
		}
		// The checksum field: six octal digits, NUL, space.
		copy(h[148:156], fmt.Sprintf("%06o\x00 ", sum))
	}
	return b
}

// SyncBuffer is a bytes.Buffer safe for a writer goroutine (a process's
// output copier) and the test reading it at once.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Git runs git with args in dir, with a fixed identity and no user or
// system configuration, and returns its output, trimmed; it fails tb when
// git does. Callers check that git is installed first.
func Git(tb testing.TB, dir string, args ...string) string {
	tb.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t",
		"GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		tb.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}
