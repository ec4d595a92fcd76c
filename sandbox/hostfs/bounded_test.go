//go:build linux

package hostfs

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentctl/agentctl/sandbox"
)

// callWithin runs f and fails the test if it has not returned when a
// deadline passes: a file operation that blocks on a FIFO would hang the
// test otherwise.
func callWithin[T any](t *testing.T, what string, f func(ctx context.Context) (T, error)) (T, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := f(ctx)
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		t.Fatalf("%s did not return before its deadline: it blocks", what)
	}
	var zero T
	return zero, nil
}

// specialFiles makes a FIFO, a socket, a symlink to the FIFO and, when
// the test may create device nodes, a character device (/dev/null's
// numbers) in dir, and returns their names.
func specialFiles(t *testing.T, dir string) []string {
	t.Helper()
	if err := unix.Mkfifo(filepath.Join(dir, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(dir, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if err := os.Symlink("pipe", filepath.Join(dir, "link-to-pipe")); err != nil {
		t.Fatal(err)
	}
	names := []string{"pipe", "sock", "link-to-pipe"}
	if err := unix.Mknod(filepath.Join(dir, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err == nil {
		names = append(names, "null")
	} else {
		t.Logf("no device node test: %v", err)
	}
	return names
}

func TestFileOperationsRefuseSpecialFiles(t *testing.T) {
	_, ws := fixture(t)
	names := specialFiles(t, ws)
	for backend, d := range backends(t, ws) {
		for _, n := range names {
			_, err := callWithin(t, backend+" ReadFile "+n, func(ctx context.Context) ([]byte, error) {
				return d.ReadFile(ctx, n, 0)
			})
			if !errors.Is(err, sandbox.ErrNotRegular) || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("%s: ReadFile(%s) = %v, want sandbox.ErrNotRegular", backend, n, err)
			}
			_, err = callWithin(t, backend+" WriteFile "+n, func(ctx context.Context) (struct{}, error) {
				return struct{}{}, d.WriteFile(ctx, n, []byte("x"), 0o644)
			})
			if !errors.Is(err, sandbox.ErrNotRegular) {
				t.Errorf("%s: WriteFile(%s) = %v, want sandbox.ErrNotRegular", backend, n, err)
			}
		}
		// The message names the type.
		_, err := d.ReadFile(context.Background(), "pipe", 0)
		if err == nil || !strings.Contains(err.Error(), "named pipe (FIFO)") {
			t.Errorf("%s: message %q does not say it is a FIFO", backend, err)
		}
	}
	if st, err := os.Lstat(filepath.Join(ws, "pipe")); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("the FIFO was replaced: %v %v", st, err)
	}

	// A FIFO somebody reads: opening it for writing succeeds, and the
	// type check still refuses it.
	r, err := os.OpenFile(filepath.Join(ws, "pipe"), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	d, err := OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	_, err = callWithin(t, "WriteFile on a FIFO with a reader", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, d.WriteFile(ctx, "pipe", []byte("x"), 0o644)
	})
	if !errors.Is(err, sandbox.ErrNotRegular) {
		t.Fatalf("WriteFile on a read FIFO = %v, want sandbox.ErrNotRegular", err)
	}
}

// TestSparseArchiveOnlyWhereExtractReadsIt: CopyOut, whose archives other
// providers' extractors read, keeps holes as zeros; SanitizeTar refuses
// sparse members.
func TestSparseArchiveOnlyWhereExtractReadsIt(t *testing.T) {
	ctx := context.Background()
	h := newHostDir(t)
	if err := os.WriteFile(filepath.Join(h.Path(), "s"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(h.Path(), "s"), 1<<20); err != nil {
		t.Fatal(err)
	}
	rc, err := h.CopyOut(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	plain, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(plain) < 1<<20 {
		t.Fatalf("CopyOut wrote %d bytes: it should not be sparse", len(plain))
	}
	var sparse bytes.Buffer
	if err := Archive(ctx, h.Dir, "", &sparse, ArchiveOptions{Sparse: true}); err != nil {
		t.Fatal(err)
	}
	if sparse.Len() > 16<<10 {
		t.Fatalf("sparse archive is %d bytes", sparse.Len())
	}
	if _, err := sanitized(t, "", sparse.Bytes(), SanitizeOptions{}); !errors.Is(err, ErrUnsafeArchive) {
		t.Fatalf("SanitizeTar of a sparse archive: %v, want ErrUnsafeArchive", err)
	}
}
