//go:build linux

package local_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentctl/agentctl/engine/tools"
	"github.com/agentctl/agentctl/providers/local"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/archive"
	"github.com/agentctl/agentctl/sandbox/hostfs"
)

// toolWithin calls a tool and fails the test if it has not returned when
// its context's deadline passes: a tool that opens a FIFO would block
// forever (and ignore the context).
func toolWithin(t *testing.T, tool tools.Tool, args string) (tools.Output, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	type result struct {
		out tools.Output
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := tool.Call(ctx, args)
		done <- result{out, err}
	}()
	select {
	case r := <-done:
		return r.out, r.err
	case <-ctx.Done():
		t.Fatalf("%s %s did not return before its deadline", tool.Definition().Name, args)
	}
	return tools.Output{}, nil
}

// TestFileToolsOnSpecialFiles: FIFOs and sockets a command creates in the
// workspace are refused by apply_patch and view_image at once, with a
// message the model can read, in both isolation modes.
func TestFileToolsOnSpecialFiles(t *testing.T) {
	for _, iso := range []string{local.IsolationNamespaces, local.IsolationNone} {
		t.Run(iso, func(t *testing.T) {
			sb, _ := newSandbox(t, local.Options{Isolation: iso}, sandbox.Spec{})
			res := sh(t, sb, "mkfifo pipe shot.png && echo ok")
			if res.ExitCode != 0 {
				t.Fatalf("mkfifo: exit %d: %s%s", res.ExitCode, res.Stdout, res.Stderr)
			}
			ws := &sandbox.Workspace{Sandbox: sb}
			opts := tools.FilesystemOptions{Root: "/workspace"}
			patch := tools.NewApplyPatch(ws, opts)
			for _, p := range []string{
				"*** Begin Patch\n*** Add File: pipe\n+hello\n*** End Patch\n",
				"*** Begin Patch\n*** Update File: pipe\n@@\n-a\n+b\n*** End Patch\n",
			} {
				_, err := toolWithin(t, patch, `{"input": `+quote(p)+`}`)
				if err == nil || !strings.Contains(err.Error(), "pipe: it is a named pipe (FIFO), not a regular file") {
					t.Errorf("apply_patch on a FIFO: %v", err)
				}
			}
			_, err := toolWithin(t, tools.NewViewImage(ws, opts), `{"path": "shot.png"}`)
			if err == nil || !strings.Contains(err.Error(), "named pipe (FIFO)") {
				t.Errorf("view_image on a FIFO: %v", err)
			}
			// The sandbox still works, and the FIFO is still there.
			if res := sh(t, sb, "test -p pipe && echo still a fifo"); !strings.Contains(string(res.Stdout), "still a fifo") {
				t.Errorf("after the tools: %s%s", res.Stdout, res.Stderr)
			}
			// Deleting it is fine, and then it can be written.
			out, err := toolWithin(t, patch, `{"input": `+quote("*** Begin Patch\n*** Delete File: pipe\n*** End Patch\n")+`}`)
			if err != nil || !strings.Contains(out.Text, "D pipe") {
				t.Errorf("delete a FIFO: %q %v", out.Text, err)
			}
		})
	}
}

func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}

// TestSparseSnapshotAndRestore: an 8 GB sparse file made by a command
// snapshots into a small file and restores into a new sandbox as a
// sparse file of the same size.
func TestSparseSnapshotAndRestore(t *testing.T) {
	ctx := context.Background()
	sb, _ := newSandbox(t, local.Options{}, sandbox.Spec{})
	if res := sh(t, sb, "truncate -s 8G disk.img && printf tail >> disk.img && echo hi > notes.txt"); res.ExitCode != 0 {
		t.Fatalf("exit %d: %s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	dst := filepath.Join(t.TempDir(), "snapshots", "sandbox.test.tar")
	info, err := archive.Snapshot(ctx, sb, "", nil, dst)
	if err != nil {
		t.Fatal(err)
	}
	if info.Size > 1<<20 {
		t.Fatalf("snapshot is %d bytes for a sparse 8 GB file", info.Size)
	}
	sb2, _ := newSandbox(t, local.Options{}, sandbox.Spec{})
	if err := archive.Restore(ctx, sb2, dst); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(sb2.Dir(), "disk.img"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != 8<<30+4 || st.Blocks*512 > 1<<20 {
		t.Fatalf("restored disk.img: %d bytes taking %d on disk; want %d bytes, sparse", st.Size, st.Blocks*512, int64(8<<30+4))
	}
	if res := sh(t, sb2, "tail -c 4 disk.img; cat notes.txt"); string(res.Stdout) != "tailhi\n" {
		t.Fatalf("restored content: %q", res.Stdout)
	}
}

// TestDeepTreeSnapshotAndDelete: a tree 30,000 directories deep (as
// `mkdir d && cd d` in a loop makes) fails a snapshot with a clear error,
// not EMFILE, and Delete removes the sandbox whole.
func TestDeepTreeSnapshotAndDelete(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a tree 30,000 directories deep")
	}
	ctx := context.Background()
	stateDir := t.TempDir()
	sbi, err := local.New(local.Options{}).Create(ctx, sandbox.Spec{Address: "sandbox.deep", StateDir: stateDir})
	if err != nil {
		t.Fatal(err)
	}
	sb := sbi.(*local.Sandbox)
	mkdirChain(t, sb.Dir(), 30000)
	_, err = archive.Snapshot(ctx, sb, "", nil, filepath.Join(stateDir, "snapshots", "deep.tar"))
	if !errors.Is(err, hostfs.ErrPathTooLong) || errors.Is(err, syscall.EMFILE) {
		t.Fatalf("snapshot of a 30,000-level tree: %v, want ErrPathTooLong", err)
	}
	t.Logf("snapshot: %v", err)
	if err := sb.Delete(ctx); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := os.Lstat(sb.ID()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("sandbox directory left after delete: %v", err)
	}
}

// mkdirChain creates depth nested directories named "d" under root, one
// level at a time through file descriptors.
func mkdirChain(t testing.TB, root string, depth int) {
	t.Helper()
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < depth; i++ {
		if err := unix.Mkdirat(fd, "d", 0o755); err != nil {
			t.Fatal(fmt.Errorf("level %d: %w", i, err))
		}
		next, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	unix.Close(fd)
}
