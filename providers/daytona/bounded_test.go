package daytona

import (
	"context"
	"errors"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/sandbox"
)

// TestSpecialFiles: the toolbox daemon opens what it is asked to
// download or upload, so a FIFO would block it; FIFOs are refused before
// it is asked, with the same message as on other providers.
func TestSpecialFiles(t *testing.T) {
	e := newEnv(t)
	w := e.create(t)
	ws := filepath.Join(e.fake.Root, "workspace")
	if out, err := exec.Command("sh", "-c", "cd '"+ws+"' && mkfifo pipe && ln -s pipe link").CombinedOutput(); err != nil {
		t.Fatalf("mkfifo: %v %s", err, out)
	}
	// Stat says what they are, as os.Lstat would.
	if fi, err := w.Stat(context.Background(), "pipe"); err != nil || fi.Mode.Type() != fs.ModeNamedPipe {
		t.Errorf("Stat of a FIFO: %v %v, want a named pipe", fi.Mode, err)
	}
	if fi, err := w.Stat(context.Background(), "link"); err != nil || fi.Mode.Type() != fs.ModeSymlink || fi.Target != "pipe" {
		t.Errorf("Stat of a symlink to it: %v %q %v", fi.Mode, fi.Target, err)
	}
	for _, n := range []string{"pipe", "link"} {
		for op, f := range map[string]func(ctx context.Context) error{
			"read":  func(ctx context.Context) error { _, err := w.ReadFile(ctx, n, 0); return err },
			"write": func(ctx context.Context) error { return w.WriteFile(ctx, n, []byte("x"), 0o644) },
		} {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			done := make(chan error, 1)
			go func() { done <- f(ctx) }()
			select {
			case err := <-done:
				if !errors.Is(err, sandbox.ErrNotRegular) || !strings.Contains(err.Error(), "named pipe (FIFO)") {
					t.Errorf("%s %s: %v, want ErrNotRegular", op, n, err)
				}
			case <-ctx.Done():
				t.Fatalf("%s %s did not return before its deadline", op, n)
			}
			cancel()
		}
	}
}
