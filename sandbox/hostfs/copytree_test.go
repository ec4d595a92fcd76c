//go:build unix

package hostfs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentctl/agentctl/internal/hashpipe"
	"github.com/agentctl/agentctl/internal/testenv"
	"github.com/agentctl/agentctl/internal/testfiles"
	"github.com/agentctl/agentctl/sandbox"
)

// copyTreeSource writes a tree with every kind of entry a copy must get
// right: modes that sanitize differently, old and sub-second mtimes, an
// empty file and directory, a large file, a deep chain of directories
// (more than the descriptors a copy keeps open), excluded entries and,
// unless strict, symlinks.
func copyTreeSource(t *testing.T, withLinks bool) string {
	t.Helper()
	src := t.TempDir()
	files := map[string]struct {
		body string
		mode fs.FileMode
	}{
		"a.txt":            {"alpha", 0o644},
		"private.txt":      {"p", 0o600},
		"group-exec.sh":    {"#!/bin/sh\n", 0o750},
		"setuid":           {"s", 0o4755},
		"empty":            {"", 0o644},
		"d/e/big.bin":      {strings.Repeat("0123456789abcdef", 1<<16) + "tail", 0o644},
		"d/x.sh":           {"echo", 0o755},
		"node_modules/x":   {"excluded", 0o644},
		"d/cache.tmp":      {"excluded", 0o644},
		"name with spaces": {"ok", 0o644},
	}
	old := time.Date(2001, 2, 3, 4, 5, 6, 789_000_000, time.UTC)
	for p, f := range files {
		full := filepath.Join(src, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(f.body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(full, f.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(full, old, old); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(src, "emptydir"), 0o700); err != nil {
		t.Fatal(err)
	}
	deep := filepath.Join(src, filepath.FromSlash(strings.Repeat("n/", maxOpenDirs+10)))
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(deep, "leaf"), []byte("leaf"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A file beside the deep chain, written after coming back up.
	if err := os.WriteFile(filepath.Join(src, "n", "n", "after"), []byte("after"), 0o644); err != nil {
		t.Fatal(err)
	}
	if withLinks {
		for name, target := range map[string]string{"run": "d/x.sh", "abs": "/etc/passwd", "up": "../../outside", "d/e/dirlink": ".."} {
			if err := os.Symlink(target, filepath.Join(src, filepath.FromSlash(name))); err != nil {
				t.Fatal(err)
			}
		}
	}
	return src
}

func openRoot(t *testing.T, dir string) *Dir {
	t.Helper()
	d, err := OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// TestCopyTreeMatchesArchiveExtract: CopyTree gives the tree that
// Extract gives for Archive's tar (entries, sanitized modes, times to the
// second, symlinks as they are, excludes) and the same digest stream,
// whether the kernel copies the contents or the buffered fallback does.
func TestCopyTreeMatchesArchiveExtract(t *testing.T) {
	ctx := context.Background()
	m, err := sandbox.CompileExclude([]string{"node_modules", "*.tmp"})
	if err != nil {
		t.Fatal(err)
	}
	for _, strict := range []bool{false, true} {
		src := copyTreeSource(t, !strict)
		sd := openRoot(t, src)

		var tarDigest bytes.Buffer
		var tarball bytes.Buffer
		if err := Archive(ctx, sd, ".", &tarball, ArchiveOptions{Exclude: m.Match, Strict: strict, Digest: &tarDigest}); err != nil {
			t.Fatal(err)
		}
		viaTar := t.TempDir()
		if err := Extract(ctx, openRoot(t, viaTar), "repo", &tarball, ExtractLimits{}); err != nil {
			t.Fatal(err)
		}
		want := testfiles.DescribeTree(t, viaTar)
		// The statuses Observe is given, in order, by an archive that is
		// not hashed (each file's taken after it was read).
		observer := func(into *[]string) func(string, sandbox.EntryStat) {
			return func(rel string, st sandbox.EntryStat) { *into = append(*into, fmt.Sprintf("%s %+v", rel, st)) }
		}
		var tarSeen []string
		if err := Archive(ctx, sd, ".", io.Discard, ArchiveOptions{Exclude: m.Match, Strict: strict, Observe: observer(&tarSeen)}); err != nil {
			t.Fatal(err)
		}
		if p := want["repo/private.txt"]; !strings.HasPrefix(p, "file 644 1 ") || !strings.HasSuffix(p, "2001-02-03T04:05:06Z") {
			t.Fatalf("the tar path's tree is not what this test expects (sanitized modes, times to the second): %q", want)
		}

		for _, readWrite := range []bool{false, true} {
			t.Run(fmt.Sprintf("strict=%v/readWrite=%v", strict, readWrite), func(t *testing.T) {
				dst := t.TempDir()
				var digest bytes.Buffer
				err := CopyTree(ctx, sd, ".", openRoot(t, dst), "repo", CopyTreeOptions{Exclude: m.Match, Strict: strict, Digest: &digest, readWrite: readWrite})
				if err != nil {
					t.Fatal(err)
				}
				if got := testfiles.DescribeTree(t, dst); !maps.Equal(got, want) {
					t.Errorf("tree differs from the tar path's:\n got %q\nwant %q", got, want)
				}
				if !bytes.Equal(digest.Bytes(), tarDigest.Bytes()) {
					t.Errorf("digest stream differs from the tar path's (%d vs %d bytes)", digest.Len(), tarDigest.Len())
				}
				// A digest that reads the files itself (hashpipe.Writer):
				// every file taken as settled is copied in the kernel and
				// hashed from a second read, to the same digest.
				pipe := hashpipe.New(sha256.New())
				dst3 := t.TempDir()
				if err := CopyTree(ctx, sd, ".", openRoot(t, dst3), "repo", CopyTreeOptions{Exclude: m.Match, Strict: strict, Digest: pipe, readWrite: readWrite, settledAge: -1}); err != nil {
					t.Fatal(err)
				}
				wantSum := sha256.Sum256(tarDigest.Bytes())
				if got := pipe.Sum(); !bytes.Equal(got, wantSum[:]) || pipe.Err() != nil {
					t.Errorf("digest with the files read by the digest: %x, %v; want %x", got, pipe.Err(), wantSum)
				}
				if got := testfiles.DescribeTree(t, dst3); !maps.Equal(got, want) {
					t.Errorf("tree (kernel copy, digest reading the files) differs from the tar path's:\n got %q\nwant %q", got, want)
				}
				// Without a digest the contents go through the kernel (or
				// the fallback), with the same result, and Observe is
				// given the statuses in the archive's order, each file's
				// taken after its copy.
				dst2 := t.TempDir()
				var seen []string
				if err := CopyTree(ctx, sd, ".", openRoot(t, dst2), "repo", CopyTreeOptions{Exclude: m.Match, Strict: strict, Observe: observer(&seen), readWrite: readWrite}); err != nil {
					t.Fatal(err)
				}
				if got := testfiles.DescribeTree(t, dst2); !maps.Equal(got, want) {
					t.Errorf("tree (no digest) differs from the tar path's:\n got %q\nwant %q", got, want)
				}
				if !slices.Equal(seen, tarSeen) {
					t.Errorf("statuses observed (no digest):\n got %q\nwant %q", seen, tarSeen)
				}
			})
		}
	}
}

// TestCopyTreeFallbackWhenKernelCopyRefused: once the file system refuses
// FICLONE and copy_file_range, the copy goes on through the buffer.
func TestCopyTreeFallbackWhenKernelCopyRefused(t *testing.T) {
	src := t.TempDir()
	body := strings.Repeat("x", 300<<10)
	if err := os.WriteFile(filepath.Join(src, "f"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(filepath.Join(src, "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	// A pipe is not a file: FICLONE and copy_file_range refuse it as a
	// file system without them would refuse a file.
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	c := &treeCopier{}
	done := make(chan []byte)
	go func() {
		var b bytes.Buffer
		b.ReadFrom(pr)
		done <- b.Bytes()
	}()
	err = c.copyData(fdFile{int(pw.Fd()), "pipe"}, fdFile{int(in.Fd()), "f"}, 0, 0, int64(len(body)), nil, make([]byte, 64<<10))
	pw.Close()
	got := <-done
	// WriteAt on a pipe fails (ESPIPE): what matters is that the kernel
	// copies were given up for the buffered path, not an error.
	if !c.noClone.Load() || !c.noCopyRange.Load() {
		t.Errorf("kernel copies still on after refusals: clone %v, copy_file_range %v (err %v)", !c.noClone.Load(), !c.noCopyRange.Load(), err)
	}
	if err == nil || !errors.Is(err, syscall.ESPIPE) {
		t.Errorf("copyData into a pipe = %v (%d bytes), want the buffered path's ESPIPE", err, len(got))
	}
}

// TestCopyTreeRefusals: what the extractor refuses, the copy refuses:
// writing through symlinks already in the workspace (as the destination,
// a parent, or a directory's place), special files and symlinks in a
// strict source, the limits; nothing is written outside.
func TestCopyTreeRefusals(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	if err := os.MkdirAll(filepath.Join(src, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"f1", "f2", "sub/secret.txt"} {
		if err := os.WriteFile(filepath.Join(src, f), []byte("pwned"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name  string
		into  string
		plant map[string]string // symlinks in the workspace before the copy
		src   func(t *testing.T, src string)
		opts  CopyTreeOptions
		want  error
	}{
		{name: "destination is a symlink out", into: "planted", want: sandbox.ErrPathEscape},
		{name: "destination is an absolute symlink", into: "abs", plant: map[string]string{"abs": "/tmp"}, want: sandbox.ErrPathEscape},
		{name: "destination parent is a symlink", into: "planted/x", want: sandbox.ErrPathEscape},
		{name: "subdirectory's place holds a symlink out", into: "repo", plant: map[string]string{"repo/sub": "../../sibling"}, want: sandbox.ErrPathEscape},
		{name: "subdirectory's place holds a symlink inside", into: "repo", plant: map[string]string{"repo/sub": "."}, want: sandbox.ErrPathEscape},
		{name: "dotdot destination", into: "../sibling", want: sandbox.ErrPathEscape},
		{name: "symlink in a strict source", into: "repo", src: func(t *testing.T, src string) {
			os.Symlink("/etc", filepath.Join(src, "etc"))
		}, opts: CopyTreeOptions{Strict: true}, want: ErrSpecialFile},
		{name: "fifo in a strict source", into: "repo", src: func(t *testing.T, src string) {
			if err := syscall.Mkfifo(filepath.Join(src, "fifo"), 0o644); err != nil {
				testenv.Missing(t, "the temporary directory's file system cannot hold a FIFO (mkfifo: %v)", err)
			}
		}, opts: CopyTreeOptions{Strict: true}, want: ErrSpecialFile},
		{name: "too many members", into: "repo", opts: CopyTreeOptions{Limits: ExtractLimits{MaxMembers: 2}}, want: ErrUnsafeArchive},
		{name: "too many bytes", into: "repo", opts: CopyTreeOptions{Limits: ExtractLimits{MaxBytes: 8}}, want: ErrUnsafeArchive},
		{name: "bad name in the source", into: "repo", src: func(t *testing.T, src string) {
			os.WriteFile(filepath.Join(src, `back\slash`), nil, 0o644)
		}, want: sandbox.ErrPathEscape},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := src
			if tt.src != nil {
				s = t.TempDir()
				if err := os.WriteFile(filepath.Join(s, "f"), []byte("x"), 0o644); err != nil {
					t.Fatal(err)
				}
				tt.src(t, s)
			}
			parent, ws := fixture(t)
			plant := map[string]string{"planted": "../sibling"}
			for k, v := range tt.plant {
				plant[k] = v
			}
			for name, target := range plant {
				full := filepath.Join(ws, filepath.FromSlash(name))
				os.MkdirAll(filepath.Dir(full), 0o755)
				if err := os.Symlink(target, full); err != nil {
					t.Fatal(err)
				}
			}
			for _, readWrite := range []bool{false, true} {
				opts := tt.opts
				opts.readWrite = readWrite
				err := CopyTree(ctx, openRoot(t, s), ".", openRoot(t, ws), tt.into, opts)
				if !errors.Is(err, tt.want) {
					t.Fatalf("CopyTree = %v, want %v", err, tt.want)
				}
			}
			if b, _ := os.ReadFile(filepath.Join(parent, "sibling", "secret.txt")); string(b) != "secret" {
				t.Errorf("sibling secret changed: %q", b)
			}
			if ents, _ := os.ReadDir(filepath.Join(parent, "sibling")); len(ents) != 1 {
				t.Errorf("sibling workspace gained entries: %v", ents)
			}
			if ents, _ := os.ReadDir(parent); len(ents) != 2 {
				t.Errorf("workspace parent gained entries: %v", ents)
			}
		})
	}
}

// TestCopyTreeReplaces: files and symlinks in the way are replaced (the
// link itself, not its target), an empty directory too, a non-empty
// directory is an error, as with Extract.
func TestCopyTreeReplaces(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	for _, f := range []string{"link", "file", "emptydir"} {
		if err := os.WriteFile(filepath.Join(src, f), []byte("new "+f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	parent, ws := fixture(t)
	repo := filepath.Join(ws, "repo")
	os.MkdirAll(filepath.Join(repo, "emptydir"), 0o755)
	os.Symlink("../../sibling/secret.txt", filepath.Join(repo, "link"))
	os.WriteFile(filepath.Join(repo, "file"), []byte("old"), 0o600)
	if err := CopyTree(ctx, openRoot(t, src), ".", openRoot(t, ws), "repo", CopyTreeOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"link", "file", "emptydir"} {
		st, err := os.Lstat(filepath.Join(repo, f))
		if err != nil || !st.Mode().IsRegular() || st.Mode().Perm() != 0o644 {
			t.Errorf("%s: %v, %v", f, st, err)
		}
		if b, _ := os.ReadFile(filepath.Join(repo, f)); string(b) != "new "+f {
			t.Errorf("%s = %q", f, b)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(parent, "sibling", "secret.txt")); string(b) != "secret" {
		t.Errorf("a symlink's target was written: %q", b)
	}
	// A non-empty directory in a file's place is a conflict.
	os.Remove(filepath.Join(repo, "file"))
	os.MkdirAll(filepath.Join(repo, "file", "inner"), 0o755)
	if err := CopyTree(ctx, openRoot(t, src), ".", openRoot(t, ws), "repo", CopyTreeOptions{}); err == nil || !strings.Contains(err.Error(), "directory is in the way") {
		t.Errorf("copy over a non-empty directory = %v", err)
	}
}

// touchingDigest is a FileDigest that changes every file it is given
// (by its name in the tree under root) before the check runs, as a
// writer racing the copy would.
type touchingDigest struct {
	bytes.Buffer
	root string
	errs []error
}

func (d *touchingDigest) WriteFile(f hashpipe.File, size int64, check func() error) {
	defer f.Close()
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(d.root, f.Name()), later, later); err != nil {
		d.errs = append(d.errs, err)
		return
	}
	d.errs = append(d.errs, check())
}

// TestCopyTreeFileChangedBeforeHashed: a settled file that changes
// between its kernel copy and the digest's read of it fails the digest's
// check (the copy is then worthless and done again, hashed exactly).
func TestCopyTreeFileChangedBeforeHashed(t *testing.T) {
	src := t.TempDir()
	testfiles.WriteTree(t, src, map[string]string{"a.txt": "a", "d/b.txt": "b"})
	d := &touchingDigest{root: src}
	if err := CopyTree(context.Background(), openRoot(t, src), ".", openRoot(t, t.TempDir()), "repo", CopyTreeOptions{Digest: d, settledAge: -1}); err != nil {
		t.Fatal(err)
	}
	if len(d.errs) != 2 {
		t.Fatalf("the digest was given %d files, want 2", len(d.errs))
	}
	for _, err := range d.errs {
		if !errors.Is(err, ErrChangedWhileCopied) {
			t.Errorf("check of a changed file = %v, want ErrChangedWhileCopied", err)
		}
	}
	// Files that changed recently are copied through the buffer and
	// hashed as read: the digest is not given them.
	d = &touchingDigest{root: src}
	if err := CopyTree(context.Background(), openRoot(t, src), ".", openRoot(t, t.TempDir()), "repo", CopyTreeOptions{Digest: d}); err != nil {
		t.Fatal(err)
	}
	if len(d.errs) != 0 {
		t.Errorf("files changed just now were given to the digest (%d)", len(d.errs))
	}
}

// TestArchiveFileAppender: an archive destination that has files'
// content copied into it (FileAppender) gets the same stream as one that
// is written everything, whether it takes every file or refuses (the
// content is then written), and each range's Done is told the copy is
// done; a reservation that fails, or a copy that fails, fails the
// archive.
func TestArchiveFileAppender(t *testing.T) {
	ctx := context.Background()
	src := copyTreeSource(t, true)
	sd := openRoot(t, src)
	var plain bytes.Buffer
	if err := Archive(ctx, sd, ".", &plain, ArchiveOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, refuse := range []bool{false, true} {
		w := newTestAppender(t)
		w.refuse = refuse
		if err := Archive(ctx, sd, ".", w, ArchiveOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(w.f.Name())
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, plain.Bytes()) {
			t.Errorf("refuse=%v: the stream differs from the written one (%d bytes, want %d)", refuse, len(got), plain.Len())
		}
		if !refuse && (w.appended == 0 || w.copied.Load() != int64(w.appended)) {
			t.Errorf("%d ranges reserved, %d told they were copied", w.appended, w.copied.Load())
		}
	}
	boom := errors.New("disk full")
	w := newTestAppender(t)
	w.err = boom
	if err := Archive(ctx, sd, ".", w, ArchiveOptions{}); !errors.Is(err, boom) {
		t.Fatalf("Archive with a failing reservation = %v, want %v", err, boom)
	}
	// A range in a file the worker cannot write.
	w = newTestAppender(t)
	ro, err := os.Open(w.f.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	w.fd = int(ro.Fd())
	if err := Archive(ctx, sd, ".", w, ArchiveOptions{}); err == nil || w.failed.Load() == 0 {
		t.Fatalf("Archive into a read-only range = %v (%d told of a failure), want the copy's error", err, w.failed.Load())
	}
}

// testAppender is a file an archive is written to in order, whose
// files' content Archive copies in (FileAppender).
type testAppender struct {
	f              *os.File
	fd             int // the ranges' file: f's, or another for a test
	off            int64
	refuse         bool
	err            error
	appended       int
	copied, failed atomic.Int64
}

func newTestAppender(t *testing.T) *testAppender {
	f, err := os.Create(filepath.Join(t.TempDir(), "archive.tar"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return &testAppender{f: f, fd: int(f.Fd())}
}

func (a *testAppender) Write(p []byte) (int, error) {
	n, err := a.f.WriteAt(p, a.off)
	a.off += int64(n)
	return n, err
}

func (a *testAppender) AppendRange(size int64) (FileRange, bool, error) {
	if a.refuse {
		return FileRange{}, false, nil
	}
	if a.err != nil {
		return FileRange{}, false, a.err
	}
	rg := FileRange{Fd: a.fd, Off: a.off, Done: func(err error) {
		if err != nil {
			a.failed.Add(1)
		} else {
			a.copied.Add(1)
		}
	}}
	a.off += size
	a.appended++
	return rg, true, nil
}

// TestCopyDataRanges: copyData copies a range of a file from an offset
// into another at an offset, in the kernel or through its buffer alike;
// a source that ends before the range does is an error.
func TestCopyDataRanges(t *testing.T) {
	dir := t.TempDir()
	body := bytes.Repeat([]byte("0123456789abcdef"), 70000) // > 1 MB
	os.WriteFile(filepath.Join(dir, "src"), body, 0o644)
	src, err := os.Open(filepath.Join(dir, "src"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for _, kernel := range []bool{true, false} {
		dst, err := os.Create(filepath.Join(dir, fmt.Sprintf("dst-%v", kernel)))
		if err != nil {
			t.Fatal(err)
		}
		dst.Write([]byte("header"))
		var c kernelCopier
		c.noCopyRange.Store(!kernel)
		buf := make([]byte, 64<<10)
		size := int64(len(body) - 12)
		if err := c.copyData(fdFile{int(dst.Fd()), "dst"}, fdFile{int(src.Fd()), "src"}, 6, 7, size, nil, buf); err != nil {
			t.Fatalf("kernel=%v: copyData = %v", kernel, err)
		}
		got, _ := os.ReadFile(dst.Name())
		if want := append([]byte("header"), body[7:7+size]...); !bytes.Equal(got, want) {
			t.Errorf("kernel=%v: the destination holds %d bytes, not the header and %d bytes of the source from its offset 7", kernel, len(got), size)
		}
		if err := c.copyData(fdFile{int(dst.Fd()), "dst"}, fdFile{int(src.Fd()), "src"}, 0, 7, int64(len(body)), nil, buf); !errors.Is(err, ErrChangedWhileCopied) || !strings.Contains(err.Error(), "shrank") {
			t.Errorf("kernel=%v: copyData past the end = %v; want the file shorter than said, ErrChangedWhileCopied (the tree is copied again)", kernel, err)
		}
		dst.Close()
	}
}

// TestCopyWorkerErrors: a file the worker cannot complete (its source
// is shorter than the walk measured) is the tree copy's error: the next
// send returns it, finish returns it, and the files sent after it are
// closed undone rather than copied.
func TestCopyWorkerErrors(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "src"), []byte("0123456789"), 0o644)
	job := func(name string, size int64) copyJob {
		t.Helper()
		src, err := unix.Open(filepath.Join(dir, "src"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		dst, err := unix.Open(filepath.Join(dir, name), unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		ts := unix.NsecToTimespec(1700000000e9)
		d := fdFile{dst, name}
		return copyJob{name: name, dst: d, src: fdFile{src, "src"}, size: size, finish: fileFinish(d, 0o644, &[2]unix.Timespec{ts, ts})}
	}
	c := &treeCopier{}
	if err := c.send(job("good", 10)); err != nil {
		t.Fatal(err)
	}
	if err := c.send(job("short", 20)); err != nil {
		t.Fatal(err)
	}
	// The worker fails on "short" at some point: sends after it report it.
	var sendErr error
	for i := 0; sendErr == nil && i < 1000; i++ {
		sendErr = c.send(job(fmt.Sprintf("late%d", i), 10))
		if sendErr == nil {
			time.Sleep(time.Millisecond)
		}
	}
	err := c.finish(false)
	for _, e := range []error{sendErr, err} {
		if !errors.Is(e, ErrChangedWhileCopied) || !strings.Contains(e.Error(), "short") || !strings.Contains(e.Error(), "shrank") {
			t.Errorf("error %v, want the short file's, naming it", e)
		}
	}
	if st, err := os.Stat(filepath.Join(dir, "good")); err != nil || st.Size() != 10 || st.Mode().Perm() != 0o644 || st.ModTime().Unix() != 1700000000 {
		t.Errorf("good: %v, %v; want 10 bytes, 0644, its time", st, err)
	}
	// The last file sent after the failure was not copied.
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "late") {
			if st, _ := os.Stat(filepath.Join(dir, e.Name())); st.Size() != 0 {
				t.Errorf("%s was copied after the worker failed", e.Name())
			}
		}
	}
	// A walk that failed abandons what is queued.
	c2 := &treeCopier{}
	c2.send(job("abandoned", 10))
	if err := c2.finish(true); err != nil {
		t.Errorf("finish(abandon) = %v", err)
	}
}
